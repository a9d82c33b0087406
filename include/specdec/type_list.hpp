// A minimal type list, used to split `SpeculativeDecoder<Target, Drafter..., Verifier>`'s pack.
#pragma once

#include <cstddef>
#include <tuple>
#include <utility>

namespace specdec::detail {

template <class... Ts>
struct type_list {
  static constexpr std::size_t size = sizeof...(Ts);
  template <template <class...> class F>
  using apply = F<Ts...>;
};

/// split_last<Ts...>: `init` is a type_list of all but the last type, `last` is the last type.
/// A decoder's `Drafter..., Verifier` pack is split with it.
template <class... Ts>
struct split_last;

/// Stands in for the verifier when a decoder is given no policy (its own message says so).
struct no_verifier {};

/// An empty pack: no drafter, and no_verifier, so that a decoder given no policy gets only its own
/// static_assert sentence, not a knock-on error from the split.
template <>
struct split_last<> {
  using init = type_list<>;
  using last = no_verifier;
};

template <class Last>
struct split_last<Last> {
  using init = type_list<>;
  using last = Last;
};

template <class First, class... Rest>
struct split_last<First, Rest...> {
 private:
  using tail = split_last<Rest...>;
  template <class... Init>
  static type_list<First, Init...> prepend(type_list<Init...>);

 public:
  using init = decltype(prepend(typename tail::init{}));
  using last = typename tail::last;
};

}  // namespace specdec::detail
