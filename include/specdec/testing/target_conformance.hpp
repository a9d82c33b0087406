// The target conformance kit: checks that a user's Target keeps the contract the decoder relies
// on, with any test framework.
//
//   #include <specdec/testing/target_conformance.hpp>
//   MyModel model(...);
//   const specdec::testing::ConformanceReport report = specdec::testing::check_target(model);
//   REQUIRE(report.ok());           // Catch2; report.str() lists what failed, one sentence each
//
// Why a kit: "with the exact verifier the output must equal greedy" does not catch a target that
// ignores the tree's ancestor mask or its positions whenever the drafters happen to draft chains.
// The kit drives the target directly with random wide trees instead:
//  1. live: per prompt, prefill(prompt minus its last token), then steps of forward(random tree),
//     a random partial acceptance and commit(path), as the decoder would (the next root is the
//     accepted node's argmax);
//  2. afterwards, each node of every tree is compared with its path run alone as a chain on a
//     freshly prefilled cache: argmax, logits and (for a FeatureTarget) features must be equal
//     (bit for bit unless options.tolerance says otherwise). A difference right after prefill
//     points to tree attention (mask, positions); one that starts after a commit points to commit;
//  3. prefill(tokens) must leave the cache that committing the tokens one by one leaves, and a
//     FeatureTarget's prefill_features() must be their per-token features;
//  4. the spans an output returns must stay valid and unchanged while it lives (until the next
//     forward, commit or prefill), logits rows must have vocab_size() floats, features
//     feature_dim(), and argmax(node), when the output also has logits, must be the row's argmax
//     with ties to the lowest id (what ExactVerifier and plain greedy decoding use).
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <specdec/concepts.hpp>
#include <specdec/core/tree.hpp>
#include <specdec/testing/laid_out_tree.hpp>

namespace specdec::testing {

struct ConformanceOptions {
  int prompts = 3;        ///< random prompts (tokens uniform in the vocabulary)
  int prompt_length = 6;  ///< tokens per prompt; the last one is the first root
  int steps = 4;          ///< forward + commit steps per prompt
  int tree_nodes = 16;    ///< nodes per random tree, root included
  int max_children = 4;   ///< widest branching of a node
  /// Largest |difference| allowed between a node's logits or features and its path run alone
  /// (0: bit for bit). Argmaxes must always be equal.
  float tolerance = 0.0f;
  std::uint64_t seed = 1;
  std::size_t max_failures = 8;  ///< stop listing after this many
};

struct ConformanceReport {
  std::vector<std::string> failures;  ///< one sentence each
  int nodes_checked = 0;

  bool ok() const { return failures.empty(); }
  /// The failures, one per line ("conforms" when none).
  std::string str() const {
    if (failures.empty()) return "conforms (" + std::to_string(nodes_checked) + " tree nodes checked)";
    std::string s;
    for (const std::string& f : failures) s += f + "\n";
    return s;
  }
};

namespace conformance_detail {

/// What one node of a forward() output said, copied.
struct NodeOutput {
  token_t argmax = -1;
  std::vector<float> logits, features;
};

/// A random tree below `root`: each node's parent has fewer than max_children children, siblings
/// have distinct tokens (as after the decoder's merge), depth at most max_depth.
inline LaidOutTree random_wide_tree(std::mt19937_64& rng, token_t root, int nodes, int max_children, int max_depth,
                                    int vocab) {
  std::vector<node_t> parent{-1};
  std::vector<token_t> token{root};
  std::vector<int> children{0}, depth{0};
  for (int attempt = 0; static_cast<int>(parent.size()) < nodes && attempt < 16 * nodes; ++attempt) {
    const node_t p = static_cast<node_t>(rng() % parent.size());
    if (children[p] >= max_children || depth[p] >= max_depth) continue;
    const token_t t = static_cast<token_t>(rng() % static_cast<std::uint64_t>(vocab));
    bool duplicate = false;
    for (std::size_t i = 1; i < parent.size(); ++i) duplicate |= parent[i] == p && token[i] == t;
    if (duplicate) continue;
    parent.push_back(p);
    token.push_back(t);
    children.push_back(0);
    depth.push_back(depth[p] + 1);
    ++children[p];
  }
  return LaidOutTree(std::move(parent), std::move(token));
}

/// The node ids from the root down to `node`.
inline std::vector<node_t> path_to(const LaidOutTree& tree, node_t node) {
  std::vector<node_t> path;
  for (node_t k = node; k >= 0; k = tree.parent[k]) path.insert(path.begin(), k);
  return path;
}

/// A chain tree of `tokens` (tokens[0] is the root).
inline LaidOutTree chain(const std::vector<token_t>& tokens) {
  std::vector<node_t> parent(tokens.size());
  for (std::size_t i = 0; i < tokens.size(); ++i) parent[i] = static_cast<node_t>(i) - 1;
  return LaidOutTree(std::move(parent), tokens);
}

inline float max_difference(std::span<const float> a, std::span<const float> b) {
  float worst = 0.0f;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const float d = a[i] == b[i] ? 0.0f : a[i] > b[i] ? a[i] - b[i] : b[i] - a[i];
    worst = d == d ? std::max(worst, d) : 1e30f;  // NaN on one side only: as different as it gets
  }
  return worst;
}

class Checker {
 public:
  explicit Checker(const ConformanceOptions& options) : options_(options) {}

