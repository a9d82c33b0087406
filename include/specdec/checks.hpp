// The checks behind SpeculativeDecoder's static_asserts: when a composition does not model the
// concepts, each misuse gets one sentence addressed to the type at fault ("In your drafter: ...").
// A drafter's author runs the drafter's checks alone with specdec::check_drafter (at the end).
//
// Rules that keep it to one sentence per misuse:
//  - the order of the policies is checked first (the verifier must be last), so that a misplaced
//    verifier is not told it lacks a drafter's members, nor a drafter a verifier's;
//  - a check whose sentence fired returns false, and the checks that depend on it (the verifier's
//    on the target's output type, a feature drafter's on the target) are skipped;
//  - a member that exists with the wrong signature is reported as such, not as missing.
#pragma once

#include <concepts>
#include <initializer_list>
#include <span>
#include <type_traits>

#include <specdec/concepts.hpp>
#include <specdec/type_list.hpp>

namespace specdec::detail {

// has_member_NAME<C>(): whether class C declares a member called NAME, whatever its signature
// (overloads and templates included). Name lookup in a class deriving from C and from a probe
// that also declares NAME is ambiguous exactly when C declares it.
#define SPECDEC_DETAIL_MEMBER_PROBE(member)                                  \
  struct probe_##member {                                                    \
    int member;                                                              \
  };                                                                         \
  template <class C>                                                         \
  struct probe_##member##_mix : C, probe_##member {};                        \
  template <class C>                                                         \
  constexpr bool has_member_##member() {                                     \
    if constexpr (std::is_class_v<C> && !std::is_final_v<C>)                \
      return !requires { &probe_##member##_mix<C>::member; };               \
    else if constexpr (std::is_class_v<C>)                                   \
      return requires { &C::member; };                                       \
    else                                                                     \
      return false;                                                          \
  }
SPECDEC_DETAIL_MEMBER_PROBE(vocab_size)
SPECDEC_DETAIL_MEMBER_PROBE(prefill)
SPECDEC_DETAIL_MEMBER_PROBE(forward)
SPECDEC_DETAIL_MEMBER_PROBE(commit)
SPECDEC_DETAIL_MEMBER_PROBE(begin)
SPECDEC_DETAIL_MEMBER_PROBE(propose)
SPECDEC_DETAIL_MEMBER_PROBE(observe)
SPECDEC_DETAIL_MEMBER_PROBE(needs)
SPECDEC_DETAIL_MEMBER_PROBE(verify)
SPECDEC_DETAIL_MEMBER_PROBE(verify_on)
SPECDEC_DETAIL_MEMBER_PROBE(slots)
SPECDEC_DETAIL_MEMBER_PROBE(release)
SPECDEC_DETAIL_MEMBER_PROBE(kv_cache)
#undef SPECDEC_DETAIL_MEMBER_PROBE

template <class P>
constexpr bool looks_like_drafter() {
  return has_member_propose<P>() || has_member_begin<P>() || has_member_observe<P>();
}
template <class P>
constexpr bool looks_like_verifier() {
  return !looks_like_drafter<P>() && (has_member_needs<P>() || has_member_verify<P>() || has_member_verify_on<P>());
}

// ---- the order of the policies -------------------------------------------------------------

/// SpeculativeDecoder<Target, Drafter..., Verifier>: the verifier is the last argument, and only it.
template <class... Ds, class V>
constexpr bool check_policy_order(type_list<Ds...>, V*) {
  constexpr bool verifier_among_drafters = (looks_like_verifier<Ds>() || ... || false);
  constexpr bool last_is_drafter = looks_like_drafter<V>();
  static_assert(!(last_is_drafter && verifier_among_drafters),
                "SpeculativeDecoder<Target, Drafter..., Verifier>: the verifier must be the last template "
                "argument, but a drafter (a type with begin/propose/observe) is last and a verifier comes "
                "before it; move the verifier to the end.");
  static_assert(!(last_is_drafter && !verifier_among_drafters),
                "SpeculativeDecoder<Target, Drafter..., Verifier>: the last template argument must be the "
                "verifier, but it is a drafter (a type with begin/propose/observe); add a verifier, e.g. "
                "specdec::ExactVerifier, after the drafters.");
  static_assert(last_is_drafter || !verifier_among_drafters,
                "SpeculativeDecoder<Target, Drafter..., Verifier>: only the last template argument may be "
                "a verifier; every argument between the target and the verifier must be a drafter.");
  return !last_is_drafter && !verifier_among_drafters;
}

