// specbench: replays real greedy LLM answers with drafter combinations and reports τ, drafting
// cost and which drafter earned the accepted tokens. See docs/specbench.md.
#include <charconv>
#include <climits>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "chat_template.hpp"
#include "corpus.hpp"
#include "input_error.hpp"
#include "registry.hpp"
#include "report.hpp"

namespace fs = std::filesystem;
using namespace specbench;

namespace {

/// The data options shared by `replay` and `compare`.
struct DataArgs {
  std::string data_dir;
  std::string questions;
  std::string answers;
  std::string tokenizer;
  std::string template_name = "vicuna";
  std::string template_file;
  std::vector<std::string> categories;
  int max_turns = 0;
  int budget = 64;
  std::string json;
};

/// Accepts a whole number >= `least`; CLI11 reports "--OPTION: <message>".
CLI::Validator whole_number_at_least(long least) {
  return CLI::Validator(
      [least](std::string& text) -> std::string {
        long value = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (ec != std::errc() || end != text.data() + text.size() || value < least || value > INT_MAX)
          return "expected a whole number >= " + std::to_string(least) + ", got '" + text + "'";
        return {};
      },
      "INT>=" + std::to_string(least));
}

void add_data_options(CLI::App& cmd, DataArgs& a) {
  cmd.add_option("--data-dir", a.data_dir,
                 "Data directory (default: $SPECDEC_DATA, else " SPECDEC_DEFAULT_DATA_DIR ")");
  cmd.add_option("--questions", a.questions, "Questions jsonl (default: DATA/specbench/question.jsonl)");
  cmd.add_option("--answers", a.answers, "Recorded answers jsonl (default: DATA/specbench/vicuna-7b-v1.3-greedy.jsonl)");
  cmd.add_option("--tokenizer", a.tokenizer, "SentencePiece model (default: DATA/tokenizers/llama2.model)");
  auto* name = cmd.add_option("--template", a.template_name, "Built-in chat template (default: vicuna)");
  auto* file = cmd.add_option("--template-file", a.template_file, "Chat template file (see docs/specbench.md)");
  name->excludes(file);
  file->excludes(name);
  cmd.add_option("--category", a.categories, "Replay only this category (repeatable, or comma-separated)")
      ->delimiter(',');
  cmd.add_option("--max-turns", a.max_turns, "Replay at most this many turns, in file order")
      ->check(whole_number_at_least(1));
  cmd.add_option("--budget", a.budget, "Most draft nodes per target call, after merging (default 64)")
      ->check(whole_number_at_least(0));
  cmd.add_option("--json", a.json, "Write the results as JSON to this file");
}

fs::path data_path(const DataArgs& a, const std::string& given, const char* relative) {
  return given.empty() ? data_root(a.data_dir) / relative : fs::path(given);
}

/// Loads and tokenises the data once; prints how well the answers' token counts match the
/// counts recorded with them (stderr).
Corpus load_corpus(const DataArgs& a) {
  const ChatTemplate chat = a.template_file.empty() ? ChatTemplate::builtin(a.template_name)
                                                    : ChatTemplate::load(a.template_file);
  const auto questions = load_questions(data_path(a, a.questions, "specbench/question.jsonl"));
  const auto answers = load_answers(data_path(a, a.answers, "specbench/vicuna-7b-v1.3-greedy.jsonl"));
  const Tokenizer tokenizer(data_path(a, a.tokenizer, "tokenizers/llama2.model"));
  Corpus corpus = build_corpus(questions, answers, tokenizer, chat, {a.categories, a.max_turns});
  if (const TokenCountCheck check = check_token_counts(corpus); check.turns > 0) {
    std::cerr << fmt::format(
        "specbench: tokenised answer + EOS vs the token count recorded with it: {} of {} turns equal, {} "
        "within ±2 tokens (largest difference {})\n",
        check.exact, check.turns, check.within_2, check.max_difference);
  }
  return corpus;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out.flush()) throw input_error("cannot write " + path);
}

void run_list() {
  std::string drafters;
  for (const auto& d : drafter_names()) drafters += (drafters.empty() ? "" : ", ") + d;
  std::cout << "drafters: " << drafters << "\n"
            << "combinations (--drafter NAME[,NAME...], names in any order):\n";
  for (const auto& c : combinations()) std::cout << "  " << c.name() << "\n";
}

void run_replay(const DataArgs& a, const std::vector<std::string>& drafters, const std::string& plot) {
  const Combination& combination = find_combination(drafters);
  const Corpus corpus = load_corpus(a);
  const ReplayOptions options{.budget = a.budget};
  const Report report = summarise(corpus, combination.replay(corpus, options), options);
  print_report(std::cout, report);
  if (!a.json.empty()) write_file(a.json, to_json(report).dump(2) + "\n");
  if (!plot.empty()) write_file(plot, histogram_svg(report));
}

void run_compare(const DataArgs& a, const std::vector<std::string>& names) {
  std::vector<const Combination*> chosen;
  for (const auto& name : names) chosen.push_back(&find_combination(std::span(&name, 1)));
  const Corpus corpus = load_corpus(a);
  const ReplayOptions options{.budget = a.budget};
  std::vector<Report> reports;
  for (const Combination* c : chosen) reports.push_back(summarise(corpus, c->replay(corpus, options), options));
  print_comparison(std::cout, reports);
  if (!a.json.empty()) {
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    for (const auto& r : reports) j[r.combination()] = to_json(r);
    write_file(a.json, j.dump(2) + "\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"specbench: replays recorded greedy LLM answers with drafter combinations and reports tau "
               "(tokens per target call, bonus token included), drafting cost and accepted lengths"};
  app.require_subcommand(1);

  app.add_subcommand("list", "List the drafters and the compiled drafter combinations");

  DataArgs replay_args;
  std::vector<std::string> drafters;
  std::string plot;
  auto* replay = app.add_subcommand("replay", "Replay every turn with one drafter combination");
  add_data_options(*replay, replay_args);
  replay->add_option("--drafter", drafters, "Drafter name(s); all of them combine into one decoder (repeatable)")
      ->required();
  replay->add_option("--plot", plot, "Write the accepted-length histogram as an SVG bar chart");

  DataArgs compare_args;
  std::vector<std::string> combos;
  auto* compare = app.add_subcommand("compare", "Replay several combinations on the same data and compare them");
  add_data_options(*compare, compare_args);
  compare->add_option("combinations", combos, "Combinations such as pld or tree,casd")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    std::cerr << "specbench: " << e.what() << " (see specbench --help)\n";
    return 2;
  }

  try {
    if (replay->parsed()) run_replay(replay_args, drafters, plot);
    else if (compare->parsed()) run_compare(compare_args, combos);
    else run_list();
  } catch (const input_error& e) {
    std::cerr << "specbench: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "specbench: internal error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
