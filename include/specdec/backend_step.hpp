// The decoder's step for a BackendTarget: everything after the merge runs on the target's backend,
// in its memory, and only the accepted path comes back.
//
//   host                       backend (stream order; nothing waits in between)
//   merged tree --copy-------> tree arrays ─> target.forward ─> verifier.verify_on ─> compact_kv
//   path, next  <--copy------- outputs  <──────────────────────────────────────────────┘
//                 synchronize (the one wait of the step)
//
// The wait is needed: the accepted length decides what the host appends to the context, what the
// drafters observe, where the next tree starts and whether generate() stops; a bad status must
// become a specdec::error. The tree arrays and the outputs share one packed buffer (outputs first),
// so each direction is a single copy from or to staging memory (pinned on CUDA).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>
#include <type_traits>

#include <specdec/backend.hpp>
#include <specdec/concepts.hpp>
#include <specdec/error.hpp>
#include <specdec/core/tree_view.hpp>
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

template <class Backend>
class BackendStep {
#if !defined(__CUDACC__)
  static_assert(!std::is_same_v<Backend, backend::cuda>,
                "A BackendTarget on backend::cuda must be decoded in a CUDA translation unit (a .cu file "
                "compiled by nvcc): the CUDA operations are declared only there.");
#endif

 public:
  /// Sizes the buffers for trees of up to `budget` draft nodes (plus the root) and rows of `vocab`
  /// logits.
  void prepare(const Backend& tag, int budget, int vocab) {
    constexpr int limit = backend::max_compaction_nodes < backend::max_verify_nodes ? backend::max_compaction_nodes
                                                                                    : backend::max_verify_nodes;
    if (budget > limit - 1)  // not budget + 1 > limit: the budget may be INT_MAX
      throw error("SpeculativeDecoder: budget " + std::to_string(budget) + " is above what a backend step " +
                  "verifies and compacts (" + std::to_string(limit - 1) + " draft nodes)");
    const int max_nodes = budget + 1;
    tag_ = tag;
    max_nodes_ = max_nodes;
    vocab_ = vocab;
    Packing scratch;
    argmax_at_ = scratch.add<token_t>(max_nodes);
    accepted_at_ = scratch.add<std::uint8_t>(max_nodes);
    work_at_ = scratch.add<float>(vocab);
    std::size_t workspace_bytes = 0;
    if constexpr (requires { tag_.workspace; }) {  // what the verifier's operation needs, greedy or stochastic
      core::GreedyVerifyBatch greedy;
      greedy.batch = 1;
      greedy.max_nodes = max_nodes;
      greedy.vocab_size = vocab;
      greedy.row_stride = vocab;
      core::StochasticVerifyBatch stochastic;
      stochastic.batch = 1;
      stochastic.max_nodes = max_nodes;
      stochastic.vocab_size = vocab;
      stochastic.row_stride = vocab;
      workspace_bytes = std::max(backend::workspace_bytes(tag_, greedy), backend::workspace_bytes(tag_, stochastic));
    }
    workspace_at_ = scratch.add<unsigned char>(workspace_bytes);
    scratch_.grow(scratch.size());
    // Room for any tree of the budget without draft distributions, so that a step allocates (and
    // waits for the device) only when a sampling drafter's distributions need more.
    const std::size_t nodes = static_cast<std::size_t>(max_nodes);
    const std::size_t most = places(nodes, static_cast<std::size_t>(core::mask_words(max_nodes)), 0, 0).total;
    staging_.grow(most);
    packed_.grow(most);
    if constexpr (requires { tag_.workspace; }) {
      tag_.workspace = scratch_.data() + workspace_at_;
      tag_.workspace_bytes = workspace_bytes;
    }
  }

  /// Runs the step of `tree` (host arrays, laid out, base_position = tokens in the cache) and
  /// writes the accepted path and next token to `verdict`. Throws specdec::error on a failed
  /// operation or a bad status; the sequence must then be started again with prefill.
  template <class Target, class Verifier>
  void run(Target& target, Verifier& verifier, const TreeView& tree, Verdict& verdict) {
    try {
      enqueue_and_wait(target, verifier, tree, verdict);
    } catch (...) {
      // Work enqueued before the failure may still read staging memory or write the buffers:
      // it must finish before they are refilled or freed. Its own status no longer matters.
      static_cast<void>(backend::synchronize(tag_));
      throw;
    }
  }

 private:
  template <class Target, class Verifier>
  void enqueue_and_wait(Target& target, Verifier& verifier, const TreeView& tree, Verdict& verdict) {
    core::RandomKey key{};
    if constexpr (requires { { verifier.random_key() } -> std::convertible_to<core::RandomKey>; })
      key = verifier.random_key();
    const Places at = pack(tree, key);
    check(backend::copy(tag_, packed_.data(), staging_.data(), at.total), "copying the tree to the backend");

    const LogitsRows rows = target.forward(device_view(tree, at));
    backend::VerifyJob job = verify_job(at, rows);
    check(verifier.verify_on(tag_, job), "the verifier's verify_on");

    const core::KvCacheView cache = target.kv_cache();
    core::KvCompactionBatch compaction;
    compaction.batch = 1;
    compaction.max_nodes = max_nodes_;
    compaction.layout = cache.layout;
    compaction.k_cache = cache.k;
    compaction.v_cache = cache.v;
    compaction.base = on_backend<int>(at.base);
    compaction.path = job.greedy.path;
    compaction.length = job.greedy.length;
    compaction.status = on_backend<core::compaction_status>(at.compaction_status);
    check(backend::compact_kv(tag_, compaction), "KV compaction");

    check(backend::copy(tag_, staging_.data(), packed_.data(), at.outputs), "copying the result back");
    check(backend::synchronize(tag_), "the step on the backend");
    read_result(at, verdict);
  }

