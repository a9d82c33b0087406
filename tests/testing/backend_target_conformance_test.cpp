// The conformance kit for backend targets (issue 47): the host backend's stand-ins pass it, and each
// bug a backend target may have fails it with the sentence that names it.
#include <catch2/catch.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <specdec/backend.hpp>
#include <specdec/step/backend_step.hpp>
#include <specdec/concepts.hpp>
#include <specdec/decoder.hpp>
#include <specdec/policies/drafters/oracle.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/testing/backend_hash_target.hpp>
#include <specdec/testing/backend_target_conformance.hpp>
#include <specdec/testing/hash_target.hpp>

using namespace specdec;
using Catch::Matchers::Contains;

namespace {

enum class Bug {
  none,
  ignores_mask,         // a node attends to every earlier node of the tree (a causal mask over the nodes)
  index_positions,      // node i sits at position base_position + i, not base_position + depth
  kv_at_positions,      // node i's K/V goes to row base_position + depth (its position), not base_position + i
  leaks_between_slots,  // tree b's root continues the previous tree of the call, not its own slot's cache
  writes_next_slot,     // node i's K/V also goes to the next slot's row base_position + i
  keeps_own_state       // a root continues the slot's last prefilled or forwarded node, not the compacted cache
};

/// BackendHashBatchTarget's model on the host backend with one of a backend target's bugs: slot
/// s's running hashes (its K/V) are sequence s of the cache, logits are hash_model::logit's.
class BuggyHashBatchTarget {
 public:
  using backend_type = backend::host;
  static constexpr std::uint64_t seed = 1;
  static constexpr float sharpness = 4.0f;

  BuggyHashBatchTarget(Bug bug, int vocab, int max_positions, int slots)
      : bug_(bug),
        vocab_(vocab),
        slots_(slots),
        layout_(core::kv_layout(1, max_positions, 1, 1, sizeof(std::uint64_t))),
        cache_(static_cast<std::size_t>(max_positions) * static_cast<std::size_t>(slots)),
        last_(static_cast<std::size_t>(slots), seed) {}

  backend::host backend() const { return {}; }
  int vocab_size() const { return vocab_; }
  int slots() const { return slots_; }
  core::KvCacheView kv_cache() { return {layout_, reinterpret_cast<unsigned char*>(cache_.data()), nullptr}; }

  void prefill(int slot, std::span<const token_t> tokens) {
    const std::vector<std::uint64_t> hashes = hash_model::running_hashes(tokens, seed);
    std::copy(hashes.begin(), hashes.end(), row(slot, 0));
    last_[static_cast<std::size_t>(slot)] = hashes.empty() ? seed : hashes.back();
  }
  void release(int) {}

  LogitsRows forward(const TreeBatchView& batch) {
    std::size_t rows = 0;
    for (const TreeView& tree : batch.trees) rows += static_cast<std::size_t>(tree.size);
    logits_.assign(rows * static_cast<std::size_t>(vocab_), 0.0f);
    float* out = logits_.data();
    std::uint64_t previous_tree_last = seed;
    for (std::size_t b = 0; b < batch.trees.size(); ++b) {
      const TreeView& tree = batch.trees[b];
      std::uint64_t* cache = row(batch.slots[b], 0);
      const int base = tree.base_position;
      std::vector<std::uint64_t> hash(static_cast<std::size_t>(tree.size));
      for (int i = 0; i < tree.size; ++i) {
        std::uint64_t before = base > 0 ? cache[base - 1] : seed;
        if (i > 0)
          before = hash[static_cast<std::size_t>(bug_ == Bug::ignores_mask ? i - 1 : tree.parent[i])];
        else if (bug_ == Bug::leaks_between_slots && b > 0)
          before = previous_tree_last;
        else if (bug_ == Bug::keeps_own_state)
          before = last_[static_cast<std::size_t>(batch.slots[b])];
        const int position = bug_ == Bug::index_positions ? base + i : tree.position(i);
        hash[static_cast<std::size_t>(i)] = hash_model::mix(before, tree.token[i], position);
      }
      for (int i = 0; i < tree.size; ++i) {
        cache[base + (bug_ == Bug::kv_at_positions ? tree.depth[i] : i)] = hash[static_cast<std::size_t>(i)];
        if (bug_ == Bug::writes_next_slot)
          row((batch.slots[b] + 1) % slots_, base)[i] = hash[static_cast<std::size_t>(i)];
        for (int v = 0; v < vocab_; ++v) *out++ = hash_model::logit(hash[static_cast<std::size_t>(i)], v, sharpness);
      }
      previous_tree_last = hash.back();
      last_[static_cast<std::size_t>(batch.slots[b])] = hash.back();
    }
    return {logits_.data(), vocab_};
  }

