// Option values as people write them (tools/common/cli_values.hpp, issue 49): lists with blanks
// and empty items, whole numbers in every ordinary notation, names in any case, and an option
// given twice or empty.
#include <climits>
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "common/cli_values.hpp"

using namespace specdec::tools;
using Strings = std::vector<std::string>;

namespace {

/// Parses `args` (after the program's name) with `app`; the first ParseError's message, or "".
std::string parse(CLI::App& app, Strings args) {
  std::vector<const char*> argv{"test"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  keep_repeated_values(app);
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
    check_option_values<CLI::ValidationError>(app);
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("list items: blanks around each dropped, empty ones left out", "[tools]") {
  CHECK(list_items("casd, pld") == Strings{"casd", "pld"});
  CHECK(list_items(" casd,,pld ,\t") == Strings{"casd", "pld"});
  CHECK(list_items("casd,") == Strings{"casd"});
  CHECK(list_items("").empty());
  CHECK(list_items(" , ,").empty());
  CHECK(list_items(Strings{"a, b", "c", ","}) == Strings{"a", "b", "c"});
  CHECK(list_items("a b, c") == Strings{"a b", "c"});  // a blank inside an item stays
}

TEST_CASE("whole numbers in every ordinary notation, decimal always", "[tools]") {
  CHECK(whole_number("4") == 4);
  CHECK(whole_number(" 4\t") == 4);
  CHECK(whole_number("+4") == 4);
  CHECK(whole_number("-4") == -4);
  CHECK(whole_number("08") == 8);    // not octal (and not an error)
  CHECK(whole_number("010") == 10);  // not 8
  CHECK(whole_number("2.0") == 2);
  CHECK(whole_number("1e3") == 1000);
  CHECK(whole_number("1.5e1") == 15);
  CHECK(whole_number("9223372036854775807") == LLONG_MAX);
  for (const char* bad : {"", " ", "+", "+-4", "2.5", "0x10", "1,000", "1_000", "4x", "1 2", "inf", "nan", "1e300",
                          "99999999999999999999"}) {
    CAPTURE(bad);
    CHECK_FALSE(whole_number(bad).has_value());
  }
  CHECK(number(" +0.5") == 0.5);
  CHECK(number("1e-3") == 0.001);
  CHECK_FALSE(number("inf").has_value());
  CHECK_FALSE(number("0.5x").has_value());
}

TEST_CASE("names match regardless of case, an exact match first", "[tools]") {
  const Strings names{"casd", "pld"};
  CHECK(name_index("pld", names) == 1u);
  CHECK(name_index(" PLD ", names) == 1u);
  CHECK(name_index("Casd", names) == 0u);
  CHECK_FALSE(name_index("tree", names).has_value());
  CHECK_FALSE(name_index("", names).has_value());
  const Strings in_case{"qa", "QA"};
  CHECK(name_index("QA", in_case) == 1u);
  CHECK_FALSE(name_index("Qa", in_case).has_value());  // which of the two: neither is meant more
  CHECK(alternatives({"a", "b", "c"}) == "a, b or c");
  CHECK(alternatives({"a"}) == "a");
}

TEST_CASE("validators hand CLI11 the number as read, in digits", "[tools]") {
  CLI::App app;
  int budget = 0;
  long long tokens = 0;
  double share = 0;
  std::string weights;
  std::vector<std::string> contexts;
  app.add_option("--budget", budget)->transform(whole_number_at_least(0));
  app.add_option("--tokens", tokens)->transform(whole_number_in(1, 1000));
  app.add_option("--share", share)->transform(number_in(0, 1));
  app.add_option("--weights", weights)->transform(one_of({"fp32", "bf16"}));
  app.add_option("--contexts", contexts)->transform(whole_number_list(0, INT_MAX));
  CHECK(parse(app, {"--budget", "010", "--tokens", "1e3", "--share", " .5", "--weights", "BF16", "--contexts",
                    "128, 0512,"}) == "");
  CHECK(budget == 10);
  CHECK(tokens == 1000);
  CHECK(share == 0.5);
  CHECK(weights == "bf16");
  CHECK(contexts == Strings{"128,512"});
}

TEST_CASE("validators refuse in one sentence", "[tools]") {
  const auto refusal = [](Strings args) {
    CLI::App app;
    int budget = 0;
    std::string weights;
    std::vector<std::string> contexts;
    app.add_option("--budget", budget)->transform(whole_number_at_least(1));
    app.add_option("--tokens", budget)->transform(whole_number_in(1, 8));
    app.add_option("--weights", weights)->transform(one_of({"fp32", "bf16"}));
    app.add_option("--contexts", contexts)->transform(whole_number_list(0, INT_MAX));
    return parse(app, std::move(args));
  };
  CHECK(refusal({"--budget", "2.5"}) == "--budget: expected a whole number >= 1, got '2.5'");
  CHECK(refusal({"--budget", "0x10"}) == "--budget: expected a whole number >= 1, got '0x10'");
  CHECK(refusal({"--budget", "3000000000"}) == "--budget: expected a whole number >= 1, got '3000000000'");
  CHECK(refusal({"--tokens", "9"}) == "--tokens: expected a whole number in [1, 8], got '9'");
  CHECK(refusal({"--weights", "fp16"}) == "--weights: expected fp32 or bf16, got 'fp16'");
  CHECK(refusal({"--contexts", "16,x"}) == "--contexts: expected whole numbers >= 0, comma-separated, got '16,x'");
  CHECK(refusal({"--contexts", " , "}) == "--contexts: expected whole numbers >= 0, comma-separated, got ' , '");
}

TEST_CASE("an option given twice with different values, or an empty value, is refused", "[tools]") {
  CLI::App app;
  app.require_subcommand(1);
  auto* sub = app.add_subcommand("run");
  int budget = 0;
  std::string model;
  std::vector<std::string> drafters;
  bool flag = false;
  sub->add_option("--budget", budget)->transform(whole_number_at_least(0));
  sub->add_option("--model", model);
  sub->add_option("--drafter", drafters);
  sub->add_flag("--flag", flag);
  CHECK(parse(app, {"run", "--budget", "4", "--budget", "8"}) ==
        "--budget: given twice with different values (4, 8); give it once");
  CHECK(parse(app, {"run", "--budget", "4", "--budget", "5", "--budget", "6"}) ==
        "--budget: given 3 times with different values (4, 5, 6); give it once");
  // The same value twice (in digits) says nothing else; a list option and a flag repeat freely.
  CHECK(parse(app, {"run", "--budget", "4", "--budget", "04", "--drafter", "a", "--drafter", "b", "--flag", "--flag"}) ==
        "");
  CHECK(budget == 4);
  CHECK(drafters == Strings{"a", "b"});
  CHECK(parse(app, {"run", "--model", ""}) == "--model: the value is empty");
  CHECK(parse(app, {"run", "--model", " "}) == "--model: the value is empty");
  CHECK(parse(app, {"run", "--drafter", "a", "--drafter", ""}) == "--drafter: the value is empty");
}
