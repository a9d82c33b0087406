// Option values as people write them, read the same way by every specdec command line
// (specbench, specdec-datastore, specdec-dense-datastore, specdec-ngram, specdec-synth-model):
//   - lists: "casd, pld" is casd and pld (blanks around an item dropped, and empty items: "casd,"
//     is casd); the option may also be repeated;
//   - whole numbers: blanks around them, a leading +, leading zeros (decimal, never octal) and
//     whole values in decimal or scientific notation (2.0, 1e6) are accepted; 2.5, 0x10 and 1,000
//     are not;
//   - names from a fixed list (drafters, tasks, verifiers, ...): matched without regard to case;
//   - an option that takes one value, given twice with different values, or given an empty value,
//     is refused (one sentence), as is a list that names nothing (",").
#pragma once

#include <algorithm>
#include <cctype>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

namespace specdec::tools {

/// `text` without the spaces and tabs around it.
inline std::string_view trimmed(std::string_view text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

/// The items of a comma-separated list: each trimmed, the empty ones left out.
inline std::vector<std::string> list_items(std::string_view text) {
  std::vector<std::string> items;
  while (true) {
    const std::size_t comma = text.find(',');
    if (const std::string_view item = trimmed(text.substr(0, comma)); !item.empty()) items.emplace_back(item);
    if (comma == std::string_view::npos) return items;
    text.remove_prefix(comma + 1);
  }
}

/// The items of every value of a repeatable list option, in order.
inline std::vector<std::string> list_items(const std::vector<std::string>& values) {
  std::vector<std::string> items;
  for (const std::string& value : values)
    for (std::string& item : list_items(value)) items.push_back(std::move(item));
  return items;
}

/// The finite number `text` writes (blanks around it and a leading + allowed); nullopt when it
/// writes none.
inline std::optional<double> number(std::string_view text) {
  text = trimmed(text);
  if (text.starts_with('+') && !text.starts_with("+-")) text.remove_prefix(1);
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value))
    return std::nullopt;
  return value;
}

/// The whole number `text` writes: digits (leading zeros are decimal), or a whole number in
/// decimal or scientific notation (2.0, 1e6) up to 2^53; nullopt when it writes none.
inline std::optional<long long> whole_number(std::string_view text) {
  const std::string_view digits = trimmed(text);
  std::string_view unsigned_digits = digits;
  if (unsigned_digits.starts_with('+') && !unsigned_digits.starts_with("+-")) unsigned_digits.remove_prefix(1);
  long long value = 0;
  const auto [end, ec] =
      std::from_chars(unsigned_digits.data(), unsigned_digits.data() + unsigned_digits.size(), value);
  if (!unsigned_digits.empty() && ec == std::errc() && end == unsigned_digits.data() + unsigned_digits.size())
    return value;
  const std::optional<double> real = number(digits);
  constexpr double exact = 9007199254740992.0;  // 2^53: every whole double up to it is exact
  if (!real || std::trunc(*real) != *real || std::fabs(*real) > exact) return std::nullopt;
  return static_cast<long long>(*real);
}

/// Whether `a` and `b` are the same name, regardless of case (names are ASCII).
inline bool same_name(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
  });
}

/// The position in `names` of the name `given` (trimmed) stands for: the one equal to it, else
/// the one equal to it regardless of case when there is only one; nullopt when none.
inline std::optional<std::size_t> name_index(std::string_view given, const std::vector<std::string>& names) {
  given = trimmed(given);
  if (const auto exact = std::find(names.begin(), names.end(), given); exact != names.end())
    return static_cast<std::size_t>(exact - names.begin());
  std::optional<std::size_t> found;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (!same_name(given, names[i])) continue;
    if (found) return std::nullopt;  // two names differ in case only: neither is meant more than the other
    found = i;
  }
  return found;
}

/// "a, b, c", for messages.
inline std::string joined_names(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

/// "a, b or c", for messages.
inline std::string alternatives(const std::vector<std::string>& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return out;
}

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
