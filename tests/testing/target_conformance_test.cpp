// The target conformance kit (issue 19): a correct target passes it, and each of the bugs that
// the decoder's "output equals greedy" check misses whenever drafters draft chains fails it.
#include <catch2/catch.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <specdec/concepts.hpp>
#include <specdec/decoder.hpp>
#include <specdec/core/tree.hpp>
#include <specdec/policies/drafters/oracle.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/testing/hash_target.hpp>  // hash_model
#include <specdec/testing/target_conformance.hpp>

using namespace specdec;
using Catch::Matchers::Contains;

namespace {

enum class Bug { none, ignores_mask, ignores_positions, commits_wrong_rows, reuses_one_row, prefill_features_shifted };

/// A target with real KV slots: each slot holds (token, position); a node's logits and features
/// are a hash of every slot it attends to, in slot order. Bugs are the ones a user's target has.
class SlotTarget {
 public:
  struct Slot {
    token_t token;
    int position;
  };
  class Output {
   public:
    token_t argmax(node_t node) const { return argmax_[static_cast<std::size_t>(node)]; }
    std::span<const float> logits(node_t node) const {
      if (owner_->bug_ == Bug::reuses_one_row) {  // one scratch row, refilled per call
        owner_->fill(hash_[static_cast<std::size_t>(node)], scratch_.data(), vocab);
        return {scratch_.data(), static_cast<std::size_t>(vocab)};
      }
      return {logits_.data() + static_cast<std::size_t>(node) * vocab, static_cast<std::size_t>(vocab)};
    }
    std::span<const float> features(node_t node) const {
      return {features_.data() + static_cast<std::size_t>(node) * dim, static_cast<std::size_t>(dim)};
    }

   private:
    friend class SlotTarget;
    const SlotTarget* owner_ = nullptr;
    std::vector<std::uint64_t> hash_;
    std::vector<float> logits_, features_;
    mutable std::vector<float> scratch_ = std::vector<float>(vocab);
    std::vector<token_t> argmax_;
  };
  static constexpr int vocab = 40, dim = 3;

  explicit SlotTarget(Bug bug = Bug::none) : bug_(bug) { out_.owner_ = this; }

  int vocab_size() const { return vocab; }
  int feature_dim() const { return dim; }

  void prefill(std::span<const token_t> tokens) {
    slots_.clear();
    prefill_features_.clear();
    for (token_t t : tokens) {
      slots_.push_back({t, static_cast<int>(slots_.size())});
      const std::uint64_t h = hash_of(slots_.size(), {});
      for (int e = 0; e < dim; ++e) prefill_features_.push_back(feature(h, e));
    }
    if (bug_ == Bug::prefill_features_shifted && !prefill_features_.empty())
      prefill_features_.insert(prefill_features_.begin(), prefill_features_.end() - dim, prefill_features_.end());
    prefill_features_.resize(tokens.size() * dim);
  }
  std::span<const float> prefill_features() const { return prefill_features_; }

  const Output& forward(const TreeView& tree) {
    scratch_.clear();
    const std::size_t n = static_cast<std::size_t>(tree.size);
    out_.hash_.resize(n);
    out_.logits_.resize(n * vocab);
    out_.features_.resize(n * dim);
    out_.argmax_.resize(n);
    for (int i = 0; i < tree.size; ++i) {
      const int position = bug_ == Bug::ignores_positions ? tree.base_position + i : tree.position(i);
      scratch_.push_back({tree.token[i], position});
      std::vector<int> visible;
      for (int j = 0; j <= i; ++j)
        if (bug_ == Bug::ignores_mask || tree.attends(i, j)) visible.push_back(j);
      const std::uint64_t h = hash_of(slots_.size(), visible);
      out_.hash_[static_cast<std::size_t>(i)] = h;
      fill(h, out_.logits_.data() + static_cast<std::size_t>(i) * vocab, vocab);
      for (int e = 0; e < dim; ++e) out_.features_[static_cast<std::size_t>(i) * dim + e] = feature(h, e);
      out_.argmax_[static_cast<std::size_t>(i)] = core::argmax_row(out_.logits_.data() + static_cast<std::size_t>(i) * vocab, vocab);
    }
    return out_;
  }

  void commit(std::span<const node_t> path) {
    for (std::size_t k = 0; k < path.size(); ++k)
      slots_.push_back(scratch_[bug_ == Bug::commits_wrong_rows ? k : static_cast<std::size_t>(path[k])]);
  }