 private:
  std::uint64_t* row(int slot, int position) {
    return cache_.data() + static_cast<std::size_t>(slot) * static_cast<std::size_t>(layout_.max_positions) + position;
  }

  Bug bug_;
  int vocab_, slots_;
  core::KvCacheLayout layout_;
  std::vector<std::uint64_t> cache_;
  std::vector<std::uint64_t> last_;  // per slot, for keeps_own_state
  std::vector<float> logits_;
};
static_assert(BackendBatchTarget<BuggyHashBatchTarget>);

/// The same model as a BackendTarget: slot 0 of a one-slot batch target.
class BuggyHashTarget {
 public:
  using backend_type = backend::host;

  BuggyHashTarget(Bug bug, int vocab, int max_positions) : batch_(bug, vocab, max_positions, 1) {}
  backend::host backend() const { return {}; }
  int vocab_size() const { return batch_.vocab_size(); }
  core::KvCacheView kv_cache() { return batch_.kv_cache(); }
  void prefill(std::span<const token_t> tokens) { batch_.prefill(0, tokens); }
  LogitsRows forward(const TreeView& tree) {
    const int slot = 0;
    return batch_.forward(TreeBatchView{std::span<const int>(&slot, 1), std::span<const TreeView>(&tree, 1)});
  }

 private:
  BuggyHashBatchTarget batch_;
};
static_assert(BackendTarget<BuggyHashTarget>);

constexpr int vocab = 50, max_positions = 128, slots = 5;

}  // namespace

TEST_CASE("backend conformance kit: BackendHashTarget passes", "[testing][conformance][backend]") {
  for (int v : {2, 64, 1000}) {
    BackendHashTarget<> target(v, max_positions, /*seed=*/3);
    const testing::ConformanceReport report = testing::check_backend_target(target);
    INFO("vocab " << v << ": " << report.str());
    CHECK(report.ok());
    CHECK(report.nodes_checked > 200);  // the large tree alone fills the free positions
  }
}

TEST_CASE("backend conformance kit: BackendHashBatchTarget passes", "[testing][conformance][backend]") {
  for (int v : {2, 64, 1000}) {
    BackendHashBatchTarget<> target(v, max_positions, slots, /*seed=*/3);
    const testing::ConformanceReport report = testing::check_backend_batch_target(target);
    INFO("vocab " << v << ": " << report.str());
    CHECK(report.ok());
    CHECK(report.nodes_checked > 800);
  }
}

TEST_CASE("backend conformance kit: the buggy targets' model without a bug passes", "[testing][conformance][backend]") {
  BuggyHashTarget single(Bug::none, vocab, max_positions);
  const testing::ConformanceReport one = testing::check_backend_target(single);
  INFO(one.str());
  CHECK(one.ok());
  BuggyHashBatchTarget batch(Bug::none, vocab, max_positions, slots);
  const testing::ConformanceReport many = testing::check_backend_batch_target(batch);
  INFO(many.str());
  CHECK(many.ok());
}

TEST_CASE("backend conformance kit: a target that ignores the ancestor mask fails", "[testing][conformance][backend]") {
  BuggyHashTarget single(Bug::ignores_mask, vocab, max_positions);
  const testing::ConformanceReport one = testing::check_backend_target(single);
  REQUIRE_FALSE(one.ok());
  // The root alone and the chain agree: the star is the first tree where the mask matters.
  CHECK_THAT(one.str(), Contains("prompt 0, tree 2 (a star of 9 nodes): 7 of 9 nodes' logits differ bit for bit") &&
                            Contains("first: node 2, depth 1") && Contains("tree.attends(node, j)"));
  BuggyHashBatchTarget batch(Bug::ignores_mask, vocab, max_positions, slots);
  const testing::ConformanceReport many = testing::check_backend_batch_target(batch);
  REQUIRE_FALSE(many.ok());
  CHECK_THAT(many.str(), Contains("tree 2 (a star of 9 nodes)") && Contains("tree.attends(node, j)"));
}

TEST_CASE("backend conformance kit: a target that places node i at position base_position + i fails",
          "[testing][conformance][backend]") {
  BuggyHashTarget single(Bug::index_positions, vocab, max_positions);
  const testing::ConformanceReport report = testing::check_backend_target(single);
  REQUIRE_FALSE(report.ok());
  CHECK_THAT(report.str(), Contains("prompt 0, tree 2 (a star of 9 nodes): 7 of 9 nodes' logits differ bit for bit") &&
                               Contains("at position tree.position(node) = base_position + depth"));
}

