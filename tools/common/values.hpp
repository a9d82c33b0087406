// Option values as people write them, read the same way by every specdec command line
// (specbench, specdec-datastore, specdec-dense-datastore, specdec-ngram, specdec-synth-model):
//   - lists: "casd, pld" is casd and pld (blanks around an item dropped, and empty items: "casd,"
//     is casd); the option may also be repeated;
//   - whole numbers: blanks around them, a leading +, leading zeros (decimal, never octal) and
//     whole values in decimal or scientific notation (2.0, 1e6) are accepted; 2.5, 0x10 and 1,000
//     are not;
//   - names from a fixed list (drafters, tasks, verifiers, ...): matched without regard to case.
// cli_values.hpp makes CLI11 validators of them; this header has no CLI11 (whose header alone
// costs about 4 s of compilation a file), for the code behind the command lines.
#pragma once

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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

}  // namespace specdec::tools
