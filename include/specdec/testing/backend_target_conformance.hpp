// The conformance kit for backend targets: checks that a BackendTarget or BackendBatchTarget keeps
// the contract the backend step relies on, with any test framework.
//
//   #include <specdec/testing/backend_target_conformance.hpp>   // in a .cu file for backend::cuda
//   MyGpuModel model(...);
//   const specdec::testing::ConformanceReport report = specdec::testing::check_backend_target(model);
//   REQUIRE(report.ok());           // Catch2; report.str() lists what failed, one sentence each
//
// Why a kit: a backend target that ignored the ancestor mask still decoded exactly greedy on every
// request when the drafts were chains or few branches (issue 47). The kit drives the target
// directly, as step/backend_step.hpp does, with trees of every shape: the root alone, a chain, a star,
// random wide trees, a deep tree and one large tree that fills the cache's free positions.
//  1. live: per sequence, prefill(prompt minus its last token), then steps of forward(tree) (the
//     tree's arrays copied to backend memory), a random accepted path and backend::compact_kv of
//     the target's kv_cache(), as the decoder does; a batch target forwards a random subset of its
//     sequences' trees per call, in random order, each in its own slot;
//  2. afterwards, every node is compared bit for bit with its path run alone: a fresh prefill of
//     the committed tokens and the path above the node, then forward(the node alone). Its logits
//     row must be equal, and so must its K/V: what the tree forward wrote at cache row
//     base_position + i against what the lone node wrote at its position;
//  3. a forward must leave the committed K/V rows alone (its slot's and every other slot's), and
//     prefill(tokens) must write the rows that forwarding the tokens one by one writes;
//  4. for a batch: where a slot's node differs, the same tree is run alone in that slot, which tells
//     a slot whose results depend on the other trees of the call from a tree attention bug. Slots
//     are released and prefilled again between rounds, and each path-alone run may use another
//     slot, so nothing of a slot's earlier sequence may leak into its next one.
// Results are read through the backend (backend::copy, then backend::synchronize): for
// backend::cuda include this header in a CUDA translation unit, or in a C++ file that defines
// SPECDEC_CUDA_KERNELS_EXTERN, as for the decoder itself.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <specdec/backend.hpp>
#include <specdec/concepts.hpp>
#include <specdec/core/kv_compaction.hpp>
#include <specdec/core/tree.hpp>
#include <specdec/testing/laid_out_tree.hpp>
#include <specdec/testing/target_conformance.hpp>  // ConformanceReport, random_wide_tree