  void fail(const std::string& sentence) {
    if (report_.failures.size() < options_.max_failures) report_.failures.push_back(sentence);
  }
  ConformanceReport& report() { return report_; }
  const ConformanceOptions& options() const { return options_; }

  /// Copies node `node` of `out`, checking sizes and the argmax rule.
  template <class T, class Out>
  NodeOutput capture(const T& target, const Out& out, node_t node, const std::string& where) {
    NodeOutput o;
    const int vocab = static_cast<int>(target.vocab_size());
    if constexpr (LogitsOutput<Out>) {
      const std::span<const float> row = out.logits(node);
      o.logits.assign(row.begin(), row.end());
      if (static_cast<int>(row.size()) != vocab)
        fail(where + ": logits(node) has " + std::to_string(row.size()) + " floats, but vocab_size() is " +
             std::to_string(vocab) + ".");
    }
    if constexpr (ArgmaxOutput<Out>) {
      o.argmax = static_cast<token_t>(out.argmax(node));
      if constexpr (LogitsOutput<Out>) {
        const int best = core::argmax_row(o.logits.data(), static_cast<int>(o.logits.size()));
        if (best != o.argmax)
          fail(where + ": argmax(node) is " + std::to_string(o.argmax) + " but its logits row's argmax (ties to the "
               "lowest id) is " + std::to_string(best) + "; both must follow the tie rule of your greedy decoding.");
      }
    } else {
      o.argmax = core::argmax_row(o.logits.data(), static_cast<int>(o.logits.size()));
    }
    if (o.argmax < 0 || o.argmax >= vocab)
      fail(where + ": the argmax " + std::to_string(o.argmax) + " is outside the vocabulary [0, " +
           std::to_string(vocab) + ") (NaN logits?).");
    if constexpr (FeatureTarget<T>) {
      const std::span<const float> row = out.features(node);
      o.features.assign(row.begin(), row.end());
      if (static_cast<int>(row.size()) != static_cast<int>(target.feature_dim()))
        fail(where + ": features(node) has " + std::to_string(row.size()) + " floats, but feature_dim() is " +
             std::to_string(target.feature_dim()) + ".");
    }
    return o;
  }

