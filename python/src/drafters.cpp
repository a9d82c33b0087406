// The drafters of the module `specdec`, each type compiled once behind AnyDrafter (session.hpp);
// a Decoder merges any list of them at run time. Options are keyword arguments named as in the
// C++ options structs, with their defaults; files are paths (memory-mapped, checked on opening).
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

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

#include "session.hpp"

namespace specdec::python {

namespace py = pybind11;
using path = std::filesystem::path;

namespace {

template <class D>
using held = HeldDrafter<D>;

// One Python class per drafter type: subclasses of specdec.drafters.Drafter.
template <class D>
py::class_<held<D>, AnyDrafter, std::shared_ptr<held<D>>> drafter_class(py::module_& m, const char* name, const char* doc) {
  return py::class_<held<D>, AnyDrafter, std::shared_ptr<held<D>>>(m, name, doc);
}

template <class D>
void bind_casd(py::module_& m, const char* name, const char* doc) {
  const CasdOptions d{};
  drafter_class<D>(m, name, doc)
      .def(py::init([](int k, int max_match, int min_match, int depth) {
             return std::make_shared<held<D>>(D(CasdOptions{k, max_match, min_match, depth}));
           }),
           py::kw_only(), py::arg("k") = d.k, py::arg("max_match") = d.max_match, py::arg("min_match") = d.min_match,
           py::arg("depth") = d.depth);
}

template <class D>
void bind_context_tree(py::module_& m, const char* name, const char* doc) {
  const ContextTreeOptions d{};
  drafter_class<D>(m, name, doc)
      .def(py::init([](int budget, int root_breadth, int history_breadth, int node_breadth, int node_contexts,
                       float min_probability, int history_tokens, int history_catch_up) {
             return std::make_shared<held<D>>(D(ContextTreeOptions{budget, root_breadth, history_breadth, node_breadth,
                                                                   node_contexts, min_probability, history_tokens,
                                                                   history_catch_up}));
           }),
           py::kw_only(), py::arg("budget") = d.budget, py::arg("root_breadth") = d.root_breadth,
           py::arg("history_breadth") = d.history_breadth, py::arg("node_breadth") = d.node_breadth,
           py::arg("node_contexts") = d.node_contexts, py::arg("min_probability") = d.min_probability,
           py::arg("history_tokens") = d.history_tokens, py::arg("history_catch_up") = d.history_catch_up);
}

}  // namespace

void bind_drafters(py::module_& parent) {
  py::module_ m = parent.def_submodule("drafters", "specdec's drafters (docs/drafters.md); each serves one Decoder");
  py::class_<AnyDrafter, std::shared_ptr<AnyDrafter>>(m, "Drafter", "A drafter (a subclass below)")
      .def_property_readonly("name", [](const AnyDrafter& d) { return std::string(d.name()); });

  drafter_class<EmptyDrafter>(m, "Empty", "Drafts nothing (plain decoding through the decoder)")
      .def(py::init([] { return std::make_shared<held<EmptyDrafter>>(EmptyDrafter{}); }));
  drafter_class<FixedTreeDrafter>(m, "Fixed", "The same tree below every root: parents (0 = the root) and tokens")
      .def(py::init([](std::vector<node_t> parents, std::vector<token_t> tokens) {
             return std::make_shared<held<FixedTreeDrafter>>(FixedTreeDrafter(std::move(parents), std::move(tokens)));
           }),
           py::arg("parents"), py::arg("tokens"));
  {
    const PldOptions d{};
    drafter_class<PldDrafter>(m, "Pld", "Prompt lookup decoding (Spec-Bench's semantics): a chain copied from the context")
        .def(py::init([](int max_ngram, int min_ngram, int depth) {
               return std::make_shared<held<PldDrafter>>(PldDrafter(PldOptions{max_ngram, min_ngram, depth}));
             }),
             py::kw_only(), py::arg("max_ngram") = d.max_ngram, py::arg("min_ngram") = d.min_ngram,
             py::arg("depth") = d.depth);
  }
  bind_casd<CasdDrafter>(m, "Casd", "CASD: chains copied from the k best matches in the context");
  bind_casd<CasdPromptDrafter>(m, "CasdPrompt", "CASD over the prompt only");
  bind_context_tree<ContextTreeDrafter>(m, "ContextTree", "A tree from every matched context length (ours: `tree`)");
  bind_context_tree<HistoryTreeDrafter>(m, "HistoryTree",
                                        "ContextTree that also remembers earlier sequences' outputs (`tree_history`)");
  {
    const RestOptions d{};
    drafter_class<RestDrafter>(m, "Rest", "REST over a token datastore built with specdec-datastore")
        .def(py::init([](const path& datastore, int max_suffix, int min_suffix, int max_occurrences, int depth, int budget) {
               return std::make_shared<held<RestDrafter>>(
                   RestDrafter(std::make_shared<const TokenDatastore>(datastore),
                               RestOptions{max_suffix, min_suffix, max_occurrences, depth, budget}));
             }),
             py::arg("datastore"), py::kw_only(), py::arg("max_suffix") = d.max_suffix,
             py::arg("min_suffix") = d.min_suffix, py::arg("max_occurrences") = d.max_occurrences,
             py::arg("depth") = d.depth, py::arg("budget") = d.budget);
  }
  const NgramOptions nd{};
  drafter_class<NgramDrafter>(m, "Ngram", "Best-first drafts from a Katz trigram model built with specdec-ngram")
      .def(py::init([](const path& model, int budget, int depth, int top_k) {
             return std::make_shared<held<NgramDrafter>>(NgramDrafter(model, NgramOptions{budget, depth, top_k}));
           }),
           py::arg("model"), py::kw_only(), py::arg("budget") = nd.budget, py::arg("depth") = nd.depth,
           py::arg("top_k") = nd.top_k);
  {
    const EagleOptions d{};
    drafter_class<EagleDrafter>(m, "Eagle",
                                "EAGLE-2: a trained head (tools/eagle) over the target's features; the target's embedding "
                                "and classifier come from its llama2.c checkpoint")
        .def(py::init([](const path& head, const path& checkpoint, int budget, int depth, int top_k) {
               auto target = std::make_shared<const Llama2cModel>(Llama2cModel::load(checkpoint));
               return std::make_shared<held<EagleDrafter>>(EagleDrafter(head, target, EagleOptions{budget, depth, top_k}));
             }),
             py::arg("head"), py::arg("checkpoint"), py::kw_only(), py::arg("budget") = d.budget,
             py::arg("depth") = d.depth, py::arg("top_k") = d.top_k);
  }
  {
    const DresdOptions d{};
    drafter_class<DresdDrafter>(m, "Dresd",
                                "DReSD: nearest neighbours of the target's feature in a dense datastore "
                                "(specdec-dense-datastore), searched exactly")
        .def(py::init([](const path& datastore, int neighbours, int drafts, int depth) {
               return std::make_shared<held<DresdDrafter>>(DresdDrafter(
                   std::make_shared<const DenseDatastore>(datastore), DresdOptions{neighbours, drafts, depth}));
             }),
             py::arg("datastore"), py::kw_only(), py::arg("neighbours") = d.neighbours, py::arg("drafts") = d.drafts,
             py::arg("depth") = d.depth);
  }
  const StagedOptions sd{};
  using DraftModel = StagedDrafter<Llama2cTarget>;
  drafter_class<DraftModel>(m, "DraftModel", "A draft model (llama2.c checkpoint) with the target's vocabulary")
      .def(py::init([](const path& checkpoint, int depth, int top_k, int budget, int inner_budget) {
             return std::make_shared<held<DraftModel>>(
                 DraftModel(Llama2cTarget(checkpoint), StagedOptions{depth, top_k, budget, inner_budget}));
           }),
           py::arg("checkpoint"), py::kw_only(), py::arg("depth") = sd.depth, py::arg("top_k") = sd.top_k,
           py::arg("budget") = sd.budget, py::arg("inner_budget") = sd.inner_budget);
  using Staged = StagedDrafter<Llama2cTarget, NgramDrafter>;
  drafter_class<Staged>(m, "Staged", "Staged drafting: a draft model that an n-gram model speeds up")
      .def(py::init([](const path& checkpoint, const path& ngram, int depth, int top_k, int budget, int inner_budget,
                       int ngram_budget, int ngram_depth, int ngram_top_k) {
             return std::make_shared<held<Staged>>(
                 Staged(Llama2cTarget(checkpoint), StagedOptions{depth, top_k, budget, inner_budget},
                        NgramDrafter(ngram, NgramOptions{ngram_budget, ngram_depth, ngram_top_k})));
           }),
           py::arg("checkpoint"), py::arg("ngram"), py::kw_only(), py::arg("depth") = sd.depth,
           py::arg("top_k") = sd.top_k, py::arg("budget") = sd.budget, py::arg("inner_budget") = sd.inner_budget,
           py::arg("ngram_budget") = nd.budget, py::arg("ngram_depth") = nd.depth, py::arg("ngram_top_k") = nd.top_k);
}

}  // namespace specdec::python