namespace specdec::testing {

struct BackendConformanceOptions {
  int prompts = 2;        ///< sequences per slot driven (one round of the batch kit per prompt)
  int prompt_length = 6;  ///< tokens per prompt (the batch kit varies it per slot); the last is the first root
  int random_trees = 3;   ///< random wide trees per sequence, after the root alone, a chain and a star
  int tree_nodes = 24;    ///< nodes per random wide tree and of the deep tree, root included
  int max_children = 4;   ///< widest branching of a random tree's node
  /// The last tree fills the cache's free positions, up to this many nodes (lower it to the
  /// largest tree your target forwards).
  int large_tree_nodes = 256;
  int slots = 4;  ///< batch kit: slots driven at once (at most slots())
  std::uint64_t seed = 1;
  std::size_t max_failures = 8;  ///< stop listing after this many
};

namespace backend_conformance_detail {

using conformance_detail::path_to;
using conformance_detail::random_wide_tree;

/// K/V bytes of one cache position: the K rows of every layer and kv_head, then (when the cache
/// has V) their V rows.
using KvRow = std::vector<unsigned char>;

/// What one node of a forward wrote: its logits row and its K/V at row base_position + i.
struct NodeResult {
  std::vector<float> logits;
  KvRow kv;
};

/// One tree of the live run, with what the target computed for it.
struct Step {
  std::string shape;               // "a star of 9 nodes"
  std::vector<token_t> committed;  // the cache's tokens when the tree ran
  LaidOutTree tree;
  std::vector<NodeResult> nodes;
  std::vector<int> call_slots;  // batch kit: the slots forwarded in the same call, in order
  int index = 0;                // tree of its sequence (0: right after prefill)
};

/// Labels where a failure happened; the slot is named only for a batch target.
inline std::string step_name(const std::string& sequence, const Step& step) {
  return sequence + ", tree " + std::to_string(step.index) + " (" + step.shape + ")";
}

inline std::string list(const std::vector<int>& values) {
  std::string s = "[";
  for (std::size_t k = 0; k < values.size(); ++k) s += (k ? ", " : "") + std::to_string(values[k]);
  return s + "]";
}

inline LaidOutTree chain_of(std::mt19937_64& rng, token_t root, int nodes, int vocab) {
  std::vector<node_t> parent(static_cast<std::size_t>(nodes));
  std::vector<token_t> token(static_cast<std::size_t>(nodes), root);
  for (int i = 1; i < nodes; ++i) {
    parent[static_cast<std::size_t>(i)] = static_cast<node_t>(i - 1);
    token[static_cast<std::size_t>(i)] = static_cast<token_t>(rng() % static_cast<std::uint64_t>(vocab));
  }
  parent[0] = -1;
  return LaidOutTree(std::move(parent), std::move(token));
}

/// The root and nodes - 1 children with distinct tokens (as many as the vocabulary has).
inline LaidOutTree star_of(std::mt19937_64& rng, token_t root, int nodes, int vocab) {
  nodes = std::min(nodes, vocab + 1);
  std::vector<token_t> tokens(static_cast<std::size_t>(vocab));
  std::iota(tokens.begin(), tokens.end(), token_t{0});
  std::shuffle(tokens.begin(), tokens.end(), rng);
  std::vector<node_t> parent(static_cast<std::size_t>(nodes), 0);
  std::vector<token_t> token(static_cast<std::size_t>(nodes), root);
  parent[0] = -1;
  for (int i = 1; i < nodes; ++i) token[static_cast<std::size_t>(i)] = tokens[static_cast<std::size_t>(i - 1)];
  return LaidOutTree(std::move(parent), std::move(token));
}

/// A tree of long branches: each node hangs below one of the three nodes added before it.
inline LaidOutTree deep_tree(std::mt19937_64& rng, token_t root, int nodes, int vocab) {
  std::vector<node_t> parent{-1};
  std::vector<token_t> token{root};
  for (int attempt = 0; static_cast<int>(parent.size()) < nodes && attempt < 16 * nodes; ++attempt) {
    const std::size_t last = parent.size() - 1;
    const node_t p = static_cast<node_t>(last - std::min<std::size_t>(last, rng() % 3));
    const token_t t = static_cast<token_t>(rng() % static_cast<std::uint64_t>(vocab));
    bool duplicate = false;  // siblings have distinct tokens, as after the decoder's merge
    for (std::size_t i = 1; i < parent.size(); ++i) duplicate |= parent[i] == p && token[i] == t;
    if (duplicate) continue;
    parent.push_back(p);
    token.push_back(t);
  }
  return LaidOutTree(std::move(parent), std::move(token));
}

/// The shapes of the trees one sequence runs, in order.
enum class Shape { single, chain, star, wide, deep, large };
inline std::vector<Shape> shapes(const BackendConformanceOptions& o) {
  std::vector<Shape> s{Shape::single, Shape::chain, Shape::star};
  for (int k = 0; k < o.random_trees; ++k) s.push_back(Shape::wide);
  s.push_back(Shape::deep);
  s.push_back(Shape::large);
  return s;
}

/// The next tree of `shape` below `root`, at most `room` nodes (the cache's free positions), and
/// its name for failure sentences.
inline std::pair<std::string, LaidOutTree> make_tree(std::mt19937_64& rng, Shape shape, token_t root, int room,
                                                     const BackendConformanceOptions& o, int vocab) {
  const int limit = std::min(room, backend::max_compaction_nodes);
  const int nodes = std::min(o.tree_nodes, limit);
  const auto named = [](const char* kind, LaidOutTree tree) {
    return std::pair<std::string, LaidOutTree>(kind + std::to_string(tree.parent.size()) + " nodes", std::move(tree));
  };
  switch (shape) {
    case Shape::single: return {"the root alone", LaidOutTree({-1}, {root})};
    case Shape::chain: return named("a chain of ", chain_of(rng, root, std::min(7, limit), vocab));
    case Shape::star: return named("a star of ", star_of(rng, root, std::min(9, limit), vocab));
    case Shape::wide:
      return named("a random tree of ", random_wide_tree(rng, root, nodes, o.max_children, nodes, vocab));
    case Shape::deep: return named("a deep tree of ", deep_tree(rng, root, nodes, vocab));
    case Shape::large: break;
  }
  const int large = std::min(o.large_tree_nodes, limit);
  return named("a large random tree of ",
               random_wide_tree(rng, root, large, std::max(o.max_children, 8), large, vocab));
}

/// Talks to the target's backend: copies trees there, reads logits and K/V rows back, compacts.
/// Every read waits for the backend (a test may), and a failed backend call becomes a failure
/// sentence and stops the kit rather than an exception.
template <class Backend>
class Channel {
#if !SPECDEC_CUDA_OPERATIONS
  static_assert(!std::is_same_v<Backend, backend::cuda>,
                "check_backend_target on a backend::cuda target must run in a CUDA translation unit (a .cu "
                "file compiled by nvcc) or in a file that defines SPECDEC_CUDA_KERNELS_EXTERN (the kernels "
                "compiled once: specdec::cuda_kernels): the CUDA copies are declared only there.");
#endif

