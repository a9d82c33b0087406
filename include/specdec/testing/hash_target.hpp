// HashTarget: a deterministic test model that needs no model file.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <specdec/concepts.hpp>
#include <specdec/core/tree.hpp>
#include <specdec/error.hpp>

namespace specdec {

/// The hash model's arithmetic, shared by HashTarget and BackendHashTarget (host and device).
namespace hash_model {
SPECDEC_HD constexpr std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
/// The hash of a sequence after appending `token` at `position` to a sequence hashed `h`.
SPECDEC_HD constexpr std::uint64_t mix(std::uint64_t h, token_t token, int position) {
  return splitmix(h ^ splitmix(static_cast<std::uint64_t>(token) * 0x100000001b3ull + static_cast<std::uint64_t>(position)));
}
/// The hashes of every prefix of `tokens` (entry i: the first i + 1 tokens) after `seed`.
inline std::vector<std::uint64_t> running_hashes(std::span<const token_t> tokens, std::uint64_t seed) {
  std::vector<std::uint64_t> out;
  out.reserve(tokens.size());
  std::uint64_t h = seed;
  for (std::size_t i = 0; i < tokens.size(); ++i) out.push_back(h = mix(h, tokens[i], static_cast<int>(i)));
  return out;
}
/// The logit of token v after a sequence hashed `h` (exact on host and device: no rounding
/// but the one product).
SPECDEC_HD constexpr float logit(std::uint64_t h, int v, float sharpness) {
  return sharpness * static_cast<float>(splitmix(h + static_cast<std::uint64_t>(v)) >> 40) * (1.0f / 16777216.0f);
}
}  // namespace hash_model

/// A stand-in model whose logits after a sequence are a hash of the whole sequence — every token
/// and its position. It keeps a cache of the committed tokens' running hashes (its "KV cache") and
/// hashes each tree node from its parent at tree.position(node), so a decoder that gets positions,
/// ancestry or commits wrong produces different tokens than plain greedy decoding.
///
/// It is also a BatchTarget of `slots` sequences, each with its own cache: forward(batch) runs
/// every slot's tree in one call. The single-sequence members (prefill(tokens), forward(tree),
/// commit(path), rewind, cached()) are those of slot 0.
class HashTarget {
 public:
  /// The target's output: a full row of logits per node, and its argmax.
  class Output {
   public:
    token_t argmax(node_t node) const { return argmax_[node]; }
    std::span<const float> logits(node_t node) const {
      return {logits_.data() + static_cast<std::size_t>(node) * vocab_, static_cast<std::size_t>(vocab_)};
    }

   private:
    friend class HashTarget;
    int vocab_ = 0;
    std::vector<float> logits_;
    std::vector<token_t> argmax_;
  };

  /// A batched forward's output: tree(b) is the output of the batch's tree b.
  class BatchOutput {
   public:
    const Output& tree(int b) const { return trees_[static_cast<std::size_t>(b)]; }

   private:
    friend class HashTarget;
    std::vector<Output> trees_;  // grows to the largest batch, then reused
  };

  /// `sharpness` scales the logits: larger makes the distribution peakier. `slots`: sequences
  /// held at once (the BatchTarget members).
  explicit HashTarget(int vocab_size = 64, std::uint64_t seed = 1, float sharpness = 4.0f, int slots = 1)
      : vocab_(vocab_size), seed_(seed), sharpness_(sharpness) {
    if (vocab_size < 2) throw error("HashTarget: vocab_size must be >= 2, got " + std::to_string(vocab_size));
    if (slots < 1) throw error("HashTarget: slots must be >= 1, got " + std::to_string(slots));
    slots_.resize(static_cast<std::size_t>(slots));
    out_.vocab_ = vocab_size;
  }

  int vocab_size() const { return vocab_; }
  int slots() const { return static_cast<int>(slots_.size()); }

  void prefill(std::span<const token_t> tokens) { prefill(0, tokens); }
  const Output& forward(const TreeView& tree) {
    run(slot(0, "forward"), tree, out_);
    return out_;
  }
  void commit(std::span<const node_t> path) { commit(0, path); }

  /// BatchTarget: a new sequence in `slot` whose cache holds `tokens`.
  void prefill(int slot_id, std::span<const token_t> tokens) {
    for (token_t t : tokens) check(t);
    Sequence& s = slot(slot_id, "prefill");
    s.cache.assign(1, seed_);
    for (token_t t : tokens) s.cache.push_back(mix(s.cache.back(), t, static_cast<int>(s.cache.size()) - 1));
  }

