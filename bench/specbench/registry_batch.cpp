// Every registered combination (combinations.hpp) compiled for `--batch` of `model` and `replay`:
// SpeculativeBatch<ModelBatchTarget or ReplayBatchTarget, Drafters..., ExactVerifier>. Combinations
// with a feature drafter get no replay runner (a replay has no features).
#include "batch.hpp"
#include "combinations.hpp"
#include "registry.hpp"

namespace specbench {

namespace {

template <class... Drafters>
BatchRunners batch_runners_of(specdec::detail::type_list<Drafters...>) {
  if constexpr ((specdec::drafter_traits<Drafters>::needs_target_features || ...))
    return {&decode_model_batch<Drafters...>, nullptr};
  else return {&decode_model_batch<Drafters...>, &replay_batch<Drafters...>};
}

template <class... Lists>
std::vector<BatchRunners> all_batch_runners(specdec::detail::type_list<Lists...>) {
  return {batch_runners_of(Lists{})...};
}

}  // namespace

const std::vector<BatchRunners>& batch_runners() {
  static const std::vector<BatchRunners> list = all_batch_runners(registered_combinations{});
  return list;
}

}  // namespace specbench
