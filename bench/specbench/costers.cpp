#include "costers.hpp"

#include <algorithm>
#include <utility>

#include "clock.hpp"

namespace specbench {

using detail::Clock;
using detail::seconds_since;

void TableCoster::prefill(std::span<const token_t>) {
  seconds_ = 0;
  first_context_ = -1;
}

void TableCoster::forward(const specdec::TreeView& tree) {
  if (first_context_ < 0) first_context_ = tree.base_position;
  seconds_ += table_.forward_seconds(tree.size, tree.base_position);
}

std::pair<double, double> TableCoster::turn_seconds(std::int64_t tokens) {
  double plain = 0;
  for (std::int64_t i = 0; i < tokens; ++i) plain += table_.plain_seconds(first_context_ + static_cast<int>(i));
  return {seconds_, plain};
}

ReplayRun PredictingCoster::predicted(ReplayRun run) const {
  const std::size_t turns = run.turns.size();
  if (turns == 0) return run;
  const std::size_t rounds = predicted_.size() / turns;
  for (std::size_t t = 0; t < turns; ++t) {
    double steps = 0, plain = 0;
    for (std::size_t r = 0; r < rounds; ++r) {
      steps += predicted_[r * turns + t].first;
      plain += predicted_[r * turns + t].second;
    }
    run.turns[t].cost_seconds = rounds > 0 ? steps / static_cast<double>(rounds) : 0.0;
    run.turns[t].plain_cost_seconds = rounds > 0 ? plain / static_cast<double>(rounds) : 0.0;
  }
  return run;
}

ModelCoster::ModelCoster(specdec::Llama2cTarget target) : target_(std::move(target)) {}

void ModelCoster::prefill(std::span<const token_t> tokens) {
  target_.prefill(tokens);
  sequence_.assign(tokens.begin(), tokens.end());
  seconds_ = 0;
  first_context_ = -1;
}

void ModelCoster::forward(const specdec::TreeView& tree) {
  if (first_context_ < 0) first_context_ = tree.base_position;
  tree_tokens_.assign(tree.token, tree.token + tree.size);
  const auto t0 = Clock::now();
  target_.forward(tree);
  seconds_ += seconds_since(t0);
}

void ModelCoster::commit(std::span<const specdec::node_t> path) {
  const auto t0 = Clock::now();
  target_.commit(path);
  seconds_ += seconds_since(t0);
  for (const specdec::node_t node : path) sequence_.push_back(tree_tokens_[static_cast<std::size_t>(node)]);
}

std::pair<double, double> ModelCoster::turn_seconds(std::int64_t tokens) {
  if (first_context_ < 0) return {0.0, 0.0};  // no step since the prefill
  // The steps committed every root they ran, so the sequence holds the tokens plain decoding
  // runs: the first step's root and each token produced after it.
  const auto first = static_cast<std::size_t>(first_context_);
  const std::size_t count = std::min(static_cast<std::size_t>(tokens), sequence_.size() - first);
  target_.prefill(std::span(sequence_).first(first));
  double plain = 0;
  for (std::size_t i = 0; i < count; ++i) {
    root_.token[0] = sequence_[first + i];
    const specdec::TreeView view = root_.view(static_cast<int>(first + i));
    const auto t0 = Clock::now();
    target_.forward(view);
    target_.commit(kRootPath);
    plain += seconds_since(t0);
  }
  return {seconds_, plain};
}

specdec::Llama2cTarget make_llama_target(std::shared_ptr<const specdec::Llama2cModel> model, int threads) {
  return specdec::Llama2cTarget(std::move(model), specdec::Llama2cTarget::Options{threads});
}

}  // namespace specbench