// ---- targets -------------------------------------------------------------------------------

template <class T>
constexpr bool check_backend_target() {
  using Backend = typename T::backend_type;
  constexpr bool has_backend = requires(const T& t) { { t.backend() } -> std::convertible_to<Backend>; };
  constexpr bool has_vocab = requires(const T& t) { { t.vocab_size() } -> std::convertible_to<int>; };
  constexpr bool has_prefill = requires(T& t, std::span<const token_t> p) { t.prefill(p); };
  constexpr bool has_forward = requires(T& t, const TreeView& tree) { { t.forward(tree) } -> std::convertible_to<LogitsRows>; };
  constexpr bool has_kv = requires(T& t) { { t.kv_cache() } -> std::convertible_to<core::KvCacheView>; };
  static_assert(has_backend,
                "In your backend target: `backend_type backend() const` is missing; it returns the tag "
                "(e.g. specdec::backend::cuda{stream}) the decoder runs the step with.");
  static_assert(has_vocab, "In your backend target: `int vocab_size() const` is missing.");
  static_assert(has_prefill,
                "In your backend target: `void prefill(std::span<const specdec::token_t> tokens)` is "
                "missing; it starts a new sequence whose KV cache holds exactly `tokens`.");
  static_assert(has_forward,
                "In your backend target: `specdec::LogitsRows forward(const specdec::TreeView&)` is "
                "missing; it runs the tree (arrays in backend memory) and returns its logits rows there.");
  static_assert(has_kv,
                "In your backend target: `specdec::core::KvCacheView kv_cache()` is missing; the decoder "
                "compacts the accepted path's K/V rows in it.");
  return has_backend && has_vocab && has_prefill && has_forward && has_kv;
}

template <class T>
constexpr bool check_host_target() {
  constexpr bool vocab_ok = requires(const T& t) { { t.vocab_size() } -> std::convertible_to<int>; };
  constexpr bool prefill_ok = requires(T& t, std::span<const token_t> p) { t.prefill(p); };
  constexpr bool forward_ok = requires(T& t, const TreeView& tree) { t.forward(tree); };
  constexpr bool commit_ok = requires(T& t, std::span<const node_t> path) { t.commit(path); };
  static_assert(vocab_ok || has_member_vocab_size<T>(), "In your target: `int vocab_size() const` is missing.");
  static_assert(vocab_ok || !has_member_vocab_size<T>(),
                "In your target: `vocab_size` has the wrong signature; declare it as `int vocab_size() const`.");
  static_assert(prefill_ok || has_member_prefill<T>(),
                "In your target: `void prefill(std::span<const specdec::token_t> tokens)` is missing; "
                "it starts a new sequence whose KV cache holds exactly `tokens`.");
  static_assert(prefill_ok || !has_member_prefill<T>(),
                "In your target: `prefill` has the wrong signature; declare it as `void "
                "prefill(std::span<const specdec::token_t> tokens)`.");
  static_assert(forward_ok || has_member_forward<T>(),
                "In your target: `forward(const specdec::TreeView&)` is missing; it runs the draft "
                "tree on top of the KV cache and returns an output with argmax(node) or logits(node).");
  static_assert(forward_ok || !has_member_forward<T>(),
                "In your target: `forward` has the wrong signature; it must accept `const "
                "specdec::TreeView&` and return an output with argmax(node) or logits(node).");
  static_assert(commit_ok || has_member_commit<T>(),
                "In your target: `void commit(std::span<const specdec::node_t> path)` is missing; it "
                "appends the accepted path's K/V so the cache holds exactly the committed tokens.");
  static_assert(commit_ok || !has_member_commit<T>(),
                "In your target: `commit` has the wrong signature; declare it as `void "
                "commit(std::span<const specdec::node_t> path)`.");
  if constexpr (forward_ok) {
    static_assert(TargetOutput<target_output_t<T>>,
                  "In your target: forward() returns a type with neither `token_t argmax(node_t) "
                  "const` nor `std::span<const float> logits(node_t) const`.");
    return vocab_ok && prefill_ok && commit_ok && TargetOutput<target_output_t<T>>;
  } else {
    return false;
  }
}

