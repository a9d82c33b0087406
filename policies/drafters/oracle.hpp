// OracleDrafter: knows the target's continuation and drafts it with a controllable error rate.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <specdec/concepts.hpp>
#include <specdec/error.hpp>

namespace specdec {

/// For tests: given the full reference sequence (prompt + the target's greedy continuation), it
/// drafts the next `depth` reference tokens as a chain, replacing each by a wrong token with
/// probability `error_rate` (1 = always wrong). With `width` > 1 every chain node also gets
/// width - 1 wrong siblings. It drafts nothing once the context leaves the reference.
class OracleDrafter {
 public:
  static constexpr const char* name = "oracle";

  OracleDrafter(std::vector<token_t> reference, int depth, double error_rate = 0.0, int width = 1,
                std::uint64_t seed = 1)
      : reference_(std::move(reference)), depth_(depth), error_rate_(error_rate), width_(width), rng_(seed) {
    if (depth < 0) throw error("OracleDrafter: depth must be >= 0, got " + std::to_string(depth));
    if (width < 1) throw error("OracleDrafter: width must be >= 1, got " + std::to_string(width));
    if (!(error_rate >= 0.0 && error_rate <= 1.0))
      throw error("OracleDrafter: error_rate must be in [0, 1], got " + std::to_string(error_rate));
  }

  void begin(std::span<const token_t>) {}
  void observe(std::span<const token_t>) {}

  void propose(const DraftContext& ctx, DraftTree& tree) {
    const std::size_t n = ctx.tokens.size();
    if (ctx.vocab_size <= width_)
      throw error("OracleDrafter: width " + std::to_string(width_) + " needs a vocabulary larger than " +
                  std::to_string(width_));
    if (n > reference_.size() || !std::equal(ctx.tokens.begin(), ctx.tokens.end(), reference_.begin())) return;
    std::uniform_real_distribution<double> coin(0.0, 1.0);
    std::uniform_int_distribution<int> shift(1, ctx.vocab_size - width_);
    node_t node = 0;
    float score = 1.0f;
    for (int k = 0; k < depth_ && n + k < reference_.size(); ++k) {
      const token_t right = reference_[n + k];
      const bool wrong = error_rate_ > 0.0 && coin(rng_) < error_rate_;
      const int base = wrong ? shift(rng_) : 0;  // first sibling offset; 0 = the right token
      const node_t next = tree.add(node, wrap(right + base, ctx.vocab_size), score);
      for (int w = 1; w < width_; ++w) tree.add(node, wrap(right + base + w, ctx.vocab_size), score * 0.5f);
      node = next;
      score *= 0.9f;
    }
  }

 private:
  static token_t wrap(long t, int vocab) { return static_cast<token_t>(t % vocab); }

  std::vector<token_t> reference_;
  int depth_;
  double error_rate_;
  int width_;
  std::mt19937_64 rng_;
};

static_assert(Drafter<OracleDrafter>);

}  // namespace specdec