  /// Copies every node of a forward's output, checking that the spans of node 0 stay unchanged
  /// while the others are read (an output that reuses one scratch row breaks verifiers that hold
  /// several rows).
  template <class T, class Out>
  std::vector<NodeOutput> capture_all(const T& target, const Out& out, int nodes, const std::string& where) {
    std::vector<float> logits0, features0;
    std::span<const float> logits_span, features_span;
    if constexpr (LogitsOutput<Out>) {
      logits_span = out.logits(0);
      logits0.assign(logits_span.begin(), logits_span.end());
    }
    if constexpr (FeatureTarget<T>) {
      features_span = out.features(0);
      features0.assign(features_span.begin(), features_span.end());
    }
    std::vector<NodeOutput> all;
    for (int i = 0; i < nodes; ++i) all.push_back(capture(target, out, i, where + ", node " + std::to_string(i)));
    if (!std::equal(logits_span.begin(), logits_span.end(), logits0.begin(), logits0.end()) ||
        !std::equal(features_span.begin(), features_span.end(), features0.begin(), features0.end()))
      fail(where + ": the span logits(0) or features(0) returned changed while other nodes were read; an output's "
           "spans must stay valid and unchanged until the next forward, commit or prefill.");
    return all;
  }

  /// Compares a node's output with the reference; returns whether they agree.
  bool agree(const NodeOutput& got, const NodeOutput& want) const {
    return got.argmax == want.argmax && got.logits.size() == want.logits.size() &&
           got.features.size() == want.features.size() &&
           max_difference(got.logits, want.logits) <= options_.tolerance &&
           max_difference(got.features, want.features) <= options_.tolerance;
  }

 private:
  ConformanceOptions options_;
  ConformanceReport report_;
};

/// The target's output after `tokens` were committed, for the last token of `chain_tokens` run
/// as a chain on top: prefill(committed), forward(chain), every chain node.
template <class T>
std::vector<NodeOutput> run_chain(T& target, Checker& checker, const std::vector<token_t>& committed,
                                  const std::vector<token_t>& chain_tokens, const std::string& where) {
  target.prefill(std::span<const token_t>(committed));
  const LaidOutTree c = chain(chain_tokens);
  decltype(auto) out = target.forward(c.view(static_cast<int>(committed.size())));
  return checker.capture_all(target, out, static_cast<int>(chain_tokens.size()), where);
}

/// One live step, kept for the comparison with the references afterwards.
struct Step {
  std::vector<token_t> committed;  // the cache's tokens when the tree ran
  LaidOutTree tree;
  std::vector<NodeOutput> outputs;
  int index = 0;  // step of its prompt (0: right after prefill)
};

}  // namespace conformance_detail

