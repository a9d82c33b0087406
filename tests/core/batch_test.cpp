#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <specdec/core/batch.hpp>
#include <specdec/tree_merger.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/testing/hash_target.hpp>

#include "kernels/random_batches.hpp"

using namespace specdec;

TEST_CASE("build_tree_in_batch lays out each tree as the core does, and flags bad ones", "[core][batch]") {
  std::mt19937_64 rng(31);
  testing::TreeBatchData d = testing::random_tree_batch(rng, 200, 70, 64, 2, 100, true);
  d.base_position.resize(d.size());
  for (int t = 0; t < d.size(); ++t) d.base_position[t] = 1000 * t;
  const core::TreeBatch b = d.batch();
  int bad = 0;
  for (int t = 0; t < b.batch; ++t) {
    const int begin = d.offsets[t], n = d.offsets[t + 1] - begin;
    const auto expected = core::validate_tree(d.parent.data() + begin, d.token.data() + begin, n, 100, 64, nullptr);
    REQUIRE(core::build_tree_in_batch(b, t) == expected);
    CHECK(d.status[t] == expected);
    if (expected != core::tree_status::ok) {
      ++bad;
      CHECK(d.max_depth[t] == -7);  // untouched
      continue;
    }
    std::vector<int> depth(n);
    std::vector<std::uint32_t> mask(static_cast<std::size_t>(n) * 2);
    std::vector<node_t> fc(n), ns(n);
    CHECK(d.max_depth[t] == core::build_tree_layout(d.parent.data() + begin, n, 2, depth.data(), mask.data(), fc.data(), ns.data()));
    CHECK(std::equal(depth.begin(), depth.end(), d.depth.begin() + begin));
    CHECK(std::equal(mask.begin(), mask.end(), d.mask.begin() + 2L * begin));
    if (!d.base_position.empty()) {
      for (int i = 0; i < n; ++i) {
        CHECK(d.position[begin + i] == d.base_position[t] + depth[i]);
        CHECK(d.sequence[begin + i] == t);
      }
    }
  }
  CHECK(bad > 20);
}

TEST_CASE("a tree wider than its mask rows is over capacity", "[core][batch]") {
  testing::TreeBatchData d;
  d.words = 1;
  d.max_nodes = 100;
  d.vocab = 10;
  std::mt19937_64 rng(1);
  const auto t = testing::random_tree(rng, 33, 10);
  d.add(t.parent, t.token);
  const core::TreeBatch b = d.batch();
  CHECK(core::build_tree_in_batch(b, 0) == core::tree_status::over_capacity);
}

TEST_CASE("greedy_verify_in_batch agrees with the ExactVerifier on HashTarget logits", "[core][batch]") {
  std::mt19937_64 rng(32);
  HashTarget target(50, 7, 1.0f);
  std::vector<token_t> prompt{1, 2, 3, 4};
  target.prefill(std::span<const token_t>(prompt).first(3));
  for (int trial = 0; trial < 50; ++trial) {
    DraftTree tree;
    tree.reset(prompt.back());
    const int n = testing::uniform(rng, 1, 30);
    for (int i = 1; i < n; ++i) tree.add(static_cast<node_t>(rng() % i), static_cast<token_t>(rng() % 50), 1.0f);
    TreeMerger merger;
    const DraftTree* trees[] = {&tree};
    merger.merge(trees, 64, 64);
    TreeView view = merger.view();
    view.base_position = 3;
    const HashTarget::Output& out = target.forward(view);
    Verdict verdict;
    ExactVerifier{}.verify(view, out, verdict);

    testing::GreedyData d;
    d.max_nodes = 32;
    d.vocab = 50;
    d.row_stride = 50;
    d.offsets = {0, view.size};
    d.token.assign(view.token, view.token + view.size);
    d.first_child.assign(view.first_child, view.first_child + view.size);
    d.next_sibling.assign(view.next_sibling, view.next_sibling + view.size);
    d.build_status = {core::tree_status::ok};
    for (int i = 0; i < view.size; ++i) {
      const auto row = out.logits(i);
      d.logits.insert(d.logits.end(), row.begin(), row.end());
    }
    const core::GreedyVerifyBatch b = d.batch();
    REQUIRE(core::greedy_verify_in_batch(b, 0) == core::verify_status::ok);
    REQUIRE(d.length[0] == static_cast<int>(verdict.path.size()));
    CHECK(std::equal(verdict.path.begin(), verdict.path.end(), d.path.begin()));
    CHECK(d.next_token[0] == verdict.next_token);
  }
}

