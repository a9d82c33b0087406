// The drafter combinations specbench is compiled with: the one list to edit.
//
// A combination is a set of drafters (each with a static `name`) merged into one decoder. Each
// drafter is default-constructible or constructible from `(const DrafterResources&, const
// TargetInfo&)` (replay.hpp). Every combination is compiled, with each verifier, for `model`
// (registry_model.cpp) and, unless a drafter reads the target's features, for `replay`
// (registry.cpp). To add one: include its drafters' headers and add a line to the list.
// See docs/specbench.md.
#pragma once

#include <vector>

#include <specdec/policies/drafters/casd.hpp>
#include <specdec/policies/drafters/context_tree.hpp>
#include <specdec/policies/drafters/dresd.hpp>
#include <specdec/policies/drafters/eagle.hpp>
#include <specdec/policies/drafters/empty.hpp>
#include <specdec/policies/drafters/fixed_tree.hpp>
#include <specdec/policies/drafters/ngram.hpp>
#include <specdec/policies/drafters/pld.hpp>
#include <specdec/policies/drafters/rest.hpp>
#include <specdec/policies/drafters/staged.hpp>
#include <specdec/targets/llama2c.hpp>
#include <specdec/type_list.hpp>

#include "input_error.hpp"
#include "replay.hpp"

namespace specbench {

/// A trivial baseline: the eight most frequent tokens of English text in the Llama vocabulary
/// (newline , . the and of to a) as children of the root, every step. With a smaller vocabulary
/// the ids outside it are left out (FixedTreeDrafter respects the vocabulary).
struct FrequentTokensDrafter : specdec::FixedTreeDrafter {
  static constexpr const char* name = "frequent";
  FrequentTokensDrafter()
      : FixedTreeDrafter(std::vector<specdec::node_t>(8, 0), {13, 29892, 29889, 278, 322, 310, 304, 263}) {}
};

/// REST over the datastore given with --datastore, with the options given on the command line.
struct RestFromDatastore : specdec::RestDrafter {
  RestFromDatastore(const DrafterResources& resources, const TargetInfo& target)
      : RestDrafter(resources.token_datastore(target), resources.rest) {}
};

/// DReSD over the dense datastore given with --dense-datastore, searched by --dresd-search
/// (default exact). Feature drafters run in `model` only.
struct DresdFromDatastore : specdec::DresdDrafter {
  DresdFromDatastore(const DrafterResources& resources, const TargetInfo& target)
      : DresdDrafter(resources.dense(target), resources.dresd, resources.dense_search(target)) {}
};

/// EAGLE-2 with the head given with --eagle-head (default: the committed stories260K head) and the
/// model's embedding and classifier.
struct EagleFromHead : specdec::EagleDrafter {
  EagleFromHead(const DrafterResources& resources, const TargetInfo& target) try
      : EagleDrafter(resources.eagle_head, target.model) {
  } catch (const specdec::error& e) {
    throw input_error(e.what());
  }
};

/// The draft model given with --draft-model (default: the committed stories260K draft) alone, a
/// one-stage drafter: one draft-model forward per drafted spine token.
struct DraftModelFromFile : specdec::StagedDrafter<specdec::Llama2cTarget> {
  DraftModelFromFile(const DrafterResources& resources, const TargetInfo& target)
      : StagedDrafter(specdec::Llama2cTarget(resources.draft(target)), resources.staged) {}
};

/// The Katz trigram model given with --ngram.
struct NgramFromFile : specdec::NgramDrafter {
  NgramFromFile(const DrafterResources& resources, const TargetInfo& target)
      : NgramDrafter(resources.ngram_model(target), resources.ngram_options) {}
};

/// Staged drafting: the draft model of --draft-model, itself sped up by the n-gram model of
/// --ngram (sampled from the draft model, see docs/drafters.md).
struct StagedFromFiles : specdec::StagedDrafter<specdec::Llama2cTarget, specdec::NgramDrafter> {
  StagedFromFiles(const DrafterResources& resources, const TargetInfo& target)
      : StagedDrafter(specdec::Llama2cTarget(resources.draft(target)), resources.staged,
                      specdec::NgramDrafter(resources.ngram_model(target), resources.ngram_options)) {}
};

template <class... Drafters>
using drafters = specdec::detail::type_list<Drafters...>;

using registered_combinations = specdec::detail::type_list<
    drafters<specdec::EmptyDrafter>,
    drafters<FrequentTokensDrafter>,
    drafters<FrequentTokensDrafter, specdec::EmptyDrafter>,
    drafters<specdec::PldDrafter>,
    drafters<specdec::CasdDrafter>,
    drafters<specdec::CasdPromptDrafter>,
    drafters<specdec::PldDrafter, specdec::CasdDrafter>,
    drafters<specdec::CasdDrafter, specdec::CasdPromptDrafter>,
    drafters<specdec::ContextTreeDrafter>,
    drafters<specdec::HistoryTreeDrafter>,
    drafters<specdec::ContextTreeDrafter, specdec::CasdDrafter>,
    drafters<RestFromDatastore>,
    drafters<RestFromDatastore, specdec::CasdDrafter>,
    drafters<RestFromDatastore, specdec::HistoryTreeDrafter>,
    drafters<DresdFromDatastore>,
    drafters<DresdFromDatastore, specdec::CasdDrafter>,
    drafters<EagleFromHead>,
    drafters<EagleFromHead, specdec::CasdDrafter>,
    drafters<EagleFromHead, specdec::ContextTreeDrafter>,
    drafters<NgramFromFile>,
    drafters<DraftModelFromFile>,
    drafters<StagedFromFiles>,
    drafters<StagedFromFiles, specdec::CasdDrafter>>;

}  // namespace specbench
