// The step after the merge for a BackendTarget (SpeculativeDecoder, one tree) or a
// BackendBatchTarget (SpeculativeBatch, B trees): everything runs on the target's backend, in its
// memory, and only the accepted paths come back.
//
//   host                          backend (stream order; nothing waits in between)
//   B merged trees --copy-------> tree arrays ─> target.forward ─> verifier.verify_on ─> compact_kv
//   B paths, next  <--copy------- outputs  <────────────────────────────────────────────────┘
//                   synchronize (the one wait of the step)
//
// Marks between the parts (backend::marks: CUDA events, the clock on the host) say, after the
// wait, how long each part took there (phases(), DecodeStats::backend_phases).
//
// The wait is needed: the accepted lengths decide what the host appends to the contexts, what the
// drafters observe, where the next trees start and whether a sequence stops; a bad status must
// become a specdec::error. The tree arrays and the outputs share one packed buffer (outputs first),
// so each direction is a single copy from or to staging memory (pinned on CUDA).
//
// verify_on runs once per run of consecutive trees whose verifiers verify alike (random keys
// aside; see verifies_alike): once for the whole batch with ExactVerifier, or with
// RejectionSampling when the requests share their sampling parameters. compact_kv runs once for
// every tree.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include <specdec/backend.hpp>
#include <specdec/concepts.hpp>
#include <specdec/error.hpp>
#include <specdec/core/tree_view.hpp>
#include <specdec/stats.hpp>
#include <specdec/verdict.hpp>

namespace specdec::detail {

/// Byte offsets of arrays packed one after another, each aligned for any element type.
class Packing {
 public:
  template <class T>
  std::size_t add(std::size_t count) {
    static_assert(std::is_trivially_copyable_v<T>);
    size_ = (size_ + alignment - 1) / alignment * alignment;
    const std::size_t at = size_;
    size_ += sizeof(T) * count;
    return at;
  }
  std::size_t size() const { return size_; }

 private:
  static constexpr std::size_t alignment = 16;
  std::size_t size_ = 0;
};

/// Can one verify_on call verify the trees of verifiers `a` and `b` (each with its own random
/// key)? Always for a verifier without state (ExactVerifier); when the verifier says so with
/// `bool verifies_on_like(const V&) const` (RejectionSampling: same sampling parameters);
/// otherwise not, and each tree gets its own call.
template <class V>
bool verifies_alike(const V& a, const V& b) {
  if constexpr (std::is_empty_v<V>) return true;
  else if constexpr (requires { { a.verifies_on_like(b) } -> std::convertible_to<bool>; }) return a.verifies_on_like(b);
  else return false;
}

template <class Backend>
class BackendStep {
#if !SPECDEC_CUDA_OPERATIONS
  static_assert(!std::is_same_v<Backend, backend::cuda>,
                "A BackendTarget or BackendBatchTarget on backend::cuda must be decoded in a CUDA translation unit (a .cu file "
                "compiled by nvcc) or in a file that defines SPECDEC_CUDA_KERNELS_EXTERN (the kernels compiled once: "
                "specdec::cuda_kernels): the CUDA operations are declared only there.");
#endif

 public:
  /// The most draft nodes a tree may have: what one step verifies and compacts.
  static constexpr int max_budget = (backend::max_compaction_nodes < backend::max_verify_nodes
                                         ? backend::max_compaction_nodes
                                         : backend::max_verify_nodes) - 1;
  /// The most trees a step takes.
  static constexpr int max_trees = backend::max_batch;

  /// Sets the backend and the width of a logits row, and sizes the buffers for `trees` trees of
  /// up to `nodes` nodes each (root included) without draft distributions, so that such steps
  /// allocate nothing (on CUDA: never wait for the device but once). Errors begin with `owner`
  /// (the facade) and, where `name_slots`, name the slot of the tree they concern.
  void prepare(const Backend& tag, int vocab, const char* owner, bool name_slots, int trees = 1, int nodes = 1) {
    tag_ = tag;
    vocab_ = vocab;
    owner_ = owner;
    name_slots_ = name_slots;
    Totals most;
    most.trees = static_cast<std::size_t>(trees);
    most.nodes = most.trees * static_cast<std::size_t>(nodes);
    most.words = most.nodes * static_cast<std::size_t>(core::mask_words(nodes));
    most.max_nodes = nodes;
    max_nodes_ = nodes;
    run_ends_.assign(1, trees);
    const Places at = places(most);
    staging_.grow(at.total);
    packed_.grow(at.total);
    grow_scratch(most);
  }