 public:
  Channel(const Backend& tag, conformance_detail::Checker& checker)
      : tag_(tag),
        checker_(checker),
        trees_(tag, backend::memory::backend),
        compaction_(tag, backend::memory::backend) {}

  bool broken() const { return broken_; }

  /// Copies the arrays of `trees` to backend memory; the views point there (valid until the
  /// next upload).
  std::vector<TreeView> upload(const std::vector<const LaidOutTree*>& trees, const std::vector<int>& bases) {
    std::size_t bytes = 0;
    for (const LaidOutTree* t : trees) bytes += tree_bytes(*t);
    trees_.grow(bytes);
    std::vector<TreeView> views;
    std::size_t at = 0;
    for (std::size_t b = 0; b < trees.size(); ++b) {
      const LaidOutTree& t = *trees[b];
      TreeView v = t.view(bases[b]);
      v.parent = put(at, t.parent);
      v.token = put(at, t.token);
      v.depth = put(at, t.depth);
      v.mask = put(at, t.mask);
      v.first_child = put(at, t.first_child);
      v.next_sibling = put(at, t.next_sibling);
      views.push_back(v);
    }
    ok(backend::synchronize(tag_), "copying the trees to the backend");
    return views;
  }

  /// Logits rows first .. first + count - 1 of a forward's result.
  std::vector<std::vector<float>> logits(const LogitsRows& rows, long long first, int count, int vocab) {
    std::vector<std::vector<float>> out(static_cast<std::size_t>(count),
                                        std::vector<float>(static_cast<std::size_t>(vocab)));
    for (int i = 0; i < count && !broken_; ++i)
      ok(backend::copy(tag_, out[static_cast<std::size_t>(i)].data(), rows.data + (first + i) * rows.row_stride,
                       sizeof(float) * static_cast<std::size_t>(vocab)),
         "reading the logits rows");
    ok(backend::synchronize(tag_), "reading the logits rows");
    return out;
  }

  /// The K/V bytes of positions first .. first + count - 1 of `sequence`.
  std::vector<KvRow> kv_rows(const core::KvCacheView& cache, int sequence, int first, int count) {
    const core::KvCacheLayout& l = cache.layout;
    std::vector<KvRow> rows(static_cast<std::size_t>(count));
    if (count <= 0 || broken_) return rows;
    // One copy per layer and tensor: the bytes from the first position's first row to the last
    // position's last row (what lies between other rows is read and skipped).
    const long long span = core::kv_row_offset(l, 0, 0, count - 1, l.kv_heads - 1) + l.row_bytes;
    std::vector<unsigned char> block(static_cast<std::size_t>(span));
    for (unsigned char* tensor : {cache.k, cache.v}) {
      if (tensor == nullptr) continue;
      for (int layer = 0; layer < l.layers && !broken_; ++layer) {
        ok(backend::copy(tag_, block.data(), tensor + core::kv_row_offset(l, sequence, layer, first, 0), block.size()),
           "reading the K/V cache");
        ok(backend::synchronize(tag_), "reading the K/V cache");
        for (int p = 0; p < count; ++p)
          for (int h = 0; h < l.kv_heads; ++h) {
            const unsigned char* row = block.data() + core::kv_row_offset(l, 0, 0, p, h);
            rows[static_cast<std::size_t>(p)].insert(rows[static_cast<std::size_t>(p)].end(), row, row + l.row_bytes);
          }
      }
    }
    return rows;
  }

  /// Moves each accepted path's K/V rows to base, base + 1, ... of its sequence, as the decoder
  /// does after verification; max_nodes: the largest tree's nodes.
  void compact(const core::KvCacheView& cache, const std::vector<int>& sequences, const std::vector<int>& bases,
               const std::vector<std::vector<node_t>>& paths, int max_nodes) {
    const std::size_t batch = paths.size();
    std::vector<node_t> path(batch * static_cast<std::size_t>(max_nodes), 0);
    std::vector<int> length(batch);
    for (std::size_t b = 0; b < batch; ++b) {
      std::copy(paths[b].begin(), paths[b].end(), path.begin() + static_cast<long>(b) * max_nodes);
      length[b] = static_cast<int>(paths[b].size());
    }
    const std::vector<core::compaction_status> fresh(batch, core::compaction_status::ok);
    compaction_.grow(sizeof(int) * (4 * batch + path.size()) + sizeof(core::compaction_status) * batch + 5 * 16);
    std::size_t at = 0;
    core::KvCompactionBatch c;
    c.batch = static_cast<int>(batch);
    c.max_nodes = max_nodes;
    c.layout = cache.layout;
    c.k_cache = cache.k;
    c.v_cache = cache.v;
    c.base = put(at, bases, compaction_);
    c.path = put(at, path, compaction_);
    c.length = put(at, length, compaction_);
    c.sequence = put(at, sequences, compaction_);
    auto* status = const_cast<core::compaction_status*>(put(at, fresh, compaction_));
    c.status = status;
    ok(backend::compact_kv(tag_, c), "backend::compact_kv of the target's kv_cache()");
    std::vector<core::compaction_status> result(batch);
    ok(backend::copy(tag_, result.data(), status, sizeof(core::compaction_status) * batch),
       "reading compact_kv's status");
    ok(backend::synchronize(tag_), "backend::compact_kv of the target's kv_cache()");
    for (core::compaction_status s : result)
      if (!broken_ && s != core::compaction_status::ok) {
        checker_.fail(std::string("backend::compact_kv refused the target's kv_cache(): ") + core::to_string(s) +
                      "; layout.max_positions must be the positions each sequence holds.");
        broken_ = true;
      }
  }