/// The member checks of a BatchTarget.
template <class T>
constexpr bool check_batch_members() {
  constexpr bool vocab_ok = requires(const T& t) { { t.vocab_size() } -> std::convertible_to<int>; };
  constexpr bool slots_ok = requires(const T& t) { { t.slots() } -> std::convertible_to<int>; };
  constexpr bool prefill_ok = requires(T& t, int slot, std::span<const token_t> p) { t.prefill(slot, p); };
  constexpr bool forward_ok = requires(T& t, const TreeBatchView& batch) { t.forward(batch); };
  constexpr bool commit_ok = requires(T& t, int slot, std::span<const node_t> path) { t.commit(slot, path); };
  constexpr bool release_ok = requires(T& t, int slot) { t.release(slot); };
  static_assert(vocab_ok, "In your batch target: `int vocab_size() const` is missing.");
  static_assert(slots_ok || has_member_slots<T>(),
                "In your batch target: `int slots() const` is missing; it says how many sequences the "
                "target holds at once (slot ids are 0 .. slots() - 1).");
  static_assert(slots_ok || !has_member_slots<T>(),
                "In your batch target: `slots` has the wrong signature; declare it as `int slots() const`.");
  static_assert(prefill_ok || has_member_prefill<T>(),
                "In your batch target: `void prefill(int slot, std::span<const specdec::token_t> tokens)` "
                "is missing; it starts a new sequence in `slot` whose KV cache holds exactly `tokens`.");
  static_assert(prefill_ok || !has_member_prefill<T>(),
                "In your batch target: `prefill` has the wrong signature; declare it as `void prefill(int "
                "slot, std::span<const specdec::token_t> tokens)`.");
  static_assert(forward_ok || has_member_forward<T>(),
                "In your batch target: `forward(const specdec::TreeBatchView&)` is missing; it runs one "
                "tree per slot in one call and returns an output whose tree(b) has argmax or logits.");
  static_assert(forward_ok || !has_member_forward<T>(),
                "In your batch target: `forward` has the wrong signature; it must accept `const "
                "specdec::TreeBatchView&` and return an output whose tree(b) has argmax or logits.");
  static_assert(commit_ok || has_member_commit<T>(),
                "In your batch target: `void commit(int slot, std::span<const specdec::node_t> path)` is "
                "missing; it appends the accepted path of the slot's last tree to the slot's cache.");
  static_assert(commit_ok || !has_member_commit<T>(),
                "In your batch target: `commit` has the wrong signature; declare it as `void commit(int "
                "slot, std::span<const specdec::node_t> path)`.");
  static_assert(release_ok || has_member_release<T>(),
                "In your batch target: `void release(int slot)` is missing; it is told that the slot's "
                "sequence has ended, so that its state can be reused.");
  static_assert(release_ok || !has_member_release<T>(),
                "In your batch target: `release` has the wrong signature; declare it as `void release(int slot)`.");
  if constexpr (forward_ok) {
    constexpr bool per_tree = requires(const batch_output_t<T>& out, int b) { out.tree(b); };
    static_assert(per_tree,
                  "In your batch target: forward(batch) returns a type without `tree(int b) const`, the "
                  "output of the batch's tree b.");
    if constexpr (per_tree) {
      static_assert(TargetOutput<tree_output_t<T>>,
                    "In your batch target: forward(batch).tree(b) returns a type with neither `token_t "
                    "argmax(node_t) const` nor `std::span<const float> logits(node_t) const`.");
      return vocab_ok && slots_ok && prefill_ok && commit_ok && release_ok && TargetOutput<tree_output_t<T>>;
    } else {
      return false;
    }
  } else {
    return false;
  }
}

