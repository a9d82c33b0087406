// The concepts a user type must model to plug into specdec, and the checks that explain in words
// what is missing when it does not.
//
//   Target    — the user's model: prefill, forward a draft tree on top of its KV cache, commit.
//   BatchTarget — a model holding several sequences (slots) that forwards one tree per slot in
//               one call: what SpeculativeBatch decodes.
//   Drafter   — proposes a draft tree each step and observes what was committed.
//   Verifier  — walks the tree against the target's output and decides the accepted path.
//
// A verifier states what it needs from the target's forward() output (`needs`): the argmax per
// node, or full rows of logits. A target whose output only knows argmaxes (e.g. a replay of
// recorded greedy answers) then works with the exact verifier and is refused at compile time by a
// sampling one.
//
// A target whose model runs on a device is a BackendTarget instead: its step's data stays in the
// backend's memory and the verifier runs there too (verify_on), see step/backend_step.hpp; a
// BackendBatchTarget is its form for SpeculativeBatch (the same step for B trees).
//
// This is the one header a policy or target author needs (with DraftContext, DraftTree, TreeView
// and Verdict); it stays small: the backend operations and the sampling code are not included.
// The checks that explain a failed concept in words are in checks.hpp (the decoder includes them;
// a drafter's author runs them with static_assert(specdec::check_drafter<MyDrafter>())).
#pragma once

#include <concepts>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include <specdec/config.hpp>
#include <specdec/core/kv_compaction.hpp>
#include <specdec/core/tree_view.hpp>
#include <specdec/draft_tree.hpp>
#include <specdec/verdict.hpp>

namespace specdec {

namespace backend {
// Defined in backend.hpp; declared here so that the concepts can name them without pulling the
// backend operations (and with them the sampling code) into every policy.
enum class status : int;
struct VerifyJob;
}  // namespace backend

/// What a drafter is told when asked for a draft.
struct DraftContext {
  /// Every committed token of the sequence: the prompt, then what was generated. back() is the
  /// root of the tree to draft (committed, not yet seen by the target).
  std::span<const token_t> tokens;
  /// How many of `tokens` are the prompt.
  int prompt_length = 0;
  /// At most this many non-root nodes will be kept after the merge; proposing more is allowed.
  int budget = 0;
  /// Nodes deeper than this will be dropped (the target's remaining positions).
  int max_depth = 0;
  /// Vocabulary size of the target: proposed tokens must lie in [0, vocab_size).
  int vocab_size = 0;
};

/// The target's features (last hidden states before the classifier) of consecutive positions of
/// the sequence, as a feature drafter is told them: row i is the hidden state the target computed
/// at position first_position + i, i.e. after reading the token at that position, and so the
/// state from which it predicted the token at position first_position + i + 1.
struct TargetFeatures {
  int first_position = 0;
  int rows = 0;
  int dim = 0;                  ///< floats per row (the target's feature_dim())
  const float* data = nullptr;  ///< rows * dim floats, row after row

