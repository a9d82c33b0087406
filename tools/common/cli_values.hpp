// The rules of values.hpp as CLI11 validators, for every specdec command line, and one more: an
// option that takes one value, given twice with different values, or given an empty value, is
// refused (one sentence), as is a list that names nothing (",").
#pragma once

#include <algorithm>
#include <climits>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "common/values.hpp"

namespace specdec::tools {

namespace detail {

inline CLI::Validator whole_number_validator(long long least, long long most, const std::string& range,
                                             const std::string& description) {
  return CLI::Validator(
      [least, most, range](std::string& text) -> std::string {
        const std::optional<long long> value = whole_number(text);
        if (!value || *value < least || *value > most) return "expected a whole number " + range + ", got '" + text + "'";
        text = std::to_string(*value);  // what CLI11 converts: never read as octal
        return {};
      },
      description);
}

}  // namespace detail

/// Accepts a whole number in [least, most] (see whole_number) and hands it on in digits; CLI11
/// reports "--OPTION: <message>". Add it with transform(), which keeps the rewritten value.
inline CLI::Validator whole_number_in(long long least, long long most) {
  const std::string range = fmt::format("[{}, {}]", least, most);
  return detail::whole_number_validator(least, most, "in " + range, "INT in " + range);
}

/// Accepts a whole number >= least, and at most `most`, what the option's type holds.
inline CLI::Validator whole_number_at_least(long long least, long long most = INT_MAX) {
  return detail::whole_number_validator(least, most, fmt::format(">= {}", least), fmt::format("INT>={}", least));
}

/// Accepts a comma-separated list (list_items) of at least one whole number in [least, most] and
/// hands it on in digits ("128,512"). Add it with transform().
inline CLI::Validator whole_number_list(long long least, long long most) {
  const std::string range = most == INT_MAX || most == LLONG_MAX ? fmt::format(">= {}", least)
                                                                 : fmt::format("in [{}, {}]", least, most);
  return CLI::Validator(
      [least, most, range](std::string& text) -> std::string {
        const std::string refusal = "expected whole numbers " + range + ", comma-separated, got '" + text + "'";
        std::string digits;
        for (const std::string& item : list_items(text)) {
          const std::optional<long long> value = whole_number(item);
          if (!value || *value < least || *value > most) return refusal;
          digits += (digits.empty() ? "" : ",") + std::to_string(*value);
        }
        if (digits.empty()) return refusal;
        text = digits;
        return {};
      },
      "INT[,INT...]");
}

/// Accepts a finite number in [low, high] (open at `low` when low_open) and hands it on as read.
/// Add it with transform().
inline CLI::Validator number_in(double low, double high, bool low_open = false) {
  const std::string range = fmt::format("{}{:g}, {:g}]", low_open ? "(" : "[", low, high);
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        const std::optional<double> value = number(text);
        if (!value || (low_open ? *value <= low : *value < low) || *value > high)
          return "expected a number in " + range + ", got '" + text + "'";
        text = fmt::format("{}", *value);
        return {};
      },
      "NUMBER in " + range);
}

/// Accepts one of `names` regardless of case (name_index) and hands that name on. Add it with
/// transform().
inline CLI::Validator one_of(std::vector<std::string> names) {
  const std::string description = "{" + joined_names(names) + "}";
  return CLI::Validator(
      [names](std::string& text) -> std::string {
        const std::optional<std::size_t> i = name_index(text, names);
        if (!i) return "expected " + alternatives(names) + ", got '" + text + "'";
        text = names[*i];
        return {};
      },
      description);
}

/// Prepares `app` (with its subcommands) for check_option_values: an option that takes one value
/// keeps every value given, for the check to compare, instead of CLI11's "At Most 1 required".
inline void keep_repeated_values(CLI::App& app) {
  for (CLI::Option* option : app.get_options())
    if (option->get_items_expected_max() == 1 && option->get_multi_option_policy() == CLI::MultiOptionPolicy::Throw)
      option->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) keep_repeated_values(*sub);
}

/// Throws `Error` when an option of the parsed command line (app and the subcommands it ran) was
/// given an empty value, or, taking one value (keep_repeated_values), was given different ones.
template <class Error>
void check_option_values(const CLI::App& app) {
  for (const CLI::Option* option : app.get_options()) {
    if (option->count() == 0 || option->get_items_expected_max() == 0) continue;  // absent, or a flag
    const std::vector<std::string>& values = option->results();
    if (std::any_of(values.begin(), values.end(), [](const std::string& v) { return trimmed(v).empty(); }))
      throw Error(option->get_name() + ": the value is empty");
    if (option->get_items_expected_max() == 1 &&
        std::any_of(values.begin(), values.end(), [&](const std::string& v) { return v != values.front(); }))
      throw Error(fmt::format("{}: given {} with different values ({}); give it once", option->get_name(),
                              values.size() == 2 ? "twice" : std::to_string(values.size()) + " times",
                              joined_names(values)));
  }
  for (const CLI::App* sub : app.get_subcommands()) check_option_values<Error>(*sub);
}

}  // namespace specdec::tools