 private:
  static std::size_t tree_bytes(const LaidOutTree& t) {
    return 16 * 6 + sizeof(node_t) * t.parent.size() * 3 + sizeof(token_t) * t.token.size() +
           sizeof(int) * t.depth.size() + sizeof(std::uint32_t) * t.mask.size();
  }
  template <class T>
  const T* put(std::size_t& at, const std::vector<T>& values, backend::buffer<Backend>& into) {
    at = (at + 15) / 16 * 16;
    T* to = reinterpret_cast<T*>(into.data() + at);
    ok(backend::copy(tag_, to, values.data(), sizeof(T) * values.size()), "copying to the backend");
    at += sizeof(T) * values.size();
    return to;
  }
  template <class T>
  const T* put(std::size_t& at, const std::vector<T>& values) {
    return put(at, values, trees_);
  }
  void ok(backend::status s, const char* what) {
    if (s == backend::status::ok || broken_) return;
    checker_.fail(std::string(what) + " failed: " + backend::describe(tag_, s) + "; the kit stopped.");
    broken_ = true;
  }

  Backend tag_;
  conformance_detail::Checker& checker_;
  backend::buffer<Backend> trees_, compaction_;
  bool broken_ = false;
};

/// A random accepted path of `tree` (root first).
inline std::vector<node_t> random_path(std::mt19937_64& rng, const LaidOutTree& tree) {
  return path_to(tree, static_cast<node_t>(rng() % tree.parent.size()));
}

inline bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(float) * a.size()) == 0;
}

/// Where two K/V rows of one position first differ, in words: "layer 0, kv_head 1, V". A row
/// holds every layer's kv_heads of K, then (with V) every layer's kv_heads of V.
inline std::string kv_difference(const core::KvCacheLayout& l, const KvRow& a, const KvRow& b) {
  const std::size_t row = static_cast<std::size_t>(l.row_bytes);
  const std::size_t per_tensor = static_cast<std::size_t>(l.layers) * static_cast<std::size_t>(l.kv_heads);
  for (std::size_t k = 0; k < a.size() && k < b.size() && row > 0 && per_tensor > 0; ++k) {
    if (a[k] == b[k]) continue;
    const std::size_t r = k / row;
    return "layer " + std::to_string(r % per_tensor / static_cast<std::size_t>(l.kv_heads)) + ", kv_head " +
           std::to_string(r % static_cast<std::size_t>(l.kv_heads)) + ", " + (r >= per_tensor ? "V" : "K");
  }
  return "its size";
}

/// The argmax of a row (ties to the lowest id), or -1 for a row without a number.
inline token_t argmax_of(const std::vector<float>& row) {
  const int best = core::argmax_row(row.data(), static_cast<int>(row.size()));
  if (best < 0 || best >= static_cast<int>(row.size())) return -1;
  const float value = row[static_cast<std::size_t>(best)];
  return value == value ? best : -1;
}

/// A BackendTarget seen as a batch target of one slot, so one kit drives both.
template <class T>
struct OneSlot {
  T& target;
  static constexpr bool batch = false;
  int slots() const { return 1; }
  void prefill(int, std::span<const token_t> tokens) { target.prefill(tokens); }
  void release(int) {}
  LogitsRows forward(const std::vector<int>&, const std::vector<TreeView>& trees) { return target.forward(trees[0]); }
};

/// A BackendBatchTarget, as the kit drives it.
template <class T>
struct Slots {
  T& target;
  static constexpr bool batch = true;
  int slots() const { return static_cast<int>(target.slots()); }
  void prefill(int slot, std::span<const token_t> tokens) { target.prefill(slot, tokens); }
  void release(int slot) { target.release(slot); }
  LogitsRows forward(const std::vector<int>& slots, const std::vector<TreeView>& trees) {
    return target.forward(TreeBatchView{std::span<const int>(slots), std::span<const TreeView>(trees)});
  }
};