  /// BatchTarget: every tree of the batch on its slot's cache.
  const BatchOutput& forward(const TreeBatchView& batch) {
    if (batch.slots.size() != batch.trees.size())
      throw error("HashTarget::forward: the batch has " + std::to_string(batch.slots.size()) + " slots but " +
                  std::to_string(batch.trees.size()) + " trees");
    if (batch_out_.trees_.size() < batch.trees.size()) batch_out_.trees_.resize(batch.trees.size());
    for (std::size_t b = 0; b < batch.trees.size(); ++b) {
      Output& out = batch_out_.trees_[b];
      out.vocab_ = vocab_;
      run(slot(batch.slots[b], "forward"), batch.trees[b], out);
    }
    return batch_out_;
  }

  /// BatchTarget: appends the path of the slot's tree in the last forward to its cache.
  void commit(int slot_id, std::span<const node_t> path) {
    Sequence& s = slot(slot_id, "commit");
    for (std::size_t k = 0; k < path.size(); ++k) {
      if (path[k] < 0 || path[k] >= static_cast<node_t>(s.node_hash.size()))
        throw error("HashTarget::commit: node " + std::to_string(path[k]) + " is not in the last tree");
    }
    for (node_t node : path) s.cache.push_back(s.node_hash[node]);
  }

  /// BatchTarget: the slot's sequence has ended.
  void release(int slot_id) {
    Sequence& s = slot(slot_id, "release");
    s.cache.clear();
    s.node_hash.clear();
  }

  /// Keeps the first `tokens` tokens of the cache.
  void rewind(int tokens) {
    if (tokens < 0 || tokens > cached())
      throw error("HashTarget::rewind: cannot keep " + std::to_string(tokens) + " tokens, the cache holds " +
                  std::to_string(cached()));
    slots_[0].cache.resize(static_cast<std::size_t>(tokens) + 1);
  }

  /// Plain greedy decoding of `n` tokens after `prompt`, one token at a time, without trees.
  std::vector<token_t> generate(std::span<const token_t> prompt, int n) const {
    std::uint64_t h = seed_;
    int position = 0;
    for (token_t t : prompt) h = mix(h, t, position++);
    std::vector<token_t> out;
    std::vector<float> row(vocab_);
    for (int i = 0; i < n; ++i) {
      fill_row(h, row.data());
      const token_t next = core::argmax_row(row.data(), vocab_);
      out.push_back(next);
      h = mix(h, next, position++);
    }
    return out;
  }

  /// Tokens in the cache (of `slot`).
  int cached(int slot = 0) const { return static_cast<int>(slots_.at(static_cast<std::size_t>(slot)).cache.size()) - 1; }

 private:
  struct Sequence {
    std::vector<std::uint64_t> cache;      // cache[k] = hash of the first k tokens; empty: no sequence
    std::vector<std::uint64_t> node_hash;  // per node of the slot's last tree
  };

  Sequence& slot(int id, const char* what) {
    if (id < 0 || id >= slots())
      throw error(std::string("HashTarget::") + what + ": slot " + std::to_string(id) + " outside [0, " +
                  std::to_string(slots()) + ")");
    return slots_[static_cast<std::size_t>(id)];
  }

  void run(Sequence& s, const TreeView& tree, Output& out) {
    if (s.cache.empty()) throw error("HashTarget::forward: call prefill() first");
    const int cached = static_cast<int>(s.cache.size()) - 1;
    if (tree.base_position != cached) {
      throw error("HashTarget::forward: tree starts at position " + std::to_string(tree.base_position) +
                  " but the cache holds " + std::to_string(cached) + " tokens");
    }
    s.node_hash.resize(tree.size);
    out.logits_.resize(static_cast<std::size_t>(tree.size) * vocab_);
    out.argmax_.resize(tree.size);
    for (int i = 0; i < tree.size; ++i) {
      check(tree.token[i]);
      const std::uint64_t before = i == 0 ? s.cache.back() : s.node_hash[tree.parent[i]];
      s.node_hash[i] = mix(before, tree.token[i], tree.position(i));
      float* row = out.logits_.data() + static_cast<std::size_t>(i) * vocab_;
      fill_row(s.node_hash[i], row);
      out.argmax_[i] = core::argmax_row(row, vocab_);
    }
  }

  static std::uint64_t mix(std::uint64_t h, token_t token, int position) {
    return hash_model::mix(h, token, position);
  }
  void fill_row(std::uint64_t h, float* row) const {
    for (int v = 0; v < vocab_; ++v) row[v] = hash_model::logit(h, v, sharpness_);
  }
  void check(token_t t) const {
    if (t < 0 || t >= vocab_)
      throw error("HashTarget: token " + std::to_string(t) + " outside the vocabulary [0, " + std::to_string(vocab_) + ")");
  }

  int vocab_;
  std::uint64_t seed_;
  float sharpness_;
  std::vector<Sequence> slots_;
  Output out_;             // the single-sequence forward's
  BatchOutput batch_out_;  // the batched forward's
};

static_assert(Target<HashTarget>);
static_assert(RewindableTarget<HashTarget>);
static_assert(BatchTarget<HashTarget>);

}  // namespace specdec