/// Checks `target` against the Target contract (see the header's comment); the target is left
/// in an unspecified sequence (prefill before decoding with it).
template <Target T>
ConformanceReport check_target(T& target, const ConformanceOptions& options = {}) {
  using namespace conformance_detail;
  Checker checker(options);
  std::mt19937_64 rng(options.seed);
  const int vocab = static_cast<int>(target.vocab_size());
  int max_positions = 1 << 30;
  if constexpr (BoundedTarget<T>) max_positions = static_cast<int>(target.max_positions());
  if (vocab < 1) {
    checker.fail("vocab_size() is " + std::to_string(vocab) + "; a target needs at least one token.");
    return checker.report();
  }
  const int length = std::max(1, std::min(options.prompt_length, max_positions / 2));

  for (int p = 0; p < options.prompts; ++p) {
    std::vector<token_t> prompt(static_cast<std::size_t>(length));
    for (token_t& t : prompt) t = static_cast<token_t>(rng() % static_cast<std::uint64_t>(vocab));
    const std::string in_prompt = "prompt " + std::to_string(p);

    // 1. Live: prefill, then forward / accept / commit, as the decoder does.
    std::vector<token_t> committed(prompt.begin(), prompt.end() - 1);
    token_t root = prompt.back();
    target.prefill(std::span<const token_t>(committed));
    std::vector<Step> steps;
    for (int s = 0; s <= options.steps; ++s) {  // the last tree only checks the last commit
      const int room = max_positions - static_cast<int>(committed.size()) - 1;  // deepest depth that fits
      if (room < 0) break;
      LaidOutTree tree = random_wide_tree(rng, root, options.tree_nodes, options.max_children, room, vocab);
      const std::string where = in_prompt + ", step " + std::to_string(s);
      std::vector<NodeOutput> outputs;
      {
        decltype(auto) out = target.forward(tree.view(static_cast<int>(committed.size())));
        outputs = checker.capture_all(target, out, static_cast<int>(tree.parent.size()), where);
      }
      steps.push_back(Step{committed, tree, outputs, s});
      if (s == options.steps) break;
      const node_t accepted = static_cast<node_t>(rng() % tree.parent.size());
      const std::vector<node_t> path = path_to(tree, accepted);
      target.commit(std::span<const node_t>(path));
      for (node_t k : path) committed.push_back(tree.token[k]);
      root = outputs[accepted].argmax;
      if (root < 0 || root >= vocab) break;  // reported by capture
    }

    // 2. Each node against its path run alone as a chain on a fresh prefill.
    bool earlier_step_agreed = false;
    for (const Step& step : steps) {
      const std::string where = in_prompt + ", step " + std::to_string(step.index);
      int differing = 0, first = -1;
      for (std::size_t i = 0; i < step.tree.parent.size(); ++i) {
        const std::vector<token_t> path = step.tree.path_tokens(static_cast<int>(i));
        const NodeOutput want = run_chain(target, checker, step.committed, path, where + ", chain").back();
        ++checker.report().nodes_checked;
        if (!checker.agree(step.outputs[i], want)) {
          ++differing;
          if (first < 0) first = static_cast<int>(i);
        }
      }
      if (differing > 0) {
        const bool after_commit = step.index > 0 && earlier_step_agreed;
        checker.fail(where + ": " + std::to_string(differing) + " of " + std::to_string(step.tree.parent.size()) +
                     " tree nodes (first: node " + std::to_string(first) + ", depth " +
                     std::to_string(step.tree.depth[static_cast<std::size_t>(first)]) +
                     ") differ from their path run alone as a chain; " +
                     (after_commit ? "the earlier steps agreed, so the last commit(path) probably kept other K/V "
                                     "rows than the path's (root first), or not exactly the committed tokens."
                                   : "a node must attend to the KV cache and to its tree ancestors only "
                                     "(tree.attends(node, j)), at position tree.position(node) = base_position + "
                                     "depth, not base_position + node."));
        break;  // later steps inherit the difference
      }
      earlier_step_agreed = true;
    }

    // 3. prefill(tokens) leaves the cache that committing them one by one leaves.
    if (length >= 2 && length < max_positions) {
      std::vector<NodeOutput> one_by_one;
      forward_one_by_one(target, prompt, [&](int position, const auto& out) {
        one_by_one.push_back(checker.capture(target, out, 0, in_prompt + ", one-by-one position " + std::to_string(position)));
      });
      const std::vector<token_t> before(prompt.begin(), prompt.end() - 1);
      const NodeOutput after_prefill = run_chain(target, checker, before, {prompt.back()}, in_prompt + ", after prefill").back();
      if (!checker.agree(after_prefill, one_by_one.back()))
        checker.fail(in_prompt + ": forward after prefill(tokens) differs from committing the same tokens one by one; "
                     "prefill must start a new sequence whose KV cache holds exactly `tokens` at positions 0, 1, ...");
      if constexpr (FeatureTarget<T>) {
        target.prefill(std::span<const token_t>(before));
        const std::span<const float> rows = target.prefill_features();
        const std::size_t dim = static_cast<std::size_t>(target.feature_dim());
        if (rows.size() != before.size() * dim) {
          checker.fail(in_prompt + ": prefill_features() has " + std::to_string(rows.size()) + " floats, expected " +
                       std::to_string(before.size()) + " tokens x " + std::to_string(dim) + ".");
        } else {
          for (std::size_t i = 0; i < before.size(); ++i) {
            if (max_difference(rows.subspan(i * dim, dim), one_by_one[i].features) > options.tolerance) {
              checker.fail(in_prompt + ": prefill_features() row " + std::to_string(i) +
                           " differs from the features of token " + std::to_string(i) +
                           " run one by one; row i must be the feature at position i.");
              break;
            }
          }
        }
      }
    }
  }
  return checker.report();
}

}  // namespace specdec::testing
