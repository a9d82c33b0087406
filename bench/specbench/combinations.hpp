// The drafter combinations specbench is compiled with: the one list to edit.
//
// A combination is a set of drafters (each with a static `name`) merged into one decoder. Each
// drafter is default-constructible or constructible from `const DrafterResources&` (replay.hpp).
// Every combination is compiled for `replay` (registry.cpp) and, with each verifier, for `model`
// (registry_model.cpp). To add one: include its drafters' headers and add a line to the list.
// See docs/specbench.md.
#pragma once

#include <vector>

#include <specdec/policies/drafters/casd.hpp>
#include <specdec/policies/drafters/context_tree.hpp>
#include <specdec/policies/drafters/empty.hpp>
#include <specdec/policies/drafters/fixed_tree.hpp>
#include <specdec/policies/drafters/pld.hpp>
#include <specdec/policies/drafters/rest.hpp>
#include <specdec/type_list.hpp>

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
  RestFromDatastore(const DrafterResources& resources, int vocab_size)
      : RestDrafter(resources.datastore(vocab_size), resources.rest) {}
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
    drafters<RestFromDatastore, specdec::HistoryTreeDrafter>>;

}  // namespace specbench