TEST_CASE("greedy_verify_in_batch stops at a NaN row on the path and skips invalid trees", "[core][batch]") {
  // Chain root -> 1 -> 2 with tokens 0, 1, 2; vocab 3; argmaxes: root 1, node 1 NaN.
  testing::GreedyData d;
  d.max_nodes = 4;
  d.vocab = 3;
  d.row_stride = 3;
  d.offsets = {0, 3, 6};
  d.token = {0, 1, 2, 0, 1, 2};
  d.first_child = {1, 2, -1, 1, 2, -1};
  d.next_sibling = {-1, -1, -1, -1, -1, -1};
  d.build_status = {core::tree_status::ok, core::tree_status::parent_not_before_child};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  d.logits = {0, 9, 0, 1, nan, 0, 0, 0, 9, 0, 9, 0, 0, 0, 9, 0, 0, 9};
  const core::GreedyVerifyBatch b = d.batch();
  CHECK(core::greedy_verify_in_batch(b, 0) == core::verify_status::nan_logits);
  CHECK(d.length[0] == 2);
  CHECK(d.path[0] == 0);
  CHECK(d.path[1] == 1);
  CHECK(d.next_token[0] == -1);
  CHECK(d.argmax[1] == -1);
  CHECK(core::greedy_verify_in_batch(b, 1) == core::verify_status::invalid_tree);
  CHECK(d.length[1] == 0);
}

TEST_CASE("suffix_match_in_batch is find_suffix_matches plus the continuations", "[core][batch]") {
  std::mt19937_64 rng(33);
  testing::SuffixData d;
  d.max_context = 300;
  d.k = 3;
  d.depth = 5;
  for (int s = 0; s < 30; ++s) d.add(testing::repetitive_context(rng, testing::uniform(rng, 0, 300), 4));
  d.add(std::vector<token_t>(301, 1));  // longer than max_context: flagged
  for (int s = 0; s < d.size(); ++s) d.search_limit.push_back(testing::uniform(rng, 0, 320));
  const core::SuffixMatchBatch b = d.batch();
  for (int s = 0; s < b.batch; ++s) {
    const int begin = d.offsets[s], n = d.offsets[s + 1] - begin;
    const int got = core::suffix_match_in_batch(b, s);
    if (n > d.max_context) {
      CHECK(got == -1);
      CHECK(d.match_count[s] == -1);
      for (int j = 0; j < d.k; ++j) CHECK(d.draft_length[s * d.k + j] == 0);
      continue;
    }
    core::SuffixMatch expected[3];
    const int found = core::find_suffix_matches(d.context.data() + begin, n, d.search_limit[s], 10, 1, 3, expected);
    REQUIRE(got == found);
    for (int j = 0; j < 3; ++j) {
      const int len = d.draft_length[s * 3 + j];
      if (j >= found) {
        CHECK(len == 0);
        continue;
      }
      CHECK(d.matches[s * 3 + j].position == expected[j].position);
      CHECK(d.matches[s * 3 + j].length == expected[j].length);
      const int p = expected[j].position;
      CHECK(len == core::continuation_end(p, 5, n, d.search_limit[s]) - (p + 1));
      for (int t = 0; t < len; ++t) CHECK(d.drafts[(s * 3 + j) * 5 + t] == d.context[begin + p + 1 + t]);
    }
  }
}

TEST_CASE("compact_kv_in_batch moves valid paths and leaves invalid ones alone", "[core][batch]") {
  std::mt19937_64 rng(34);
  testing::KvData d = testing::random_kv_batch(rng, 40, 2, 2, 4, 2, 20, true);
  const auto before = d.k_cache;
  const core::KvCompactionBatch b = d.batch();
  int invalid = 0, past_the_tree = 0;
  for (int s = 0; s < b.batch; ++s) {
    const auto expected = core::validate_compaction_path(d.path.data() + s * 20, d.length[s], 20, d.base[s], d.layout.max_positions);
    CHECK(core::compact_kv_in_batch(b, s) == expected);
    past_the_tree += expected == core::compaction_status::past_the_tree;
    if (expected != core::compaction_status::ok) {
      ++invalid;
      const long long lo = s * d.layout.sequence_stride, hi = lo + d.layout.sequence_stride;
      CHECK(std::equal(before.begin() + lo, before.begin() + hi, d.k_cache.begin() + lo));
    }
  }
  CHECK(invalid > 3);
  CHECK(past_the_tree > 0);
}