  /// Runs the step of `batch` (host TreeViews laid out on their slots' caches; one tree, slot 0,
  /// for a BackendTarget) and writes tree b's accepted path and next token to verdict_of(b),
  /// verifying it with verifier_of(b). Buffers grow when a step needs more than prepare() and
  /// every step before (on CUDA: a wait). Throws specdec::error on a failed operation or a bad
  /// status; the slots' caches may then be partly compacted, and their sequences must start
  /// again with prefill.
  template <class Target, class VerifierOf, class VerdictOf>
  void run(Target& target, const TreeBatchView& batch, VerifierOf&& verifier_of, VerdictOf&& verdict_of) {
    try {
      enqueue_and_wait(target, batch, verifier_of, verdict_of);
    } catch (...) {
      // Work enqueued before the failure may still read staging memory or write the buffers:
      // it must finish before they are refilled or freed. Its own status no longer matters.
      static_cast<void>(backend::synchronize(tag_));
      throw;
    }
  }

  /// The last step's parts on the backend.
  const BackendPhases& phases() const { return phases_; }

 private:
  // Where the step's arrays go in the packed buffer: per-tree arrays of `trees` entries, then the
  // trees' own arrays one tree after another (node arrays of all trees, and so on).
  struct Places {
    std::size_t length, next_token, verify_status, stochastic_status, row_status, bad_node, compaction_status, path;
    std::size_t outputs;  // bytes of the outputs, which come first
    std::size_t offsets, base, sequence, key, view, parent, token, depth, mask, first_child, next_sibling;
    std::size_t first_proposal, next_proposal, proposal_node, draw_begin, draw_token, draw_node, proposal_q;
    std::size_t total;
  };
  // The sizes of a batch: nodes, mask words, proposals and draws of all trees together.
  struct Totals {
    std::size_t trees = 0, nodes = 0, words = 0, proposals = 0, draws = 0;
    int max_nodes = 1;
  };

  template <class Target, class VerifierOf, class VerdictOf>
  void enqueue_and_wait(Target& target, const TreeBatchView& batch, VerifierOf& verifier_of, VerdictOf& verdict_of) {
    const Totals totals = count(batch);
    max_nodes_ = totals.max_nodes;
    const int trees = static_cast<int>(totals.trees);
    // Runs of consecutive trees whose verifiers verify alike: one verify_on call each.
    run_ends_.clear();
    for (int first = 0, end = 0; first < trees; first = end) {
      end = first + 1;
      while (end < trees && verifies_alike(verifier_of(first), verifier_of(end))) ++end;
      run_ends_.push_back(end);
    }
    const Places at = places(totals);
    grow_scratch(totals);
    staging_.grow(at.total);
    packed_.grow(at.total);
    pack(batch, at, verifier_of);
    marks_.record(tag_, 0);
    check(backend::copy(tag_, packed_.data(), staging_.data(), at.total), "copying the trees to the backend");
    marks_.record(tag_, 1);

    LogitsRows rows;
    if constexpr (BackendBatchTarget<Target>) rows = target.forward(TreeBatchView{batch.slots, views_});
    else rows = target.forward(views_[0]);
    marks_.record(tag_, 2);
    int first = 0;
    for (const int end : run_ends_) {
      check(verifier_of(first).verify_on(tag_, verify_job(at, rows, first, end - first)), "the verifier's verify_on");
      first = end;
    }

    const core::KvCacheView cache = target.kv_cache();
    core::KvCompactionBatch compaction;
    compaction.batch = trees;
    compaction.max_nodes = max_nodes_;
    compaction.layout = cache.layout;
    compaction.k_cache = cache.k;
    compaction.v_cache = cache.v;
    compaction.base = on_backend<int>(at.base);
    compaction.path = on_backend<node_t>(at.path);
    compaction.length = on_backend<int>(at.length);
    compaction.status = on_backend<core::compaction_status>(at.compaction_status);
    compaction.sequence = on_backend<int>(at.sequence);
    check(backend::compact_kv(tag_, compaction), "KV compaction");
    marks_.record(tag_, 3);

    check(backend::copy(tag_, staging_.data(), packed_.data(), at.outputs), "copying the results back");
    marks_.record(tag_, 4);
    check(backend::synchronize(tag_), "the step on the backend");
    phases_ = {marks_.seconds(tag_, 0, 1), marks_.seconds(tag_, 1, 2), marks_.seconds(tag_, 2, 3),
               marks_.seconds(tag_, 3, 4)};
    for (int b = 0; b < trees; ++b) read_result(at, b, batch.slots[static_cast<std::size_t>(b)], verdict_of(b));
  }

