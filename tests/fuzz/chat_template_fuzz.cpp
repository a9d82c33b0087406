// Fuzz target: specbench's chat template files. Any input is parsed or refused with an
// input_error; anything else (another exception, a sanitizer report) is a bug.
#include <string_view>
#include <vector>

#include "chat_template.hpp"
#include "fuzz_target.hpp"
#include "input_error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const auto chat = specbench::ChatTemplate::parse(text, "fuzz");
    const std::vector<std::string> users{"Hi {user}", "again"}, assistants{"{assistant}!"};
    static_cast<void>(chat.render(users, assistants));
  } catch (const specbench::input_error&) {
  }
  return 0;
}