/// The checks of a BackendBatchTarget (a batch target that declares backend_type).
template <class T>
constexpr bool check_backend_batch_target() {
  using Backend = typename T::backend_type;
  constexpr bool has_backend = requires(const T& t) { { t.backend() } -> std::convertible_to<Backend>; };
  constexpr bool has_vocab = requires(const T& t) { { t.vocab_size() } -> std::convertible_to<int>; };
  constexpr bool has_slots = requires(const T& t) { { t.slots() } -> std::convertible_to<int>; };
  constexpr bool has_prefill = requires(T& t, int slot, std::span<const token_t> p) { t.prefill(slot, p); };
  constexpr bool has_release = requires(T& t, int slot) { t.release(slot); };
  constexpr bool has_forward = requires(T& t, const TreeBatchView& batch) {
    { t.forward(batch) } -> std::convertible_to<LogitsRows>;
  };
  constexpr bool has_kv = requires(T& t) { { t.kv_cache() } -> std::convertible_to<core::KvCacheView>; };
  static_assert(has_backend,
                "In your backend batch target: `backend_type backend() const` is missing; it returns the tag "
                "(e.g. specdec::backend::cuda{stream}) the batch runs its steps with.");
  static_assert(has_vocab, "In your backend batch target: `int vocab_size() const` is missing.");
  static_assert(has_slots,
                "In your backend batch target: `int slots() const` is missing; it says how many sequences the "
                "target holds at once (slot ids are 0 .. slots() - 1).");
  static_assert(has_prefill,
                "In your backend batch target: `void prefill(int slot, std::span<const specdec::token_t> tokens)` "
                "is missing; it starts a new sequence in `slot` whose KV cache holds exactly `tokens`.");
  static_assert(has_release,
                "In your backend batch target: `void release(int slot)` is missing; it is told that the slot's "
                "sequence has ended.");
  static_assert(has_forward,
                "In your backend batch target: `specdec::LogitsRows forward(const specdec::TreeBatchView&)` is "
                "missing; it runs one tree per slot (arrays in backend memory) and returns their logits rows "
                "there, tree after tree.");
  static_assert(has_kv,
                "In your backend batch target: `specdec::core::KvCacheView kv_cache()` is missing; the batch "
                "compacts each slot's accepted path in it (slot s at sequence s).");
  return has_backend && has_vocab && has_slots && has_prefill && has_release && has_forward && has_kv;
}

/// The checks of a BatchTarget (SpeculativeBatch's target). A single-sequence Target is told
/// about PerSlotTarget in one sentence, not each batch member it lacks.
template <class T>
constexpr bool check_batch_target() {
  if constexpr (Target<T> && !requires(const T& t) { t.slots(); }) {
    static_assert(!Target<T>,
                  "SpeculativeBatch needs a specdec::BatchTarget, and this target models specdec::Target (one "
                  "sequence): wrap it in specdec::PerSlotTarget<T> (<specdec/targets/per_slot.hpp>, one forward "
                  "per request), or give it slots(), prefill(slot, tokens), forward(const TreeBatchView&), "
                  "commit(slot, path) and release(slot).");
    return false;
  } else if constexpr (requires { typename T::backend_type; }) {
    return check_backend_batch_target<T>();
  } else if constexpr (has_member_kv_cache<T>() && !has_member_commit<T>()) {
    static_assert(!has_member_kv_cache<T>(),
                  "In your batch target: it has kv_cache() but no `backend_type`, so it was checked as a "
                  "host BatchTarget (which needs commit(slot, path)). A batch target on a backend declares "
                  "`using backend_type = specdec::backend::host;` (or backend::cuda) and `backend_type "
                  "backend() const`: the tags come from <specdec/backend.hpp>, included before the target.");
    return false;
  } else {
    return check_batch_members<T>();
  }
}

