// The registered combinations (combinations.hpp) as a list of runners, and their lookup by name.
#include "registry.hpp"

#include <algorithm>
#include <optional>

#include "combinations.hpp"
#include "common/values.hpp"
#include "input_error.hpp"

namespace specbench {

namespace {

template <class... Drafters>
Combination combination(specdec::detail::type_list<Drafters...>, const ModelRunners& model, const BatchRunners& batch) {
  // The replay target has no features: feature drafters run in `model` only.
  if constexpr ((specdec::drafter_traits<Drafters>::needs_target_features || ...))
    return {{specdec::drafter_name<Drafters>()...}, nullptr, model, batch};
  else return {{specdec::drafter_name<Drafters>()...}, &replay<Drafters...>, model, batch};
}

template <class... Lists, std::size_t... I>
std::vector<Combination> all_combinations(specdec::detail::type_list<Lists...>, std::index_sequence<I...>) {
  return {combination(Lists{}, model_runners()[I], batch_runners()[I])...};
}

}  // namespace

const std::vector<Combination>& combinations() {
  static const std::vector<Combination> list =
      all_combinations(registered_combinations{}, std::make_index_sequence<registered_combinations::size>{});
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
  const std::vector<std::string> known = drafter_names();
  std::vector<std::string> wanted;
  for (const std::string& given : specdec::tools::list_items(std::vector<std::string>(names.begin(), names.end()))) {
    const std::optional<std::size_t> i = specdec::tools::name_index(given, known);
    if (!i) throw input_error("unknown drafter '" + given + "'; the drafters are: " + specdec::tools::joined_names(known));
    wanted.push_back(known[*i]);
  }
  if (wanted.empty()) throw input_error("no drafter is named; the drafters are: " + specdec::tools::joined_names(known));
  std::vector<std::string> sorted_wanted = wanted;
  std::sort(sorted_wanted.begin(), sorted_wanted.end());
  if (const auto twice = std::adjacent_find(sorted_wanted.begin(), sorted_wanted.end()); twice != sorted_wanted.end())
    throw input_error("drafter '" + *twice + "' is given twice; a combination merges different drafters");
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
                    " (add one in bench/specbench/combinations.hpp)");
}

}  // namespace specbench
