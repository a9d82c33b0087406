// The two StepCosters of the replay (replay.hpp): one models each step's time from a cost table
// (`replay --cost`), one runs each step through a real model's forward and times it (`replay
// --timed-model`).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include <specdec/models/llama2c_model.hpp>
#include <specdec/targets/llama2c.hpp>
#include <specdec/testing/laid_out_tree.hpp>

#include "cost_table.hpp"
#include "replay.hpp"

namespace specbench {

/// A one-node tree's accepted path: the commit of a plain decoding step.
inline constexpr std::array<specdec::node_t, 1> kRootPath{0};

/// `replay --cost`: each step costs the table's forward time for its node count and context;
/// plain decoding costs the table's plain step per token.
class TableCoster final : public StepCoster {
 public:
  explicit TableCoster(const CostTable& table) : table_(table) {}
  void prefill(std::span<const token_t>) override;
  void forward(const specdec::TreeView& tree) override;
  void commit(std::span<const specdec::node_t>) override {}
  std::pair<double, double> turn_seconds(std::int64_t tokens) override;

 private:
  const CostTable& table_;
  double seconds_ = 0;
  int first_context_ = -1;
};

/// `replay --timed-model`: each step's tree also runs through the model's real forward (its own
/// KV cache commits the same accepted path) and is timed; at the end of a turn the same tokens
/// are decoded plainly on the model, one forward and commit per token, and timed. Prefills are
/// not timed.
class ModelCoster final : public StepCoster {
 public:
  explicit ModelCoster(specdec::Llama2cTarget target);
  void prefill(std::span<const token_t> tokens) override;
  void forward(const specdec::TreeView& tree) override;
  void commit(std::span<const specdec::node_t> path) override;
  std::pair<double, double> turn_seconds(std::int64_t tokens) override;
  const specdec::Llama2cTarget& target() const { return target_; }

 private:
  specdec::Llama2cTarget target_;
  std::vector<token_t> sequence_;     // prefilled and committed tokens
  std::vector<token_t> tree_tokens_;  // of the last forward
  double seconds_ = 0;
  int first_context_ = -1;
  specdec::testing::LaidOutTree root_{{-1}, {0}};
};

/// A measured coster (`--timed-model`) that also lets a cost table model every step it measures:
/// the table's prediction of the same steps, to hold against the measurement (issue 46: "the cost
/// table's prediction within 5 % of each measured speedup"). turn_seconds() is the measured one's.
class PredictingCoster final : public StepCoster {
 public:
  PredictingCoster(StepCoster& measured, const CostTable& table) : measured_(measured), table_(table) {}
  void prefill(std::span<const token_t> tokens) override {
    measured_.prefill(tokens);
    table_.prefill(tokens);
  }
  void forward(const specdec::TreeView& tree) override {
    measured_.forward(tree);
    table_.forward(tree);
  }
  void commit(std::span<const specdec::node_t> path) override {
    measured_.commit(path);
    table_.commit(path);
  }
  std::pair<double, double> turn_seconds(std::int64_t tokens) override {
    predicted_.push_back(table_.turn_seconds(tokens));
    return measured_.turn_seconds(tokens);
  }
  /// `run` (turns in corpus order, as replay_in_rounds leaves them: the rounds' means) with each
  /// turn's steps and plain decoding timed by the table instead, the mean over the rounds that
  /// ran; the drafting stays the measured.
  ReplayRun predicted(ReplayRun run) const;

 private:
  StepCoster& measured_;
  TableCoster table_;
  std::vector<std::pair<double, double>> predicted_;  // per turn, round after round
};

/// The Llama2cTarget of every specbench command (`calibrate`, `replay --timed-model`, `model`,
/// `corpus`): `threads` forward threads (Llama2cTarget::Options).
specdec::Llama2cTarget make_llama_target(std::shared_ptr<const specdec::Llama2cModel> model, int threads);

}  // namespace specbench
