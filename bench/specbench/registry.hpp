// The drafter combinations this binary is compiled with (the list is in combinations.hpp).
#pragma once

#include <array>
#include <span>
#include <string>
#include <vector>

#include "batch.hpp"
#include "model.hpp"
#include "replay.hpp"

namespace specbench {

using ModelRunner = ModelRun (*)(const ModelBench&, const ModelOptions&);
/// decode_model<Verifier, Drafters...> for each VerifierKind, in its order.
using ModelRunners = std::array<ModelRunner, 3>;

/// The model runners of every registered combination, in list order (registry_model.cpp).
const std::vector<ModelRunners>& model_runners();

/// decode_model_batch and replay_batch of a combination (exact verifier); null when a drafter reads
/// the target's features, which SpeculativeBatch does not pass yet.
struct BatchRunners {
  BatchRun (*model)(const ModelBench&, const BatchOptions&);
  /// Null when a drafter reads the target's features (the replay target has none).
  BatchRun (*replay)(const Corpus&, const BatchOptions&);
};
/// The batch runners of every registered combination, in list order (registry_batch.cpp).
const std::vector<BatchRunners>& batch_runners();

struct Combination {
  std::vector<std::string> drafters;  ///< the drafters' names, in template order
  /// Null when a drafter reads the target's features (the replay target has none).
  ReplayRun (*replay)(const Corpus&, const ReplayOptions&);
  ModelRunners model;
  BatchRunners batch;
  /// "pld,casd": the drafters' names joined by commas.
  std::string name() const;
};

/// Every compiled combination, in registry order.
const std::vector<Combination>& combinations();
/// Every drafter name that appears in a combination, in registry order.
std::vector<std::string> drafter_names();
/// The combination made of exactly these drafters, in any order. `names` may hold comma-separated
/// lists ("pld, casd": specdec::tools::list_items); a name matches regardless of case. Throws
/// input_error naming an unknown drafter or combination and listing the valid ones.
const Combination& find_combination(std::span<const std::string> names);

}  // namespace specbench