/// The checks of a BackendTarget when the type declares backend_type, of a Target otherwise.
template <class T>
constexpr bool check_target() {
  if constexpr (requires { typename T::backend_type; }) {
    return check_backend_target<T>();
  } else if constexpr (has_member_kv_cache<T>() && !has_member_commit<T>()) {
    static_assert(!has_member_kv_cache<T>(),
                  "In your target: it has kv_cache() but no `backend_type`, so it was checked as a host "
                  "Target (which needs commit()). A target on a backend declares `using backend_type = "
                  "specdec::backend::host;` (or backend::cuda) and `backend_type backend() const`: the tags "
                  "come from <specdec/backend.hpp>, included before the target.");
    return false;
  } else {
    return check_host_target<T>();
  }
}

// ---- drafters ------------------------------------------------------------------------------

// The parameter is named YourDrafter so that the compiler's "In instantiation of ... [with
// YourDrafter = ...]" line above each sentence names the user's type (a C++20 static_assert
// message is a string literal and cannot).
template <class YourDrafter>
constexpr bool check_drafter() {
  using D = YourDrafter;
  constexpr bool movable = std::move_constructible<D>;
  static_assert(movable, "In your drafter: the type must be move-constructible.");
  constexpr bool propose_ok = requires(D& d, const DraftContext& ctx, DraftTree& tree) { d.propose(ctx, tree); };
  bool begin_ok = false, observe_ok = false;
  if constexpr (drafter_traits<D>::needs_target_features) {
    constexpr bool has_begin = requires(D& d, std::span<const token_t> p, const TargetFeatures& f) { d.begin(p, f); };
    constexpr bool has_observe = requires(D& d, std::span<const token_t> t, const TargetFeatures& f) { d.observe(t, f); };
    static_assert(has_begin || has_member_begin<D>(),
                  "In your feature drafter (needs_target_features): `void begin(std::span<const "
                  "specdec::token_t> prompt, const specdec::TargetFeatures& prompt_features)` is missing; "
                  "it is called when a new sequence starts.");
    static_assert(has_begin || !has_member_begin<D>(),
                  "In your feature drafter (needs_target_features): `begin` has the wrong signature; "
                  "declare it as `void begin(std::span<const specdec::token_t> prompt, const "
                  "specdec::TargetFeatures& prompt_features)`.");
    static_assert(has_observe || has_member_observe<D>(),
                  "In your feature drafter (needs_target_features): `void observe(std::span<const "
                  "specdec::token_t> committed, const specdec::TargetFeatures& features)` is missing; it "
                  "is told each step's committed tokens with the target's features of their positions.");
    static_assert(has_observe || !has_member_observe<D>(),
                  "In your feature drafter (needs_target_features): `observe` has the wrong signature; "
                  "declare it as `void observe(std::span<const specdec::token_t> committed, const "
                  "specdec::TargetFeatures& features)`.");
    begin_ok = has_begin;
    observe_ok = has_observe;
  } else {
    constexpr bool has_begin = requires(D& d, std::span<const token_t> p) { d.begin(p); };
    constexpr bool has_observe = requires(D& d, std::span<const token_t> t) { d.observe(t); };
    static_assert(has_begin || has_member_begin<D>(),
                  "In your drafter: `void begin(std::span<const specdec::token_t> prompt)` is missing; "
                  "it is called when a new sequence starts.");
    static_assert(has_begin || !has_member_begin<D>(),
                  "In your drafter: `begin` has the wrong signature; declare it as `void "
                  "begin(std::span<const specdec::token_t> prompt)` (a feature drafter also declares "
                  "`static constexpr bool needs_target_features = true`).");
    static_assert(has_observe || has_member_observe<D>(),
                  "In your drafter: `void observe(std::span<const specdec::token_t> committed)` is "
                  "missing; it is told the tokens committed by each step.");
    static_assert(has_observe || !has_member_observe<D>(),
                  "In your drafter: `observe` has the wrong signature; declare it as `void "
                  "observe(std::span<const specdec::token_t> committed)` (a feature drafter also declares "
                  "`static constexpr bool needs_target_features = true`).");
    begin_ok = has_begin;
    observe_ok = has_observe;
  }
  static_assert(propose_ok || has_member_propose<D>(),
                "In your drafter: `void propose(const specdec::DraftContext&, specdec::DraftTree&)` is "
                "missing; it writes this step's draft below the tree's root.");
  static_assert(propose_ok || !has_member_propose<D>(),
                "In your drafter: `propose` has the wrong signature; declare it as `void propose(const "
                "specdec::DraftContext& ctx, specdec::DraftTree& tree)`.");
  return movable && propose_ok && begin_ok && observe_ok;
}