  struct Places {
    std::size_t length, next_token, verify_status, stochastic_status, row_status, bad_node, compaction_status, path;
    std::size_t outputs;  // bytes of the outputs, which come first
    std::size_t offsets, base, row_offset, key, view, parent, token, depth, mask, first_child, next_sibling;
    std::size_t first_proposal, next_proposal, proposal_node, draw_begin, draw_token, draw_node, proposal_q;
    std::size_t total;
  };

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
      throw error(std::string("SpeculativeDecoder: ") + what + " failed: " + backend::describe(tag_, s));
  }

  // Where the step's arrays go in the packed buffer for a tree of n nodes with `words` mask words
  // per row and the given draft distributions.
  Places places(std::size_t n, std::size_t words, std::size_t proposals, std::size_t draws) const {
    Packing p;
    Places at{};
    at.length = p.add<int>(1);
    at.next_token = p.add<token_t>(1);
    at.verify_status = p.add<core::verify_status>(1);
    at.stochastic_status = p.add<core::stochastic_status>(1);
    at.row_status = p.add<core::sampling_status>(1);
    at.bad_node = p.add<node_t>(1);
    at.compaction_status = p.add<core::compaction_status>(1);
    at.path = p.add<node_t>(static_cast<std::size_t>(max_nodes_));
    at.outputs = p.size();
    at.offsets = p.add<int>(2);
    at.base = p.add<int>(1);
    at.row_offset = p.add<int>(1);
    at.key = p.add<core::RandomKey>(1);
    at.view = p.add<TreeView>(1);
    at.parent = p.add<node_t>(n);
    at.token = p.add<token_t>(n);
    at.depth = p.add<int>(n);
    at.mask = p.add<std::uint32_t>(n * words);
    at.first_child = p.add<node_t>(n);
    at.next_sibling = p.add<node_t>(n);
    if (proposals) {
      at.first_proposal = p.add<node_t>(n);
      at.next_proposal = p.add<int>(proposals);
      at.proposal_node = p.add<node_t>(proposals);
      at.draw_begin = p.add<int>(proposals + 1);
      at.draw_token = p.add<token_t>(draws);
      at.draw_node = p.add<node_t>(draws);
      at.proposal_q = p.add<float>(proposals * static_cast<std::size_t>(vocab_));
    }
    at.total = p.size();
    return at;
  }

  // Lays out the step's arrays, grows the buffers if draft distributions need more room than
  // prepare() gave them (a wait for the device on CUDA) and fills staging memory.
  Places pack(const TreeView& tree, core::RandomKey key) {
    const std::size_t n = static_cast<std::size_t>(tree.size);
    const std::size_t proposals = static_cast<std::size_t>(tree.proposals);
    const std::size_t draws = proposals ? static_cast<std::size_t>(tree.draw_begin[proposals]) : 0;
    const Places at = places(n, static_cast<std::size_t>(tree.words_per_row), proposals, draws);
    staging_.grow(at.total);
    packed_.grow(at.total);

    *staged<int>(at.length) = 0;
    *staged<token_t>(at.next_token) = -1;
    *staged<core::verify_status>(at.verify_status) = core::verify_status::ok;
    *staged<core::stochastic_status>(at.stochastic_status) = core::stochastic_status::ok;
    *staged<core::sampling_status>(at.row_status) = core::sampling_status::ok;
    *staged<node_t>(at.bad_node) = -1;
    *staged<core::compaction_status>(at.compaction_status) = core::compaction_status::ok;
    const int offsets[2] = {0, tree.size};
    stage(at.offsets, offsets, 2);
    *staged<int>(at.base) = tree.base_position;
    *staged<int>(at.row_offset) = 0;
    *staged<core::RandomKey>(at.key) = key;
    stage(at.parent, tree.parent, n);
    stage(at.token, tree.token, n);
    stage(at.depth, tree.depth, n);
    stage(at.mask, tree.mask, n * static_cast<std::size_t>(tree.words_per_row));
    stage(at.first_child, tree.first_child, n);
    stage(at.next_sibling, tree.next_sibling, n);
    if (proposals) {
      stage(at.first_proposal, tree.first_proposal, n);
      stage(at.next_proposal, tree.next_proposal, proposals);
      stage(at.proposal_node, tree.proposal_node, proposals);
      stage(at.draw_begin, tree.draw_begin, proposals + 1);
      stage(at.draw_token, tree.draw_token, draws);
      stage(at.draw_node, tree.draw_node, draws);
      stage(at.proposal_q, tree.proposal_q, proposals * static_cast<std::size_t>(vocab_));
    }
    const TreeView view = device_view(tree, at);
    stage(at.view, &view, 1);
    return at;
  }

  // The tree as the backend sees it: the same sizes, its arrays in the packed buffer.
  TreeView device_view(const TreeView& tree, const Places& at) const {
    TreeView v = tree;
    v.parent = on_backend<node_t>(at.parent);
    v.token = on_backend<token_t>(at.token);
    v.depth = on_backend<int>(at.depth);
    v.mask = on_backend<std::uint32_t>(at.mask);
    v.first_child = on_backend<node_t>(at.first_child);
    v.next_sibling = on_backend<node_t>(at.next_sibling);
    if (tree.proposals) {
      v.first_proposal = on_backend<node_t>(at.first_proposal);
      v.next_proposal = on_backend<int>(at.next_proposal);
      v.proposal_node = on_backend<node_t>(at.proposal_node);
      v.draw_begin = on_backend<int>(at.draw_begin);
      v.draw_token = on_backend<token_t>(at.draw_token);
      v.draw_node = on_backend<node_t>(at.draw_node);
      v.proposal_q = on_backend<float>(at.proposal_q);
    }
    return v;
  }

  backend::VerifyJob verify_job(const Places& at, const LogitsRows& rows) const {
    backend::VerifyJob job;
    core::GreedyVerifyBatch& g = job.greedy;
    g.batch = 1;
    g.max_nodes = max_nodes_;
    g.vocab_size = vocab_;
    g.row_stride = rows.row_stride;
    g.offsets = on_backend<int>(at.offsets);
    g.token = on_backend<token_t>(at.token);
    g.first_child = on_backend<node_t>(at.first_child);
    g.next_sibling = on_backend<node_t>(at.next_sibling);
    g.logits = rows.data;
    g.argmax = reinterpret_cast<token_t*>(scratch_.data() + argmax_at_);
    g.path = on_backend<node_t>(at.path);
    g.length = on_backend<int>(at.length);
    g.next_token = on_backend<token_t>(at.next_token);
    g.status = on_backend<core::verify_status>(at.verify_status);

    core::StochasticVerifyBatch& s = job.stochastic;
    s.batch = 1;
    s.max_nodes = max_nodes_;
    s.vocab_size = vocab_;
    s.row_stride = rows.row_stride;
    s.trees = on_backend<TreeView>(at.view);
    s.row_offset = on_backend<int>(at.row_offset);
    s.logits = rows.data;
    s.keys = on_backend<core::RandomKey>(at.key);
    s.work = reinterpret_cast<float*>(scratch_.data() + work_at_);
    s.accepted = scratch_.data() + accepted_at_;
    s.path = g.path;
    s.length = g.length;
    s.next_token = g.next_token;
    s.status = on_backend<core::stochastic_status>(at.stochastic_status);
    s.row_status = on_backend<core::sampling_status>(at.row_status);
    s.bad_node = on_backend<node_t>(at.bad_node);
    return job;
  }

  void read_result(const Places& at, Verdict& verdict) const {
    const auto greedy = *staged<core::verify_status>(at.verify_status);
    if (greedy != core::verify_status::ok)
      throw error(std::string("SpeculativeDecoder: verification on the backend failed: ") + core::to_string(greedy));
    const auto stochastic = *staged<core::stochastic_status>(at.stochastic_status);
    if (stochastic == core::stochastic_status::bad_row)
      throw error("SpeculativeDecoder: the target's logits row after node " +
                  std::to_string(*staged<node_t>(at.bad_node)) +
                  " is unusable: " + core::to_string(*staged<core::sampling_status>(at.row_status)));
    if (stochastic != core::stochastic_status::ok)
      throw error(std::string("SpeculativeDecoder: verification on the backend failed: ") + core::to_string(stochastic));
    const auto compaction = *staged<core::compaction_status>(at.compaction_status);
    if (compaction != core::compaction_status::ok)
      throw error(std::string("SpeculativeDecoder: KV compaction on the backend failed: ") + core::to_string(compaction));
    const int length = *staged<int>(at.length);
    if (length < 1 || length > max_nodes_)
      throw error("SpeculativeDecoder: the backend verifier returned a path of length " + std::to_string(length));
    const node_t* path = staged<node_t>(at.path);
    verdict.path.assign(path, path + length);
    verdict.next_token = *staged<token_t>(at.next_token);
  }

  Backend tag_{};
  int max_nodes_ = 0;
  int vocab_ = 0;
  std::size_t argmax_at_ = 0, accepted_at_ = 0, work_at_ = 0, workspace_at_ = 0;
  // Allocation and release need only the kind (a stream plays no part in them).
  backend::buffer<Backend> staging_{Backend{}, backend::memory::staging};
  backend::buffer<Backend> packed_{Backend{}, backend::memory::backend};
  backend::buffer<Backend> scratch_{Backend{}, backend::memory::backend};
};

}  // namespace specdec::detail