/// One sequence of the live run: its slot, what it committed and the trees it ran.
struct Sequence {
  std::string name;  // "prompt 1" or "round 0, slot 3"
  int slot = 0;
  std::vector<token_t> prompt, committed;
  token_t root = 0;
  std::size_t next_shape = 0;
  std::vector<KvRow> committed_kv;  // the committed rows as the kit last read them
  std::vector<Step> steps;
};

template <class Target, class Access>
class Kit {
 public:
  using Backend = typename Target::backend_type;

  Kit(Target& target, Access access, const BackendConformanceOptions& options)
      : target_(target),
        access_(access),
        options_(options),
        checker_(conformance_options(options)),
        channel_(target.backend(), checker_),
        rng_(options.seed),
        vocab_(static_cast<int>(target.vocab_size())),
        layout_(core::KvCacheView(target.kv_cache()).layout) {}

  ConformanceReport run() {
    const BackendConformanceOptions& o = options_;
    if (o.prompt_length < 1 || o.tree_nodes < 1 || o.max_children < 1 || o.large_tree_nodes < 1 || o.slots < 1) {
      checker_.fail(
          "BackendConformanceOptions: prompt_length, tree_nodes, max_children, large_tree_nodes and slots "
          "must be at least 1.");
      return checker_.report();
    }
    if (access_.slots() < 1) {
      checker_.fail("slots() is " + std::to_string(access_.slots()) + "; a batch target needs at least one slot.");
      return checker_.report();
    }
    if (vocab_ < 1) {
      checker_.fail("vocab_size() is " + std::to_string(vocab_) + "; a target needs at least one token.");
      return checker_.report();
    }
    if (layout_.max_positions < 1 || layout_.layers < 1 || layout_.kv_heads < 1 || layout_.row_bytes < 1) {
      checker_.fail("kv_cache().layout has " + std::to_string(layout_.max_positions) + " positions, " +
                    std::to_string(layout_.layers) + " layers, " + std::to_string(layout_.kv_heads) +
                    " kv_heads and rows of " + std::to_string(layout_.row_bytes) +
                    " bytes; each must be at least 1 (core::kv_layout describes a packed cache).");
      return checker_.report();
    }
    try {
      for (int round = 0; round < options_.prompts && running(); ++round) run_round(round);
    } catch (const std::exception& e) {
      checker_.fail("the target threw while the kit was " + doing_ + ": " + e.what());
    }
    return checker_.report();
  }

 private:
  static ConformanceOptions conformance_options(const BackendConformanceOptions& o) {
    ConformanceOptions c;
    c.max_failures = o.max_failures;
    return c;
  }
  bool running() { return !channel_.broken() && checker_.report().failures.size() < options_.max_failures; }
  core::KvCacheView cache() { return target_.kv_cache(); }

  std::vector<token_t> random_tokens(int count) {
    std::vector<token_t> tokens(static_cast<std::size_t>(count));
    for (token_t& t : tokens) t = static_cast<token_t>(rng_() % static_cast<std::uint64_t>(vocab_));
    return tokens;
  }

