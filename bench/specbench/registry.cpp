// The drafter combinations specbench is compiled with: the one list to edit.
//
// A combination is a set of default-constructible drafters (each with a static `name`) merged
// into one SpeculativeDecoder<ReplayTarget, Drafters..., ExactVerifier>. To add one: include the
// drafters' headers, then add its two lines below (an explicit instantiation of the runner and
// its entry in the list). See docs/specbench.md.
#include "registry.hpp"

#include <algorithm>

#include <specdec/policies/drafters/casd.hpp>
#include <specdec/policies/drafters/context_tree.hpp>
#include <specdec/policies/drafters/empty.hpp>
#include <specdec/policies/drafters/fixed_tree.hpp>
#include <specdec/policies/drafters/pld.hpp>

#include "input_error.hpp"

namespace specbench {

/// A trivial baseline: the eight most frequent tokens of English text in the Llama vocabulary
/// (newline , . the and of to a) as children of the root, every step. With a smaller vocabulary
/// the ids outside it are left out (FixedTreeDrafter respects the vocabulary).
struct FrequentTokensDrafter : specdec::FixedTreeDrafter {
  static constexpr const char* name = "frequent";
  FrequentTokensDrafter()
      : FixedTreeDrafter(std::vector<specdec::node_t>(8, 0), {13, 29892, 29889, 278, 322, 310, 304, 263}) {}
};

template ReplayRun replay<specdec::EmptyDrafter>(const Corpus&, const ReplayOptions&);
template ReplayRun replay<FrequentTokensDrafter>(const Corpus&, const ReplayOptions&);
template ReplayRun replay<FrequentTokensDrafter, specdec::EmptyDrafter>(const Corpus&, const ReplayOptions&);
template ReplayRun replay<specdec::PldDrafter>(const Corpus&, const ReplayOptions&);
template ReplayRun replay<specdec::CasdDrafter>(const Corpus&, const ReplayOptions&);
template ReplayRun replay<specdec::CasdPromptDrafter>(const Corpus&, const ReplayOptions&);
template ReplayRun replay<specdec::PldDrafter, specdec::CasdDrafter>(const Corpus&, const ReplayOptions&);
template ReplayRun replay<specdec::CasdDrafter, specdec::CasdPromptDrafter>(const Corpus&, const ReplayOptions&);
template ReplayRun replay<specdec::ContextTreeDrafter>(const Corpus&, const ReplayOptions&);
template ReplayRun replay<specdec::HistoryTreeDrafter>(const Corpus&, const ReplayOptions&);
template ReplayRun replay<specdec::ContextTreeDrafter, specdec::CasdDrafter>(const Corpus&, const ReplayOptions&);

namespace {
template <class... Drafters>
Combination combination() {
  return {{specdec::drafter_name<Drafters>()...}, &replay<Drafters...>};
}
}  // namespace

const std::vector<Combination>& combinations() {
  static const std::vector<Combination> list{
      combination<specdec::EmptyDrafter>(),
      combination<FrequentTokensDrafter>(),
      combination<FrequentTokensDrafter, specdec::EmptyDrafter>(),
      combination<specdec::PldDrafter>(),
      combination<specdec::CasdDrafter>(),
      combination<specdec::CasdPromptDrafter>(),
      combination<specdec::PldDrafter, specdec::CasdDrafter>(),
      combination<specdec::CasdDrafter, specdec::CasdPromptDrafter>(),
      combination<specdec::ContextTreeDrafter>(),
      combination<specdec::HistoryTreeDrafter>(),
      combination<specdec::ContextTreeDrafter, specdec::CasdDrafter>(),
  };
  return list;
}

// ---- lookup ----------------------------------------------------------------------------------

std::string Combination::name() const {
  std::string out;
  for (const auto& d : drafters) out += (out.empty() ? "" : ",") + d;
  return out;
}

std::vector<std::string> drafter_names() {
  std::vector<std::string> names;
  for (const auto& c : combinations())
    for (const auto& d : c.drafters)
      if (std::find(names.begin(), names.end(), d) == names.end()) names.push_back(d);
  return names;
}

const Combination& find_combination(std::span<const std::string> names) {
  std::vector<std::string> wanted;
  for (const std::string& arg : names) {
    std::size_t from = 0;
    while (true) {
      const std::size_t comma = arg.find(',', from);
      wanted.push_back(arg.substr(from, comma == std::string::npos ? std::string::npos : comma - from));
      if (comma == std::string::npos) break;
      from = comma + 1;
    }
  }
  const std::vector<std::string> known = drafter_names();
  for (const auto& w : wanted) {
    if (std::find(known.begin(), known.end(), w) == known.end()) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      throw input_error("unknown drafter '" + w + "'; the drafters are: " + list);
    }
  }
  std::vector<std::string> sorted_wanted = wanted;
  std::sort(sorted_wanted.begin(), sorted_wanted.end());
  std::string list;
  for (const Combination& c : combinations()) {
    std::vector<std::string> sorted = c.drafters;
    std::sort(sorted.begin(), sorted.end());
    if (sorted == sorted_wanted) return c;
    list += (list.empty() ? "" : "; ") + c.name();
  }
  std::string asked;
  for (const auto& w : wanted) asked += (asked.empty() ? "" : ",") + w;
  throw input_error("no compiled combination of the drafters '" + asked + "'; the combinations are: " + list +
                    " (add one in bench/specbench/registry.cpp)");
}

}  // namespace specbench