 private:
  // The hash of the first `cached` slots, then the tree's scratch slots `visible`.
  std::uint64_t hash_of(std::size_t cached, const std::vector<int>& visible) const {
    std::uint64_t h = 7;
    for (std::size_t s = 0; s < cached; ++s) h = hash_model::mix(h, slots_[s].token, slots_[s].position);
    for (int j : visible) h = hash_model::mix(h, scratch_[static_cast<std::size_t>(j)].token, scratch_[static_cast<std::size_t>(j)].position);
    return h;
  }
  void fill(std::uint64_t h, float* row, int n) const {
    for (int v = 0; v < n; ++v) row[v] = hash_model::logit(h, v, 4.0f);
  }
  static float feature(std::uint64_t h, int e) { return hash_model::logit(h, 1000 + e, 1.0f); }

  Bug bug_;
  std::vector<Slot> slots_, scratch_;
  std::vector<float> prefill_features_;
  Output out_;
};
static_assert(FeatureTarget<SlotTarget>);

}  // namespace

TEST_CASE("target conformance kit: a correct target with KV slots conforms", "[testing][conformance]") {
  SlotTarget target;
  const testing::ConformanceReport report = testing::check_target(target);
  INFO(report.str());
  CHECK(report.ok());
  CHECK(report.nodes_checked > 100);
}

TEST_CASE("target conformance kit: a target that ignores the ancestor mask fails", "[testing][conformance]") {
  SlotTarget target(Bug::ignores_mask);
  const testing::ConformanceReport report = testing::check_target(target);
  REQUIRE_FALSE(report.ok());
  CHECK_THAT(report.str(), Contains("tree.attends(node, j)") && Contains("step 0"));
}

TEST_CASE("target conformance kit: a target that ignores positions fails", "[testing][conformance]") {
  SlotTarget target(Bug::ignores_positions);
  const testing::ConformanceReport report = testing::check_target(target);
  REQUIRE_FALSE(report.ok());
  CHECK_THAT(report.str(), Contains("tree.position(node)") && Contains("step 0"));
}

TEST_CASE("target conformance kit: a target that commits the wrong rows fails", "[testing][conformance]") {
  SlotTarget target(Bug::commits_wrong_rows);
  const testing::ConformanceReport report = testing::check_target(target);
  REQUIRE_FALSE(report.ok());
  CHECK_THAT(report.str(), Contains("commit(path)"));
}

TEST_CASE("target conformance kit: an output that reuses one logits row fails", "[testing][conformance]") {
  SlotTarget target(Bug::reuses_one_row);
  const testing::ConformanceReport report = testing::check_target(target);
  REQUIRE_FALSE(report.ok());
  CHECK_THAT(report.str(), Contains("must stay valid and unchanged"));
}

TEST_CASE("target conformance kit: shifted prefill features fail", "[testing][conformance]") {
  SlotTarget target(Bug::prefill_features_shifted);
  const testing::ConformanceReport report = testing::check_target(target);
  REQUIRE_FALSE(report.ok());
  CHECK_THAT(report.str(), Contains("prefill_features() row"));
}

// issue 19: the documented check "with the exact verifier the output equals greedy" passes a
// target that ignores the ancestor mask when the drafter drafts chains; the kit does not.
TEST_CASE("regression: a target ignoring the mask passes the greedy check with chain drafts, not the kit",
          "[testing][conformance][regression]") {
  SlotTarget correct, buggy(Bug::ignores_mask);
  const std::vector<token_t> prompt{3, 1, 4, 1, 5};
  std::vector<token_t> greedy = prompt;  // plain greedy decoding, one node per forward
  correct.prefill(std::span<const token_t>(prompt).first(prompt.size() - 1));
  for (int i = 0; i < 60; ++i) {
    const testing::LaidOutTree root({-1}, {greedy.back()});
    greedy.push_back(correct.forward(root.view(static_cast<int>(greedy.size()) - 1)).argmax(0));
    const node_t only_root = 0;
    correct.commit(std::span<const node_t>(&only_root, 1));
  }
  SpeculativeDecoder<SlotTarget, OracleDrafter, ExactVerifier> decoder(
      buggy, DecoderOptions{.budget = 8}, OracleDrafter(greedy, /*depth=*/4, /*error_rate=*/0.3), ExactVerifier{});
  decoder.prefill(prompt);
  CHECK(decoder.generate(60) == std::vector<token_t>(greedy.begin() + static_cast<long>(prompt.size()), greedy.end()));
  CHECK_FALSE(testing::check_target(buggy).ok());
}