  /// The slots of one round: `options.slots` distinct ones at random (one for a single target).
  std::vector<int> pick_slots() {
    std::vector<int> all(static_cast<std::size_t>(access_.slots()));
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng_);
    all.resize(static_cast<std::size_t>(std::clamp(options_.slots, 1, static_cast<int>(all.size()))));
    return all;
  }

  void run_round(int round) {
    std::vector<Sequence> sequences;
    for (int slot : pick_slots()) {
      Sequence s;
      s.slot = slot;
      s.name = Access::batch ? "round " + std::to_string(round) + ", slot " + std::to_string(slot)
                             : "prompt " + std::to_string(round);
      // The first sequence of a round has the full prompt length, the others random lengths up to
      // it, so a reused slot often holds rows of its earlier sequence past its new prompt.
      const int length = sequences.empty()
                             ? options_.prompt_length
                             : 1 + static_cast<int>(rng_() % static_cast<std::uint64_t>(options_.prompt_length));
      s.prompt = random_tokens(std::clamp(length, 1, layout_.max_positions));
      sequences.push_back(std::move(s));
    }
    check_prefill(sequences.front());
    for (Sequence& s : sequences) {
      if (!running()) return;
      s.committed.assign(s.prompt.begin(), s.prompt.end() - 1);
      s.root = s.prompt.back();
      doing_ = "prefilling " + s.name;
      access_.prefill(s.slot, std::span<const token_t>(s.committed));
      s.committed_kv = channel_.kv_rows(cache(), s.slot, 0, static_cast<int>(s.committed.size()));
      check_committed_rows(sequences, &s, "prefill of " + s.name);
    }
    live(sequences);
    for (Sequence& s : sequences)
      if (running()) compare_with_paths_alone(s);
    for (const Sequence& s : sequences) {
      doing_ = "releasing slot " + std::to_string(s.slot);
      access_.release(s.slot);
    }
  }

  /// prefill(tokens) must leave the K/V and logits that forwarding the tokens one by one leaves.
  void check_prefill(const Sequence& s) {
    const int length = static_cast<int>(s.prompt.size());
    if (length < 2 || !running()) return;
    doing_ = "forwarding " + s.name + "'s prompt one token at a time";
    access_.prefill(s.slot, {});
    std::vector<float> one_by_one_logits;
    for (int q = 0; q < length; ++q)
      one_by_one_logits = forward_alone(s.slot, s.prompt[static_cast<std::size_t>(q)], q);
    const std::vector<KvRow> one_by_one = channel_.kv_rows(cache(), s.slot, 0, length);
    doing_ = "prefilling " + s.name;
    access_.prefill(s.slot, std::span<const token_t>(s.prompt.data(), s.prompt.size() - 1));
    const std::vector<float> logits = forward_alone(s.slot, s.prompt.back(), length - 1);
    const std::vector<KvRow> rows = channel_.kv_rows(cache(), s.slot, 0, length);
    for (int q = 0; q < length && running(); ++q) {
      if (rows[static_cast<std::size_t>(q)] == one_by_one[static_cast<std::size_t>(q)]) continue;
      checker_.fail(s.name + ": after prefill(tokens) and a forward of the next token, the K/V at position " +
                    std::to_string(q) + " (" +
                    kv_difference(layout_, rows[static_cast<std::size_t>(q)], one_by_one[static_cast<std::size_t>(q)]) +
                    ") differs from forwarding the same tokens one by one; prefill must write each token's K/V "
                    "at its position exactly as forward does.");
      return;
    }
    if (!same_bits(logits, one_by_one_logits))
      checker_.fail(s.name +
                    ": the logits of a forward after prefill(tokens) differ from forwarding the same tokens "
                    "one by one, though the K/V rows agree; forward must read exactly the prefilled rows "
                    "0 .. base_position - 1.");
  }

  /// Forwards `token` alone at `position` of `slot` (the cache holds `position` tokens) and returns
  /// its logits row; its K/V stays at row `position`.
  std::vector<float> forward_alone(int slot, token_t token, int position) {
    const LaidOutTree single({-1}, {token});
    const std::vector<TreeView> views = channel_.upload({&single}, {position});
    const std::vector<int> slots{slot};
    const LogitsRows rows = access_.forward(slots, views);
    return channel_.logits(rows, 0, 1, vocab_)[0];
  }

  /// Every active sequence's committed K/V must be what the kit last read: `event` must not have
  /// written them. `except` was just prefilled (its rows are new).
  void check_committed_rows(std::vector<Sequence>& sequences, const Sequence* except, const std::string& event) {
    for (Sequence& s : sequences) {
      if (&s == except || !running()) continue;
      const std::vector<KvRow> now = channel_.kv_rows(cache(), s.slot, 0, static_cast<int>(s.committed.size()));
      for (std::size_t q = 0; q < now.size(); ++q) {
        if (now[q] == s.committed_kv[q]) continue;
        checker_.fail(s.name + ": the committed K/V at position " + std::to_string(q) + " (" +
                      kv_difference(layout_, now[q], s.committed_kv[q]) + ") changed during the " + event +
                      (Access::batch ? "; a slot's prefill, forward or release must not write another slot's "
                                       "rows, and a forward writes only rows base_position + i of its own slot "
                                       "(sequence `slot` of kv_cache())."
                                     : "; forward must write only the rows base_position + i of its nodes."));
        s.committed_kv = now;  // report each change once
        break;
      }
    }
  }

  /// The live run: calls of forward with trees of every shape, random accepted paths, compaction.
  void live(std::vector<Sequence>& sequences) {
    const std::vector<Shape> plan = shapes(options_);
    for (int call = 0; running(); ++call) {
      // A random part of the sequences that still have trees to run, in random order.
      std::vector<Sequence*> waiting, in_call;
      for (Sequence& s : sequences)
        if (s.next_shape < plan.size() && static_cast<int>(s.committed.size()) < layout_.max_positions)
          waiting.push_back(&s);
      if (waiting.empty()) return;
      for (Sequence* s : waiting)
        if (rng_() % 10 < 7) in_call.push_back(s);
      if (in_call.empty()) in_call.push_back(waiting[rng_() % waiting.size()]);
      std::shuffle(in_call.begin(), in_call.end(), rng_);

      std::vector<const LaidOutTree*> trees;
      std::vector<int> slots, bases;
      for (Sequence* s : in_call) {
        const int base = static_cast<int>(s->committed.size());
        auto [shape, tree] =
            make_tree(rng_, plan[s->next_shape++], s->root, layout_.max_positions - base, options_, vocab_);
        s->steps.push_back(Step{shape, s->committed, std::move(tree), {}, {}, static_cast<int>(s->steps.size())});
        slots.push_back(s->slot);
        bases.push_back(base);
      }
      for (Sequence* s : in_call) trees.push_back(&s->steps.back().tree);
      for (Sequence* s : in_call) s->steps.back().call_slots = slots;

      doing_ = "forwarding " + (Access::batch ? "the trees of slots " + list(slots) : in_call[0]->name + "'s tree");
      const std::vector<TreeView> views = channel_.upload(trees, bases);
      const LogitsRows rows = access_.forward(slots, views);
      long long first_row = 0;
      for (std::size_t b = 0; b < in_call.size(); ++b) {
        Step& step = in_call[b]->steps.back();
        const int n = static_cast<int>(step.tree.parent.size());
        std::vector<std::vector<float>> logits = channel_.logits(rows, first_row, n, vocab_);
        std::vector<KvRow> kv = channel_.kv_rows(cache(), slots[b], bases[b], n);
        for (int i = 0; i < n; ++i)
          step.nodes.push_back(
              {std::move(logits[static_cast<std::size_t>(i)]), std::move(kv[static_cast<std::size_t>(i)])});
        first_row += n;
      }
      check_committed_rows(sequences, nullptr,
                           "forward of " + (Access::batch ? "slots " + list(slots)
                                                          : "tree " + std::to_string(in_call[0]->steps.size() - 1)));
      if (!running()) return;

      std::vector<std::vector<node_t>> paths;
      int max_nodes = 1;
      for (Sequence* s : in_call) {
        max_nodes = std::max(max_nodes, static_cast<int>(s->steps.back().tree.parent.size()));
        const Step& step = s->steps.back();
        paths.push_back(random_path(rng_, step.tree));
        const node_t last = paths.back().back();
        s->root = argmax_of(step.nodes[static_cast<std::size_t>(last)].logits);
        if (s->root < 0) {
          checker_.fail(step_name(s->name, step) + ": node " + std::to_string(last) +
                        "'s logits row has no number (NaN); the kit stopped.");
          return;
        }
      }
      channel_.compact(cache(), slots, bases, paths, max_nodes);
      for (std::size_t b = 0; b < in_call.size(); ++b) {
        Sequence& s = *in_call[b];
        const Step& step = s.steps.back();
        for (node_t k : paths[b]) s.committed.push_back(step.tree.token[static_cast<std::size_t>(k)]);
        s.committed_kv = channel_.kv_rows(cache(), s.slot, 0, static_cast<int>(s.committed.size()));
      }
    }
  }

  /// Runs node `node` of `step` on its path alone in `slot`: prefill of the committed tokens and
  /// the path above the node, then the node alone. Its logits and K/V (at its position).
  NodeResult path_alone(const Step& step, int node, int slot) {
    std::vector<token_t> tokens = step.committed;
    const std::vector<token_t> path = step.tree.path_tokens(node);
    tokens.insert(tokens.end(), path.begin(), path.end() - 1);
    doing_ = "running a node on its path alone in slot " + std::to_string(slot);
    access_.prefill(slot, std::span<const token_t>(tokens));
    NodeResult r;
    r.logits = forward_alone(slot, path.back(), static_cast<int>(tokens.size()));
    r.kv = channel_.kv_rows(cache(), slot, static_cast<int>(tokens.size()), 1)[0];
    return r;
  }

  /// The path-alone runs of a batch kit rotate through every slot of the target: a sequence's
  /// results must not depend on its slot or on what the slot held before.
  int reference_slot(int slot) {
    if constexpr (Access::batch) return reference_turn_++ % access_.slots();
    return slot;
  }

  void compare_with_paths_alone(const Sequence& s) {
    for (const Step& step : s.steps) {
      const int n = static_cast<int>(step.tree.parent.size());
      int logits_differ = 0, kv_differ = 0, first_logits = -1, first_kv = -1;
      std::vector<NodeResult> alone;
      for (int i = 0; i < n && running(); ++i) {
        alone.push_back(path_alone(step, i, reference_slot(s.slot)));
        ++checker_.report().nodes_checked;
        const NodeResult& live = step.nodes[static_cast<std::size_t>(i)];
        if (!same_bits(live.logits, alone.back().logits) && logits_differ++ == 0) first_logits = i;
        if (live.kv != alone.back().kv && kv_differ++ == 0) first_kv = i;
      }
      if (!running()) return;
      if (logits_differ == 0 && kv_differ == 0) continue;
      const bool logits = logits_differ > 0;
      const int node = logits ? first_logits : first_kv;
      report_difference(s, step, node, logits, logits ? logits_differ : kv_differ,
                        alone[static_cast<std::size_t>(node)]);
      return;  // later trees inherit the difference
    }
  }

  /// One sentence for the first tree of `s` whose nodes differ from their paths alone. Running
  /// the tree again, alone in its slot right after a prefill of the same tokens, tells where the
  /// difference comes from: if that run agrees with the live one, from the tree forward itself;
  /// if not, from the other trees of the live call or from the cache the live steps left.
  void report_difference(const Sequence& s, const Step& step, int node, bool logits, int differing,
                         const NodeResult& alone) {
    const NodeResult& live = step.nodes[static_cast<std::size_t>(node)];
    const NodeResult again = tree_after_prefill(s, step, node);
    if (!running()) return;
    const bool live_differs_from_again = logits ? !same_bits(live.logits, again.logits) : live.kv != again.kv;

    const std::string what = std::to_string(differing) + " of " + std::to_string(step.tree.parent.size()) +
                             (logits ? " nodes' logits" : " nodes' K/V");
    const std::string first = " (first: node " + std::to_string(node) + ", depth " +
                              std::to_string(step.tree.depth[static_cast<std::size_t>(node)]) +
                              (logits ? "" : ", " + kv_difference(layout_, live.kv, alone.kv)) + ")";
    const std::string where = step_name(s.name, step);
    if (live_differs_from_again && step.call_slots.size() > 1) {
      checker_.fail(where + ", forwarded with slots " + list(step.call_slots) + " in one call: " + what +
                    " differ bit for bit from the same tree forwarded alone in slot " + std::to_string(s.slot) + first +
                    "; a slot's results must not depend on the other trees of the call (their slots, sizes or order).");
      return;
    }
    const std::string differ = what +
                               " differ bit for bit from the node run on its path alone (a fresh prefill "
                               "of the committed tokens and the path above it, then the node alone)" +
                               first;
    if (live_differs_from_again)
      checker_.fail(where + ": " + differ +
                    ", but the same tree forwarded right after a prefill of the same tokens "
                    "agrees; so forward did not read the cache as the earlier steps left it (their accepted rows "
                    "moved by backend::compact_kv): a forward must read the committed tokens' K/V from the rows "
                    "kv_cache() describes, not from state of its own, and write node i's at base_position + i.");
    else if (!logits)
      checker_.fail(where + ": " + differ + "; forward must write node i's K/V at cache row base_position + i" +
                    (Access::batch ? " of its slot" : "") +
                    ", computed at position tree.position(i) (the decoder then moves the accepted rows).");
    else
      checker_.fail(where + ": " + differ +
                    "; a node must attend to the cache and to its tree ancestors only "
                    "(tree.attends(node, j)), at position tree.position(node) = base_position + depth" +
                    (Access::batch ? ", and a prefill must leave nothing of the slot's earlier sequence." : "."));
  }

  /// Node `node` of `step`'s tree forwarded alone in its slot right after a prefill of the tokens
  /// the slot held when the tree ran live.
  NodeResult tree_after_prefill(const Sequence& s, const Step& step, int node) {
    doing_ = "forwarding " + s.name + "'s tree again after a prefill";
    access_.prefill(s.slot, std::span<const token_t>(step.committed));
    const int base = static_cast<int>(step.committed.size());
    const std::vector<TreeView> views = channel_.upload({&step.tree}, {base});
    const std::vector<int> slots{s.slot};
    const LogitsRows rows = access_.forward(slots, views);
    NodeResult r;
    r.logits = channel_.logits(rows, node, 1, vocab_)[0];
    r.kv = channel_.kv_rows(cache(), s.slot, base + node, 1)[0];
    return r;
  }

  Target& target_;
  Access access_;
  BackendConformanceOptions options_;
  conformance_detail::Checker checker_;
  Channel<Backend> channel_;
  std::mt19937_64 rng_;
  int vocab_;
  core::KvCacheLayout layout_;
  std::string doing_ = "starting";
  int reference_turn_ = 0;
};

}  // namespace backend_conformance_detail

/// Checks a BackendTarget against its contract (see the header's comment); the target is left in
/// an unspecified sequence (prefill before decoding with it).
template <BackendTarget T>
ConformanceReport check_backend_target(T& target, const BackendConformanceOptions& options = {}) {
  using namespace backend_conformance_detail;
  return Kit<T, OneSlot<T>>(target, OneSlot<T>{target}, options).run();
}

/// Checks a BackendBatchTarget against its contract, slot isolation and slot reuse included (see
/// the header's comment); every slot is left in an unspecified sequence.
template <BackendBatchTarget T>
ConformanceReport check_backend_batch_target(T& target, const BackendConformanceOptions& options = {}) {
  using namespace backend_conformance_detail;
  return Kit<T, Slots<T>>(target, Slots<T>{target}, options).run();
}

}  // namespace specdec::testing