  template <class T>
  T* on_backend(std::size_t offset) const {
    return reinterpret_cast<T*>(packed_.data() + offset);
  }
  template <class T>
  T* staged(std::size_t offset) const {
    return reinterpret_cast<T*>(staging_.data() + offset);
  }
  template <class T>
  void stage(std::size_t offset, const T* from, std::size_t count) const {
    if (count) std::memcpy(staging_.data() + offset, from, sizeof(T) * count);
  }

  void check(backend::status s, const char* what) const {
    if (s != backend::status::ok)
      throw error(std::string(owner_) + ": " + what + " failed: " + backend::describe(tag_, s));
  }

  static Totals count(const TreeBatchView& batch) {
    Totals t;
    t.trees = batch.trees.size();
    for (const TreeView& tree : batch.trees) {
      const std::size_t n = static_cast<std::size_t>(tree.size);
      t.nodes += n;
      t.words += n * static_cast<std::size_t>(tree.words_per_row);
      t.proposals += static_cast<std::size_t>(tree.proposals);
      if (tree.proposals) t.draws += static_cast<std::size_t>(tree.draw_begin[tree.proposals]);
      if (tree.size > t.max_nodes) t.max_nodes = tree.size;
    }
    return t;
  }

  Places places(const Totals& t) const {
    const std::size_t trees = t.trees;
    Packing p;
    Places at{};
    at.length = p.add<int>(trees);
    at.next_token = p.add<token_t>(trees);
    at.verify_status = p.add<core::verify_status>(trees);
    at.stochastic_status = p.add<core::stochastic_status>(trees);
    at.row_status = p.add<core::sampling_status>(trees);
    at.bad_node = p.add<node_t>(trees);
    at.compaction_status = p.add<core::compaction_status>(trees);
    at.path = p.add<node_t>(trees * static_cast<std::size_t>(max_nodes_));
    at.outputs = p.size();
    at.offsets = p.add<int>(trees + 1);  // tree b's nodes (and logits rows) begin at offsets[b]
    at.base = p.add<int>(trees);
    at.sequence = p.add<int>(trees);
    at.key = p.add<core::RandomKey>(trees);
    at.view = p.add<TreeView>(trees);
    at.parent = p.add<node_t>(t.nodes);
    at.token = p.add<token_t>(t.nodes);
    at.depth = p.add<int>(t.nodes);
    at.mask = p.add<std::uint32_t>(t.words);
    at.first_child = p.add<node_t>(t.nodes);
    at.next_sibling = p.add<node_t>(t.nodes);
    if (t.proposals) {
      at.first_proposal = p.add<node_t>(t.nodes);
      at.next_proposal = p.add<int>(t.proposals);
      at.proposal_node = p.add<node_t>(t.proposals);
      at.draw_begin = p.add<int>(t.proposals + trees);
      at.draw_token = p.add<token_t>(t.draws);
      at.draw_node = p.add<node_t>(t.draws);
      at.proposal_q = p.add<float>(t.proposals * static_cast<std::size_t>(vocab_));
    }
    at.total = p.size();
    return at;
  }

  // The verifiers' scratch (argmax per node, accepted flags and a vocabulary row per tree) and,
  // on a backend that takes one, a workspace for the largest need of the step's verify_on runs.
  void grow_scratch(const Totals& t) {
    Packing scratch;
    argmax_at_ = scratch.add<token_t>(t.nodes);
    accepted_at_ = scratch.add<std::uint8_t>(t.trees * static_cast<std::size_t>(max_nodes_));
    work_at_ = scratch.add<float>(t.trees * static_cast<std::size_t>(vocab_));
    if constexpr (requires { tag_.workspace; }) {
      std::size_t bytes = 0;
      int first = 0;
      for (const int end : run_ends_) {  // a run's launch shape depends on its length
        core::GreedyVerifyBatch greedy;
        greedy.batch = end - first;
        greedy.max_nodes = max_nodes_;
        greedy.vocab_size = vocab_;
        greedy.row_stride = vocab_;
        core::StochasticVerifyBatch stochastic;
        stochastic.batch = end - first;
        stochastic.max_nodes = max_nodes_;
        stochastic.vocab_size = vocab_;
        stochastic.row_stride = vocab_;
        bytes = std::max({bytes, backend::workspace_bytes(tag_, greedy), backend::workspace_bytes(tag_, stochastic)});
        first = end;
      }
      workspace_at_ = scratch.add<unsigned char>(bytes);
      scratch_.grow(scratch.size());
      tag_.workspace = scratch_.data() + workspace_at_;
      tag_.workspace_bytes = bytes;
    } else {
      scratch_.grow(scratch.size());
    }
  }