TEST_CASE("backend conformance kit: a target that writes K/V at the nodes' positions fails",
          "[testing][conformance][backend]") {
  BuggyHashTarget single(Bug::kv_at_positions, vocab, max_positions);
  const testing::ConformanceReport one = testing::check_backend_target(single);
  REQUIRE_FALSE(one.ok());
  CHECK_THAT(one.str(), Contains("prompt 0, tree 2 (a star of 9 nodes): 8 of 9 nodes' K/V differ bit for bit") &&
                            Contains("layer 0, kv_head 0, K") && Contains("at cache row base_position + i"));
  BuggyHashBatchTarget batch(Bug::kv_at_positions, vocab, max_positions, slots);
  const testing::ConformanceReport many = testing::check_backend_batch_target(batch);
  REQUIRE_FALSE(many.ok());
  CHECK_THAT(many.str(), Contains("nodes' K/V differ") && Contains("at cache row base_position + i of its slot"));
}

TEST_CASE("backend conformance kit: a target that ignores the compacted cache fails",
          "[testing][conformance][backend]") {
  BuggyHashTarget single(Bug::keeps_own_state, vocab, max_positions);
  const testing::ConformanceReport report = testing::check_backend_target(single);
  REQUIRE_FALSE(report.ok());
  CHECK_THAT(report.str(), Contains("the same tree forwarded right after a prefill of the same tokens agrees") &&
                               Contains("from the rows kv_cache() describes, not from state of its own"));
}

TEST_CASE("backend conformance kit: a batch target whose slots leak into each other fails",
          "[testing][conformance][backend]") {
  BuggyHashBatchTarget batch(Bug::leaks_between_slots, vocab, max_positions, slots);
  const testing::ConformanceReport report = testing::check_backend_batch_target(batch);
  REQUIRE_FALSE(report.ok());
  CHECK_THAT(report.str(), Contains("in one call:") &&
                               Contains("differ bit for bit from the same tree forwarded alone") &&
                               Contains("must not depend on the other trees of the call"));
  // One slot at a time, nothing leaks: the bug needs several trees per call.
  const testing::ConformanceReport alone = testing::check_backend_batch_target(batch, {.slots = 1});
  INFO(alone.str());
  CHECK(alone.ok());
}

TEST_CASE("backend conformance kit: a batch target that writes into another slot's cache fails",
          "[testing][conformance][backend]") {
  BuggyHashBatchTarget batch(Bug::writes_next_slot, vocab, max_positions, slots);
  const testing::ConformanceReport report = testing::check_backend_batch_target(batch);
  REQUIRE_FALSE(report.ok());
  CHECK_THAT(report.str(), Contains("the committed K/V at position") &&
                               Contains("changed during the forward of slots") &&
                               Contains("must not write another slot's rows"));
}

TEST_CASE("regression: a backend target ignoring the mask decodes exactly greedy with chain drafts, not the kit",
          "[testing][conformance][backend][regression]") {
  // Issue 47: a newcomer's backend target that ignored the ancestor mask matched greedy decoding
  // on every request, because the drafts had (nearly) no branches.
  BuggyHashTarget buggy(Bug::ignores_mask, vocab, max_positions);
  const std::vector<token_t> prompt{7, 3, 9};
  const std::vector<token_t> plain = HashTarget(vocab, BuggyHashBatchTarget::seed).generate(prompt, 60);
  std::vector<token_t> truth = prompt;
  truth.insert(truth.end(), plain.begin(), plain.end());
  SpeculativeDecoder<BuggyHashTarget, OracleDrafter, ExactVerifier> decoder(
      buggy, DecoderOptions{.budget = 8}, OracleDrafter(truth, /*depth=*/6, /*error_rate=*/0.2), ExactVerifier{});
  decoder.prefill(prompt);
  CHECK(decoder.generate(60) == plain);
  CHECK_FALSE(testing::check_backend_target(buggy).ok());
}

TEST_CASE("backend conformance kit: options it cannot run with are one sentence, not a crash",
          "[testing][conformance][backend]") {
  BackendHashTarget<> target(vocab, max_positions);
  const testing::ConformanceReport report = testing::check_backend_target(target, {.prompt_length = 0});
  REQUIRE_FALSE(report.ok());
  CHECK_THAT(report.str(), Contains("prompt_length, tree_nodes, max_children, large_tree_nodes and slots must be"));
}
