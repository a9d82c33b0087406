// Chat templates: how the user turns and earlier answers of a conversation become one prompt.
#pragma once

#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace specbench {

/// A prompt is `system`, then for every earlier turn `user` (with {user} replaced by that turn's
/// text) and `assistant` (with {assistant} replaced by the recorded answer), then `user` for the
/// turn being replayed. The tokenizer's special pieces (`<s>`, `</s>`) in the result are special
/// tokens. See docs/specbench.md for the file format.
class ChatTemplate {
 public:
  /// The templates built in (`--template NAME`), e.g. "vicuna".
  static std::vector<std::string> builtin_names();
  /// The built-in template `name` names, regardless of case. Throws input_error for an unknown
  /// name, listing the known ones.
  static ChatTemplate builtin(std::string_view name);
  /// Parses a template file's text; `origin` names it in error messages. Throws input_error.
  static ChatTemplate parse(std::string_view text, const std::string& origin);
  /// Reads and parses a template file. Throws input_error.
  static ChatTemplate load(const std::filesystem::path& file);

  /// The prompt for user turn `users.size() - 1`: `answers` holds the answers to the turns
  /// before it (answers.size() == users.size() - 1).
  std::string render(std::span<const std::string> users, std::span<const std::string> answers) const;

  const std::string& system() const { return system_; }
  const std::string& user() const { return user_; }
  const std::string& assistant() const { return assistant_; }

 private:
  ChatTemplate(std::string system, std::string user, std::string assistant)
      : system_(std::move(system)), user_(std::move(user)), assistant_(std::move(assistant)) {}

  std::string system_;
  std::string user_;
  std::string assistant_;
};

}  // namespace specbench