  // Fills staging memory: the outputs' initial values, then every tree's arrays, and keeps each
  // tree's view of the backend copy in views_ (what the target's forward reads).
  template <class VerifierOf>
  void pack(const TreeBatchView& batch, const Places& at, VerifierOf& verifier_of) {
    const std::size_t trees = batch.trees.size();
    views_.resize(trees);
    std::size_t node = 0, word = 0, proposal = 0, draw = 0;
    for (std::size_t b = 0; b < trees; ++b) {
      const TreeView& tree = batch.trees[b];
      const std::size_t n = static_cast<std::size_t>(tree.size);
      const std::size_t words = n * static_cast<std::size_t>(tree.words_per_row);
      staged<int>(at.length)[b] = 0;
      staged<token_t>(at.next_token)[b] = -1;
      staged<core::verify_status>(at.verify_status)[b] = core::verify_status::ok;
      staged<core::stochastic_status>(at.stochastic_status)[b] = core::stochastic_status::ok;
      staged<core::sampling_status>(at.row_status)[b] = core::sampling_status::ok;
      staged<node_t>(at.bad_node)[b] = -1;
      staged<core::compaction_status>(at.compaction_status)[b] = core::compaction_status::ok;
      staged<int>(at.offsets)[b] = static_cast<int>(node);
      staged<int>(at.base)[b] = tree.base_position;
      staged<int>(at.sequence)[b] = batch.slots[b];
      core::RandomKey key{};
      if constexpr (requires { { verifier_of(0).random_key() } -> std::convertible_to<core::RandomKey>; })
        key = verifier_of(static_cast<int>(b)).random_key();
      staged<core::RandomKey>(at.key)[b] = key;

      TreeView& v = views_[b];
      v = tree;
      stage(at.parent + sizeof(node_t) * node, tree.parent, n);
      stage(at.token + sizeof(token_t) * node, tree.token, n);
      stage(at.depth + sizeof(int) * node, tree.depth, n);
      stage(at.mask + sizeof(std::uint32_t) * word, tree.mask, words);
      stage(at.first_child + sizeof(node_t) * node, tree.first_child, n);
      stage(at.next_sibling + sizeof(node_t) * node, tree.next_sibling, n);
      v.parent = on_backend<node_t>(at.parent) + node;
      v.token = on_backend<token_t>(at.token) + node;
      v.depth = on_backend<int>(at.depth) + node;
      v.mask = on_backend<std::uint32_t>(at.mask) + word;
      v.first_child = on_backend<node_t>(at.first_child) + node;
      v.next_sibling = on_backend<node_t>(at.next_sibling) + node;
      if (tree.proposals) {
        const std::size_t p = static_cast<std::size_t>(tree.proposals);
        const std::size_t d = static_cast<std::size_t>(tree.draw_begin[p]);
        const std::size_t q = p * static_cast<std::size_t>(vocab_);
        // draw_begin holds p + 1 entries per tree: after proposal + b entries of the trees before
        const std::size_t begins = proposal + b;
        stage(at.first_proposal + sizeof(node_t) * node, tree.first_proposal, n);
        stage(at.next_proposal + sizeof(int) * proposal, tree.next_proposal, p);
        stage(at.proposal_node + sizeof(node_t) * proposal, tree.proposal_node, p);
        stage(at.draw_begin + sizeof(int) * begins, tree.draw_begin, p + 1);
        stage(at.draw_token + sizeof(token_t) * draw, tree.draw_token, d);
        stage(at.draw_node + sizeof(node_t) * draw, tree.draw_node, d);
        stage(at.proposal_q + sizeof(float) * proposal * static_cast<std::size_t>(vocab_), tree.proposal_q, q);
        v.first_proposal = on_backend<node_t>(at.first_proposal) + node;
        v.next_proposal = on_backend<int>(at.next_proposal) + proposal;
        v.proposal_node = on_backend<node_t>(at.proposal_node) + proposal;
        v.draw_begin = on_backend<int>(at.draw_begin) + begins;
        v.draw_token = on_backend<token_t>(at.draw_token) + draw;
        v.draw_node = on_backend<node_t>(at.draw_node) + draw;
        v.proposal_q = on_backend<float>(at.proposal_q) + proposal * static_cast<std::size_t>(vocab_);
        proposal += p;
        draw += d;
      }
      node += n;
      word += words;
    }
    staged<int>(at.offsets)[trees] = static_cast<int>(node);
    stage(at.view, views_.data(), trees);
  }