  std::span<const float> row(int i) const {
    return {data + static_cast<std::size_t>(i) * static_cast<std::size_t>(dim), static_cast<std::size_t>(dim)};
  }
};

/// What a verifier reads from the target's output.
enum class output_need {
  argmax,  ///< the target's most likely token after each node
  logits,  ///< the full row of logits after each node
};

// ---- target output ------------------------------------------------------------------------

template <class O>
concept ArgmaxOutput = requires(const O& out, node_t node) {
  { out.argmax(node) } -> std::convertible_to<token_t>;
};

template <class O>
concept LogitsOutput = requires(const O& out, node_t node) {
  { out.logits(node) } -> std::convertible_to<std::span<const float>>;
};

template <class O>
concept FeatureOutput = requires(const O& out, node_t node) {
  { out.features(node) } -> std::convertible_to<std::span<const float>>;
};

template <class O>
concept TargetOutput = ArgmaxOutput<O> || LogitsOutput<O>;

/// The type forward() returns, without reference or const.
template <class T>
using target_output_t =
    std::remove_cvref_t<decltype(std::declval<T&>().forward(std::declval<const TreeView&>()))>;

// ---- target -------------------------------------------------------------------------------

/// A model that decodes with a KV cache.
///  - vocab_size(): number of tokens.
///  - prefill(tokens): starts a new sequence whose KV cache holds exactly `tokens` (may be empty).
///  - forward(tree): runs every tree node on top of the KV cache; node i sits at position
///    tree.position(i) and attends to the cache and to its tree ancestors (tree.mask). Returns an
///    output with argmax(node) and/or logits(node), valid until the next forward/commit/prefill.
///  - commit(path): appends the K/V of the tree nodes `path` (root first, a chain) to the cache,
///    so that the cache holds exactly the committed tokens.
template <class T>
concept Target = requires(T& t, const T& ct, std::span<const token_t> tokens, const TreeView& tree,
                          std::span<const node_t> path) {
  { ct.vocab_size() } -> std::convertible_to<int>;
  t.prefill(tokens);
  t.forward(tree);
  t.commit(path);
} && TargetOutput<target_output_t<T>>;

/// A target that also returns, per node, its last hidden state before the classifier
/// (out.features(node), feature_dim() floats) — what EAGLE and DReSD draft from — and the same
/// for the tokens of the last prefill (prefill_features(): one row per prefilled token, in order,
/// valid until the next forward/commit/prefill).
template <class T>
concept FeatureTarget = Target<T> && FeatureOutput<target_output_t<T>> && requires(const T& ct) {
  { ct.feature_dim() } -> std::convertible_to<int>;
  { ct.prefill_features() } -> std::convertible_to<std::span<const float>>;
};

/// Optional: a target whose KV cache can be cut back: rewind(n) keeps its first n tokens (n at
/// most what it holds) and drops any uncommitted forward. SpeculativeDecoder::resume() needs it.
template <class T>
concept RewindableTarget = Target<T> && requires(T& t, int tokens) { t.rewind(tokens); };

/// Optional: a target with a fixed number of positions (max_positions()); the decoder then never
/// drafts past it.
template <class T>
concept BoundedTarget = requires(const T& ct) {
  { ct.max_positions() } -> std::convertible_to<int>;
};

/// Optional: a target with its own loop of plain greedy decoding. decode(last, n, stop): `last` is
/// the token after the cached ones; runs one forward per token, each input joining the cache, and
/// returns the n argmax tokens (fewer when one of `stop` came: it is included), the last of them
/// not yet cached. SpeculativeDecoder::generate() hands it the steps that would send the root
/// alone (DecoderOptions::plain_runs).
template <class T>
concept PlainDecodingTarget = Target<T> && requires(T& t, token_t last, int n, std::span<const token_t> stop) {
  { t.decode(last, n, stop) } -> std::convertible_to<std::vector<token_t>>;
};

/// Optional: a FeatureTarget whose plain decoding loop also gives the features:
/// decode(last, n, stop, features) decodes as above and sets `features` to one row of
/// feature_dim() floats per returned token, row i for the token fed at step i (`last`, then the
/// returned tokens), what forward()'s features(0) gives at that position. Decoders whose drafters
/// read features hand it their plain runs.
template <class T>
concept PlainDecodingFeatureTarget =
    PlainDecodingTarget<T> && FeatureTarget<T> &&
    requires(T& t, token_t last, int n, std::span<const token_t> stop, std::vector<float>& features) {
      { t.decode(last, n, stop, features) } -> std::convertible_to<std::vector<token_t>>;
    };

// ---- batch target -------------------------------------------------------------------------

/// The trees of one batched forward: trees[b] is the tree of the sequence in slot slots[b], laid
/// out on that slot's KV cache (trees[b].base_position = the tokens the slot holds). Every slot
/// appears at most once; a tree may be the root alone.
struct TreeBatchView {
  std::span<const int> slots;
  std::span<const TreeView> trees;
};

/// What a batched forward() returns, and the output of one of its trees (out.tree(b)).
/// (Spelled with TreeBatchView{}, not std::declval: GCC 12 mistakes a declval spelling for
/// target_output_t's and answers the single-tree forward's type.)
template <class T>
using batch_output_t = std::remove_cvref_t<decltype(std::declval<T&>().forward(TreeBatchView{}))>;
template <class T>
using tree_output_t = std::remove_cvref_t<decltype(std::declval<const batch_output_t<T>&>().tree(0))>;

/// A model that decodes several sequences at once, each in its own KV state, addressed by a slot
/// id in [0, slots()). What SpeculativeBatch runs: one forward per step for all its requests.
///  - vocab_size(): number of tokens; slots(): how many sequences it holds at once.
///  - prefill(slot, tokens): starts a new sequence in `slot` whose cache holds exactly `tokens`.
///  - forward(batch): runs every tree of the batch on its slot's cache in one call (node i of
///    trees[b] at trees[b].position(i), attending to the slot's cache and its tree ancestors).
///    Returns an output whose tree(b) has argmax(node) and/or logits(node) for trees[b], valid
///    until the next forward/commit/prefill/release. A slot's results must not depend on the
///    other trees of the batch.
///  - commit(slot, path): appends the K/V of the nodes `path` (root first, a chain) of the slot's
///    tree in the last forward to the slot's cache.
///  - release(slot): the slot's sequence has ended; its state may be reused by a later prefill.
template <class T>
concept BatchTarget = requires(T& t, const T& ct, int slot, std::span<const token_t> tokens,
                               const TreeBatchView& batch, std::span<const node_t> path) {
  { ct.vocab_size() } -> std::convertible_to<int>;
  { ct.slots() } -> std::convertible_to<int>;
  t.prefill(slot, tokens);
  t.forward(batch);
  t.commit(slot, path);
  t.release(slot);
} && requires(T& t, const TreeBatchView& batch, int b) { t.forward(batch).tree(b); } && TargetOutput<tree_output_t<T>>;

/// Optional: a BatchTarget whose outputs carry the features feature drafters read (EAGLE, DReSD),
/// as a FeatureTarget's do: out.tree(b).features(node) (feature_dim() floats) and, for the slot's
/// last prefill, prefill_features(slot) (one row per prefilled token, valid until the next call).
template <class T>
concept FeatureBatchTarget = BatchTarget<T> && FeatureOutput<tree_output_t<T>> && requires(const T& ct, int slot) {
  { ct.feature_dim() } -> std::convertible_to<int>;
  { ct.prefill_features(slot) } -> std::convertible_to<std::span<const float>>;
};

// ---- backend target -----------------------------------------------------------------------

/// Rows of logits in a backend's memory: node i's row is data + i * row_stride (vocab floats).
struct LogitsRows {
  const float* data = nullptr;
  long long row_stride = 0;
};

/// A model whose step stays in a backend's memory (backend::host, or backend::cuda for a model on
/// the GPU). The decoder copies the merged tree there once, runs the verifier there (verify_on),
/// compacts the KV cache with backend::compact_kv and copies back only the accepted path: one
/// synchronisation per step.
///  - backend_type, backend(): the tag the step runs with (for CUDA: the model's stream).
///  - vocab_size(), prefill(tokens): as for Target (the tokens are in host memory).
///  - forward(tree): the tree's arrays are in backend memory (size and base_position are plain
///    values); runs every node on top of the cache, writes node i's K/V at cache position
///    tree.base_position + i, and returns its logits rows in backend memory (on CUDA: enqueued on
///    the stream, not waited for).
///  - kv_cache(): the K/V caches (sequence 0 of the layout). After verification the decoder moves
///    the accepted path's rows to contiguous positions, so the cache holds exactly the committed
///    tokens; layout.max_positions bounds the sequence (the whole tree must fit behind it).
template <class T>
concept BackendTarget = requires(T& t, const T& ct, std::span<const token_t> tokens, const TreeView& tree) {
  typename T::backend_type;
  { ct.backend() } -> std::convertible_to<typename T::backend_type>;
  { ct.vocab_size() } -> std::convertible_to<int>;
  t.prefill(tokens);
  { t.forward(tree) } -> std::convertible_to<LogitsRows>;
  { t.kv_cache() } -> std::convertible_to<core::KvCacheView>;
};

/// BackendTarget's form for a batch: a model on a backend holding several sequences (slots) that
/// forwards one tree per slot in one call. What SpeculativeBatch steps on the backend: the batch
/// copies all trees there in one transfer, verifies every tree there, compacts every slot's cache
/// with one backend::compact_kv and copies back only the accepted paths (step/backend_step.hpp).
///  - backend_type, backend(), vocab_size(): as for BackendTarget; slots(): sequences held at once.
///  - prefill(slot, tokens): starts a new sequence in `slot` whose cache holds exactly `tokens`
///    (host memory); release(slot): the slot's sequence has ended.
///  - forward(batch): trees[b] (a host TreeView whose arrays are in backend memory) runs on the
///    cache of slot slots[b]: node i writes its K/V at that slot's position base_position + i.
///    Returns the logits rows of all trees, ragged and in batch order: node i of trees[b] at row
///    (the sizes of trees[0 .. b) summed) + i. A slot's results must not depend on the others.
///  - kv_cache(): the K/V caches, slot s at sequence s of the layout (layout.max_positions
///    bounds every slot).
template <class T>
concept BackendBatchTarget = requires(T& t, const T& ct, int slot, std::span<const token_t> tokens,
                                      const TreeBatchView& batch) {
  typename T::backend_type;
  { ct.backend() } -> std::convertible_to<typename T::backend_type>;
  { ct.vocab_size() } -> std::convertible_to<int>;
  { ct.slots() } -> std::convertible_to<int>;
  t.prefill(slot, tokens);
  t.release(slot);
  { t.forward(batch) } -> std::convertible_to<LogitsRows>;
  { t.kv_cache() } -> std::convertible_to<core::KvCacheView>;
};

// ---- drafter ------------------------------------------------------------------------------

/// Capabilities a drafter may declare as static constexpr members; absent means false.
template <class D>
struct drafter_traits {
  /// The drafter reads the target's features (see FeatureTarget): it is told them with every
  /// begin() and observe().
  static constexpr bool needs_target_features = [] {
    if constexpr (requires { D::needs_target_features; }) return bool(D::needs_target_features);
    else return false;
  }();
  /// The drafter attaches the distributions it sampled its draft tokens from
  /// (DraftTree::add_sampled), so a rejection-sampling verifier can accept them with
  /// probability min(1, p/q) instead of p (a one-hot proposal).
  static constexpr bool emits_draft_probabilities = [] {
    if constexpr (requires { D::emits_draft_probabilities; }) return bool(D::emits_draft_probabilities);
    else return false;
  }();
};

/// A draft policy.
///  - begin(prompt): a new sequence starts with these tokens.
///  - propose(ctx, tree): write a draft below the root; `tree` arrives reset to ctx.tokens.back().
///    An empty draft (root only) is always allowed.
///  - observe(tokens): these tokens were just committed (accepted drafts, then the next token; or
///    the tokens of several root-only steps at once: DecoderOptions::plain_runs).
/// A drafter that declares `needs_target_features` is told the target's features instead:
///  - begin(prompt, features): rows for positions 0 .. prompt.size() - 2 (the prefilled tokens;
///    the last prompt token is the first root, which the target has not read yet).
///  - observe(committed, features): one row per committed token; row k is the feature at the
///    position of the step's root plus k (the root, then each accepted draft token), the state
///    from which the target predicted committed[k]. The last committed token (the next root)
///    has no row yet: it comes with the next step.
/// Together, a feature drafter has seen a row for every position of the sequence but the last.
template <class D>
concept Drafter =
    std::move_constructible<D> &&
    requires(D& d, const DraftContext& ctx, DraftTree& tree) { d.propose(ctx, tree); } &&
    (drafter_traits<D>::needs_target_features
         ? requires(D& d, std::span<const token_t> tokens, const TargetFeatures& features) {
             d.begin(tokens, features);
             d.observe(tokens, features);
           }
         : requires(D& d, std::span<const token_t> tokens) {
             d.begin(tokens);
             d.observe(tokens);
           });

/// A drafter's display name: D::name when it has one.
template <class D>
constexpr const char* drafter_name() {
  if constexpr (requires { { D::name } -> std::convertible_to<const char*>; }) return D::name;
  else return "drafter";
}

// ---- verifier -----------------------------------------------------------------------------

template <class V>
concept Verifier = std::move_constructible<V> && requires {
  { V::needs } -> std::convertible_to<output_need>;
};

/// A verifier that can verify a step on a backend: verify_on(tag, job) enqueues one of the
/// backend operations (greedy_verify, rejection_verify, conditional_verify) on the job's arrays.
/// A verifier that samples also says which random stream it draws from (random_key()).
template <class V, class Backend>
concept BackendVerifier = Verifier<V> && requires(V& v, const Backend& tag, const backend::VerifyJob& job) {
  { v.verify_on(tag, job) } -> std::same_as<backend::status>;
};

/// A verifier that can verify a tree against target output type Out.
template <class V, class Out>
concept VerifierFor = Verifier<V> && requires(V& v, const TreeView& tree, const Out& out,
                                              Verdict& verdict) { v.verify(tree, out, verdict); };

}  // namespace specdec
