#include "chat_template.hpp"

#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <utility>

#include "common/cli_checks.hpp"
#include "common/values.hpp"
#include "input_error.hpp"

namespace specbench {
namespace {

constexpr std::string_view kUserPlaceholder = "{user}";
constexpr std::string_view kAssistantPlaceholder = "{assistant}";

// Vicuna v1.1 as Spec-Bench's evaluation renders it with FastChat (BOS prepended):
//   <s>SYSTEM USER: turn 1 ASSISTANT: answer 1</s>USER: turn 2 ASSISTANT:
constexpr std::string_view kVicuna = R"(# Vicuna v1.1 (FastChat), as used by Spec-Bench's evaluation
system = "<s>A chat between a curious user and an artificial intelligence assistant. "
         "The assistant gives helpful, detailed, and polite answers to the user's questions. "
user = "USER: {user} ASSISTANT:"
assistant = " {assistant}</s>"
)";

/// `text` with every `placeholder` replaced by `value` (the value itself is not searched).
std::string substitute(std::string_view text, std::string_view placeholder, std::string_view value) {
  std::string out;
  std::size_t from = 0;
  for (std::size_t at; (at = text.find(placeholder, from)) != std::string_view::npos; from = at + placeholder.size()) {
    out.append(text.substr(from, at - from));
    out.append(value);
  }
  out.append(text.substr(from));
  return out;
}

std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t\r") - first + 1);
}

/// Parses one double-quoted string with \n \t \" \\ escapes that makes up all of `s`.
std::string parse_quoted(std::string_view s, const std::string& where) {
  if (s.size() < 2 || s.front() != '"') throw input_error(where + ": expected a double-quoted string");
  std::string out;
  std::size_t i = 1;
  for (; i < s.size() && s[i] != '"'; ++i) {
    if (s[i] != '\\') {
      out += s[i];
      continue;
    }
    if (++i == s.size()) break;
    switch (s[i]) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      default: throw input_error(where + ": unknown escape \\" + std::string(1, s[i]) + " (use \\n \\t \\\" \\\\)");
    }
  }
  if (i >= s.size()) throw input_error(where + ": the string is not closed with \"");
  if (i + 1 != s.size()) throw input_error(where + ": unexpected text after the closing \"");
  return out;
}

/// The built-in templates: a name and its text.
constexpr std::pair<const char*, std::string_view> kBuiltins[] = {{"vicuna", kVicuna}};

}  // namespace

std::vector<std::string> ChatTemplate::builtin_names() {
  std::vector<std::string> names;
  for (const auto& [name, text] : kBuiltins) names.emplace_back(name);
  return names;
}

ChatTemplate ChatTemplate::builtin(std::string_view name) {
  const std::vector<std::string> known = builtin_names();
  if (const std::optional<std::size_t> i = specdec::tools::name_index(name, known))
    return parse(kBuiltins[*i].second, "built-in template " + known[*i]);
  throw input_error("unknown template '" + std::string(name) + "'; the built-in templates are: " +
                    specdec::tools::joined_names(known) + " (or give a file with --template-file)");
}

ChatTemplate ChatTemplate::parse(std::string_view text, const std::string& origin) {
  std::map<std::string, std::string, std::less<>> values;
  std::string* last = nullptr;  // the value a continuation line appends to
  std::istringstream lines{std::string(text)};
  std::string raw;
  for (int number = 1; std::getline(lines, raw); ++number) {
    const std::string where = origin + " line " + std::to_string(number);
    const std::string_view line = trim(raw);
    if (line.empty() || line.front() == '#') continue;
    if (line.front() == '"') {
      if (!last) throw input_error(where + ": a continuation string needs a `key = \"...\"` line before it");
      *last += parse_quoted(line, where);
      continue;
    }
    const auto eq = line.find('=');
    if (eq == std::string_view::npos) throw input_error(where + ": expected `key = \"value\"`");
    const std::string key{trim(line.substr(0, eq))};
    if (key != "system" && key != "user" && key != "assistant")
      throw input_error(where + ": unknown key '" + key + "' (the keys are system, user, assistant)");
    if (values.contains(key)) throw input_error(where + ": '" + key + "' is given twice");
    last = &values[key];
    *last = parse_quoted(trim(line.substr(eq + 1)), where);
  }
  const auto user = values.find("user");
  if (user == values.end())
    throw input_error(origin + ": no `user = \"...\"` line (it must contain the {user} placeholder)");
  if (user->second.find(kUserPlaceholder) == std::string::npos)
    throw input_error(origin + ": the user template \"" + user->second + "\" has no {user} placeholder");
  const auto assistant = values.find("assistant");
  std::string assistant_text = assistant == values.end() ? std::string(kAssistantPlaceholder) : assistant->second;
  if (assistant_text.find(kAssistantPlaceholder) == std::string::npos)
    throw input_error(origin + ": the assistant template \"" + assistant_text + "\" has no {assistant} placeholder");
  return ChatTemplate(values["system"], user->second, std::move(assistant_text));
}

ChatTemplate ChatTemplate::load(const std::filesystem::path& file) {
  specdec::tools::check_input_file<input_error>(file, "template file");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw input_error("template file " + file.string() + " cannot be read (does it exist?)");
  std::ostringstream text;
  text << in.rdbuf();
  std::string content = text.str();
  const std::string origin = "template file " + file.string();
  specdec::tools::check_utf8_text<input_error>(content, origin, true);
  if (content.starts_with("\xEF\xBB\xBF")) content.erase(0, 3);  // an editor's byte-order mark
  return parse(content, origin);
}

std::string ChatTemplate::render(std::span<const std::string> users, std::span<const std::string> answers) const {
  if (users.empty() || answers.size() + 1 != users.size())
    throw std::logic_error("ChatTemplate::render: needs one answer per earlier user turn");
  std::string prompt = system_;
  for (std::size_t k = 0; k < users.size(); ++k) {
    prompt += substitute(user_, kUserPlaceholder, users[k]);
    if (k < answers.size()) prompt += substitute(assistant_, kAssistantPlaceholder, answers[k]);
  }
  return prompt;
}

}  // namespace specbench