  // The job of trees first .. first + count - 1: every array starts at tree `first`.
  backend::VerifyJob verify_job(const Places& at, const LogitsRows& rows, int first, int count) const {
    const std::size_t f = static_cast<std::size_t>(first);
    const std::size_t path_at = f * static_cast<std::size_t>(max_nodes_);
    backend::VerifyJob job;
    core::GreedyVerifyBatch& g = job.greedy;
    g.batch = count;
    g.max_nodes = max_nodes_;
    g.vocab_size = vocab_;
    g.row_stride = rows.row_stride;
    g.offsets = on_backend<int>(at.offsets) + f;  // global node indices: rows, argmax and arrays agree
    g.token = on_backend<token_t>(at.token);
    g.first_child = on_backend<node_t>(at.first_child);
    g.next_sibling = on_backend<node_t>(at.next_sibling);
    g.logits = rows.data;
    g.argmax = reinterpret_cast<token_t*>(scratch_.data() + argmax_at_);
    g.path = on_backend<node_t>(at.path) + path_at;
    g.length = on_backend<int>(at.length) + f;
    g.next_token = on_backend<token_t>(at.next_token) + f;
    g.status = on_backend<core::verify_status>(at.verify_status) + f;

    core::StochasticVerifyBatch& s = job.stochastic;
    s.batch = count;
    s.max_nodes = max_nodes_;
    s.vocab_size = vocab_;
    s.row_stride = rows.row_stride;
    s.trees = on_backend<TreeView>(at.view) + f;
    s.row_offset = g.offsets;
    s.logits = rows.data;
    s.keys = on_backend<core::RandomKey>(at.key) + f;
    s.work = reinterpret_cast<float*>(scratch_.data() + work_at_) + f * static_cast<std::size_t>(vocab_);
    s.accepted = scratch_.data() + accepted_at_ + path_at;
    s.path = g.path;
    s.length = g.length;
    s.next_token = g.next_token;
    s.status = on_backend<core::stochastic_status>(at.stochastic_status) + f;
    s.row_status = on_backend<core::sampling_status>(at.row_status) + f;
    s.bad_node = on_backend<node_t>(at.bad_node) + f;
    return job;
  }

  void read_result(const Places& at, int b, int slot, Verdict& verdict) const {
    const std::string tree = name_slots_ ? "the tree of slot " + std::to_string(slot) : "the tree";
    const auto fail = [&](const std::string& what) { throw error(std::string(owner_) + ": " + what); };
    const auto greedy = staged<core::verify_status>(at.verify_status)[b];
    if (greedy != core::verify_status::ok)
      fail(tree + " failed verification on the backend: " + core::to_string(greedy));
    const auto stochastic = staged<core::stochastic_status>(at.stochastic_status)[b];
    if (stochastic == core::stochastic_status::bad_row)
      fail("the target's logits row after node " + std::to_string(staged<node_t>(at.bad_node)[b]) + " of " + tree +
           " is unusable: " + core::to_string(staged<core::sampling_status>(at.row_status)[b]));
    if (stochastic != core::stochastic_status::ok)
      fail(tree + " failed verification on the backend: " + core::to_string(stochastic));
    const auto compaction = staged<core::compaction_status>(at.compaction_status)[b];
    if (compaction != core::compaction_status::ok)
      fail("KV compaction of " + tree + " on the backend failed: " + core::to_string(compaction));
    const int length = staged<int>(at.length)[b];
    if (length < 1 || length > max_nodes_)
      fail("the backend verifier returned a path of length " + std::to_string(length) + " for " + tree);
    const node_t* path = staged<node_t>(at.path) + static_cast<std::size_t>(b) * static_cast<std::size_t>(max_nodes_);
    verdict.path.assign(path, path + length);
    verdict.next_token = staged<token_t>(at.next_token)[b];
  }

  Backend tag_{};
  int vocab_ = 0;
  const char* owner_ = "";
  bool name_slots_ = false;
  int max_nodes_ = 1;  // this step's largest tree: the stride of the paths
  std::size_t argmax_at_ = 0, accepted_at_ = 0, work_at_ = 0, workspace_at_ = 0;
  std::vector<int> run_ends_;    // the step's runs of like verifiers: where each ends
  std::vector<TreeView> views_;  // the step's trees, arrays in the packed buffer
  // Allocation and release need only the kind (a stream plays no part in them).
  backend::buffer<Backend> staging_{Backend{}, backend::memory::staging};
  backend::buffer<Backend> packed_{Backend{}, backend::memory::backend};
  backend::buffer<Backend> scratch_{Backend{}, backend::memory::backend};
  // Before the copy in, the forward, the verification and compaction, the copy out, and after it.
  backend::marks<Backend, 5> marks_;
  BackendPhases phases_;
};

}  // namespace specdec::detail