/// A drafter that reads features needs a host target that gives them.
template <class D, class T>
constexpr bool check_drafter_for_target() {
  if constexpr (drafter_traits<D>::needs_target_features) {
    constexpr bool backend = requires { typename T::backend_type; };
    static_assert(!backend,
                  "This drafter reads the target's features (needs_target_features), but the target is "
                  "a BackendTarget, whose step does not return features yet; use a host FeatureTarget.");
    static_assert(backend || FeatureTarget<T>,
                  "This drafter reads the target's features (needs_target_features), but the target is "
                  "not a specdec::FeatureTarget: its output needs `std::span<const float> features(node_t) "
                  "const`, and the target `int feature_dim() const` and `std::span<const float> "
                  "prefill_features() const`.");
    return !backend && FeatureTarget<T>;
  } else {
    return true;
  }
}

// ---- verifiers -----------------------------------------------------------------------------

template <class V>
constexpr bool check_verifier_needs() {
  constexpr bool needs_ok = requires { { V::needs } -> std::convertible_to<output_need>; };
  static_assert(needs_ok || has_member_needs<V>(),
                "In your verifier: `static constexpr specdec::output_need needs` is missing; say "
                "whether verify() reads argmax(node) or logits(node) of the target's output.");
  static_assert(needs_ok || !has_member_needs<V>(),
                "In your verifier: `needs` has the wrong type; declare it as `static constexpr "
                "specdec::output_need needs = specdec::output_need::argmax` (or ::logits).");
  return needs_ok;
}

template <class V, class Out>
constexpr bool check_verifier() {
  if constexpr (!check_verifier_needs<V>()) {
    return false;
  } else if constexpr (V::needs == output_need::logits && !LogitsOutput<Out>) {
    static_assert(LogitsOutput<Out>,
                  "This verifier samples from full rows of logits, but the target's forward() "
                  "output has no `std::span<const float> logits(node_t) const` (it gives argmaxes "
                  "only). Use specdec::ExactVerifier with this target, or a target with logits.");
    return false;
  } else {
    constexpr bool verify_ok = requires(V& v, const TreeView& tree, const Out& out, Verdict& verdict) {
      v.verify(tree, out, verdict);
    };
    static_assert(verify_ok || has_member_verify<V>(),
                  "In your verifier: `void verify(const specdec::TreeView&, const Output&, "
                  "specdec::Verdict&)` is missing; it walks the tree against the target's output.");
    static_assert(verify_ok || !has_member_verify<V>(),
                  "In your verifier: `verify` does not accept (const specdec::TreeView&, const Output&, "
                  "specdec::Verdict&) for this target's output type; make it a template on the output.");
    return verify_ok;
  }
}

template <class V, class Backend>
constexpr bool check_backend_verifier() {
  if constexpr (!check_verifier_needs<V>()) {
    return false;
  } else {
    static_assert(BackendVerifier<V, Backend>,
                  "This target is a BackendTarget (its step stays in backend memory), so the verifier "
                  "must verify there: `template <class Backend> specdec::backend::status verify_on(const "
                  "Backend&, const specdec::backend::VerifyJob&)` is missing. specdec's ExactVerifier, "
                  "RejectionSampling and ConditionalVerifier have one.");
    return BackendVerifier<V, Backend>;
  }
}

/// The verifier check that fits the target: verify_on for a BackendTarget, verify otherwise.
template <class V, class T>
constexpr bool check_verifier_for_target() {
  if constexpr (requires { typename T::backend_type; }) return check_backend_verifier<V, typename T::backend_type>();
  else return check_verifier<V, target_output_t<T>>();
}

/// The same for SpeculativeBatch's target: verify_on for a BackendBatchTarget, verify against the
/// output of one tree otherwise.
template <class V, class T>
constexpr bool check_verifier_for_batch_target() {
  if constexpr (requires { typename T::backend_type; }) return check_backend_verifier<V, typename T::backend_type>();
  else return check_verifier<V, tree_output_t<T>>();
}

// ---- the whole composition -----------------------------------------------------------------

/// Whether every result is true. A braced list evaluates them all, so that each failed check gives
/// its message, where a fold of && would stop at the first (and Clang warns at a fold of &).
constexpr bool all_true(std::initializer_list<bool> results) {
  for (const bool result : results)
    if (!result) return false;
  return true;
}

/// Every check of SpeculativeDecoder<Target, Drafters..., Verifier>, each message at most once:
/// order first; then the target and each drafter (independent of each other); then what depends
/// on them (feature drafters on the target, the verifier on the target's output).
template <class T, class... Ds, class V>
constexpr bool check_decoder(type_list<Ds...>, V*) {
  if constexpr (!check_policy_order(type_list<Ds...>{}, static_cast<V*>(nullptr))) {
    return false;
  } else {
    constexpr bool target_ok = check_target<T>();
    constexpr bool drafters_ok = all_true({check_drafter<Ds>()...});
    if constexpr (!target_ok) {
      return false;
    } else {
      constexpr bool verifier_ok = check_verifier_for_target<V, T>();
      if constexpr (!drafters_ok) return false;
      else return all_true({check_drafter_for_target<Ds, T>()..., verifier_ok});
    }
  }
}

/// Every check of SpeculativeBatch<BatchTarget, Drafters..., Verifier>, in the order of
/// check_decoder; the verifier is checked against the output of one tree of the batch.
template <class T, class... Ds, class V>
constexpr bool check_batch_decoder(type_list<Ds...>, V*) {
  if constexpr (!check_policy_order(type_list<Ds...>{}, static_cast<V*>(nullptr))) {
    return false;
  } else {
    constexpr bool target_ok = check_batch_target<T>();
    constexpr bool drafters_ok = all_true({check_drafter<Ds>()...});
    if constexpr (!target_ok) {
      return false;
    } else {
      constexpr bool features_ok = !(drafter_traits<Ds>::needs_target_features || ... || false) || FeatureBatchTarget<T>;
      static_assert(features_ok,
                    "SpeculativeBatch: a drafter reads the target's features (needs_target_features), and the "
                    "batch target is no specdec::FeatureBatchTarget: give it feature_dim(), prefill_features(slot) "
                    "and features(node) in out.tree(b), as Llama2cBatchTarget has.");
      constexpr bool verifier_ok = check_verifier_for_batch_target<V, T>();
      return drafters_ok && features_ok && verifier_ok;
    }
  }
}

}  // namespace specdec::detail

namespace specdec {

/// The worded checks of one drafter, for the end of its header:
///   static_assert(specdec::check_drafter<MyDrafter>());
/// Where `static_assert(specdec::Drafter<MyDrafter>)` says only "static assertion failed" and
/// dumps the concept, each misuse here stops the compilation with the sentence the decoder would
/// give (`In your drafter: ...`; the line above it names the type: `[with YourDrafter =
/// MyDrafter]`). It returns true, so that a failed check gives that one error and no second
/// "static assertion failed"; whenever the program compiles, MyDrafter models specdec::Drafter.
template <class YourDrafter>
constexpr bool check_drafter() {
  detail::check_drafter<YourDrafter>();
  return true;
}

}  // namespace specdec
