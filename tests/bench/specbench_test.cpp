#include <catch2/catch.hpp>

#include <array>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <specdec/index/datastore_builder.hpp>
#include <specdec/index/ngram_model_builder.hpp>
#include <specdec/policies/drafters/empty.hpp>

#include "chat_template.hpp"
#include "corpus.hpp"
#include "input_error.hpp"
#include "registry.hpp"
#include "report.hpp"
#include "tasks.hpp"
#include "support/data.hpp"
#include "support/tiny_llama.hpp"

using namespace specbench;
namespace fs = std::filesystem;

namespace {

const fs::path kFixtures = SPECBENCH_FIXTURES;

/// Writes `text` to a fresh file in the temporary directory and returns its path.
fs::path temp_file(const std::string& name, const std::string& text) {
  const fs::path path = fs::temp_directory_path() / ("specbench_test_" + name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

const std::string kVicunaSystem =
    "<s>A chat between a curious user and an artificial intelligence assistant. The assistant gives helpful, "
    "detailed, and polite answers to the user's questions. ";

/// A corpus made by hand, without a tokenizer: Llama-sized vocabulary, EOS 2.
Corpus hand_made_corpus() {
  Corpus corpus;
  corpus.vocab_size = 32000;
  corpus.stop_token = 2;
  corpus.categories = {"qa", "rag"};
  // 13 (newline), 29892 (","), 278 ("the") are among the "frequent" drafter's tokens.
  corpus.turns.push_back({1, "qa", 0, {1, 500, 600, 700}, {800, 13, 900, 29892, 278, 1000, 13}, -1});
  corpus.turns.push_back({2, "rag", 0, {1, 500, 13}, {278, 278, 278, 4000}, -1});
  corpus.turns.push_back({3, "qa", 0, {1, 7}, {}, -1});
  return corpus;
}

}  // namespace

// ---- templates -------------------------------------------------------------------------------

TEST_CASE("the vicuna template renders Spec-Bench's prompts", "[specbench]") {
  const ChatTemplate vicuna = ChatTemplate::builtin("vicuna");
  const std::vector<std::string> users{"Q1", "Q2"};
  const std::vector<std::string> answers{"A1"};
  CHECK(vicuna.render(std::span(users).first(1), {}) == kVicunaSystem + "USER: Q1 ASSISTANT:");
  CHECK(vicuna.render(users, answers) == kVicunaSystem + "USER: Q1 ASSISTANT: A1</s>USER: Q2 ASSISTANT:");
  // Placeholders are replaced in the template only, never inside the texts put into it.
  const std::vector<std::string> tricky{"say {assistant}"};
  CHECK(vicuna.render(tricky, {}) == kVicunaSystem + "USER: say {assistant} ASSISTANT:");
}

// Files as editors save them (issue 49): a byte-order mark and Windows line endings are not text.
TEST_CASE("prompts and template files with a byte-order mark and CRLF line endings", "[specbench]") {
  const Task task = load_task(temp_file("bom_crlf.txt", "\xEF\xBB\xBFOnce upon a time\r\n\r\nThe cat\r\n").string());
  CHECK(task.prompts == std::vector<std::string>{"Once upon a time", "The cat"});
  // A line an editor left spaces or tabs on is blank, not a prompt of spaces.
  CHECK(load_task(temp_file("spaces.txt", "  \n\t\nThe dog\n \t \n").string()).prompts ==
        std::vector<std::string>{"The dog"});
  CHECK_THROWS_WITH(load_task(temp_file("blank.txt", "\n  \n\t\n").string()), Catch::Contains("has no prompt"));
  const ChatTemplate t =
      ChatTemplate::load(temp_file("bom.template", "\xEF\xBB\xBFuser = \"[INST] {user}\"\r\nsystem = \"s\"\r\n"));
  CHECK(t.user() == "[INST] {user}");
  CHECK(t.system() == "s");
  // UTF-16 (Windows Notepad's "Unicode", with its byte-order mark, or without one) is refused, not read as garbage.
  const std::string utf16 = std::string("\xFF\xFEO\0n\0c\0e\0\n\0", 12);
  CHECK_THROWS_WITH(load_task(temp_file("utf16.txt", utf16).string()),
                    Catch::EndsWith("utf16.txt' is UTF-16 text (Windows Notepad's \"Unicode\"): save it as UTF-8"));
  CHECK_THROWS_WITH(load_task(temp_file("utf16le.txt", utf16.substr(2)).string()),
                    Catch::EndsWith("utf16le.txt' holds NUL bytes, which UTF-8 text has not (is it UTF-16?): save it as UTF-8"));
  CHECK_THROWS_WITH(ChatTemplate::load(temp_file("utf16.template", utf16)), Catch::Contains("is UTF-16 text"));
  // A file of only a byte-order mark is empty.
  CHECK_THROWS_WITH(load_task(temp_file("bom_only.txt", "\xEF\xBB\xBF").string()), Catch::Contains("has no prompt"));
}

TEST_CASE("template files", "[specbench]") {
  SECTION("the vicuna file equals the built-in template") {
    const ChatTemplate file = ChatTemplate::load(kFixtures / "vicuna.template");
    const ChatTemplate builtin = ChatTemplate::builtin("vicuna");
    CHECK(file.system() == builtin.system());
    CHECK(file.user() == builtin.user());
    CHECK(file.assistant() == builtin.assistant());
  }
  SECTION("comments, continuation strings, escapes and defaults") {
    const ChatTemplate t = ChatTemplate::parse(
        "# a comment\n\n  user = \"[INST] {user}\"\n   \" [/INST]\"\nsystem=\"a\\tb\\n\\\"c\\\"\\\\\"\n", "test");
    CHECK(t.user() == "[INST] {user} [/INST]");
    CHECK(t.system() == "a\tb\n\"c\"\\");
    CHECK(t.assistant() == "{assistant}");
    const std::vector<std::string> users{"x", "y"};
    const std::vector<std::string> answers{"z"};
    CHECK(t.render(users, answers) == "a\tb\n\"c\"\\[INST] x [/INST]z[INST] y [/INST]");
  }
}

TEST_CASE("template errors name the problem", "[specbench]") {
  auto fails = [](const std::string& text) {
    try {
      ChatTemplate::parse(text, "T");
    } catch (const input_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(fails("system = \"x\"\n") == "T: no `user = \"...\"` line (it must contain the {user} placeholder)");
  CHECK(fails("user = \"USER: ASSISTANT:\"") == "T: the user template \"USER: ASSISTANT:\" has no {user} placeholder");
  CHECK(fails("user = \"{user}\"\nassistant = \"A\"") == "T: the assistant template \"A\" has no {assistant} placeholder");
  CHECK(fails("user = \"{user}\"\nprompt = \"x\"") == "T line 2: unknown key 'prompt' (the keys are system, user, assistant)");
  CHECK(fails("user = \"{user}\"\nuser = \"{user}\"") == "T line 2: 'user' is given twice");
  CHECK(fails("user = \"{user}\\q\"") == "T line 1: unknown escape \\q (use \\n \\t \\\" \\\\)");
  CHECK(fails("user = \"{user}") == "T line 1: the string is not closed with \"");
  CHECK(fails("user = \"{user}\" x") == "T line 1: unexpected text after the closing \"");
  CHECK(fails("user = {user}") == "T line 1: expected a double-quoted string");
  CHECK(fails("\"x\"\nuser = \"{user}\"") == "T line 1: a continuation string needs a `key = \"...\"` line before it");
  CHECK(fails("user \"{user}\"") == "T line 1: expected `key = \"value\"`");
  CHECK_THROWS_WITH(ChatTemplate::load(kFixtures / "no_user.template"),
                    Catch::Contains("no_user.template: the user template \"USER: ASSISTANT:\" has no {user} placeholder"));
  CHECK_THROWS_WITH(ChatTemplate::load(kFixtures / "absent.template"), Catch::Contains("absent.template: no such file"));
  CHECK(ChatTemplate::builtin(" Vicuna").user() == ChatTemplate::builtin("vicuna").user());  // as people write names
  CHECK_THROWS_WITH(ChatTemplate::builtin("chatml"),
                    "unknown template 'chatml'; the built-in templates are: vicuna (or give a file with --template-file)");
}

// ---- jsonl -----------------------------------------------------------------------------------

TEST_CASE("the jsonl loaders read the fixtures", "[specbench]") {
  const auto questions = load_questions(kFixtures / "specbench/question.jsonl");
  REQUIRE(questions.size() == 3);
  CHECK(questions[0].id == 1);
  CHECK(questions[0].category == "writing");
  CHECK(questions[0].turns.size() == 2);
  CHECK(questions[2].turns[0].find('\n') != std::string::npos);
  const auto answers = load_answers(kFixtures / "specbench/vicuna-7b-v1.3-greedy.jsonl");
  REQUIRE(answers.size() == 3);
  CHECK(answers[0].turns[1].starts_with("Clouds"));
  CHECK(answers[0].recorded_tokens == std::vector<int>{26, 24});
}

TEST_CASE("jsonl errors name the file and line", "[specbench]") {
  CHECK_THROWS_WITH(load_questions(kFixtures / "malformed.jsonl"),
                    Catch::Contains("malformed.jsonl line 2: malformed JSON"));
  CHECK_THROWS_WITH(load_questions(kFixtures / "absent.jsonl"),
                    Catch::Contains("questions file ") && Catch::Contains("absent.jsonl: no such file"));
  auto question_error = [](const std::string& text) {
    const fs::path file = temp_file("questions.jsonl", text);
    try {
      load_questions(file);
    } catch (const input_error& e) {
      const std::string message = e.what();
      return message.substr(message.find(" line ") + 1);
    }
    return std::string("no error");
  };
  CHECK(question_error("[1, 2]\n") == "line 1: expected a JSON object");
  CHECK(question_error("\n{\"category\": \"qa\", \"turns\": [\"x\"]}\n") == "line 2: \"question_id\" is missing or not an integer");
  CHECK(question_error("{\"question_id\": 1, \"turns\": [\"x\"]}") == "line 1: \"category\" is missing or not a non-empty string");
  CHECK(question_error("{\"question_id\": 1, \"category\": \"qa\", \"turns\": []}") ==
        "line 1: \"turns\" is missing or not a non-empty list of strings");
  CHECK(question_error("{\"question_id\": 1, \"category\": \"qa\", \"turns\": [3]}") ==
        "line 1: \"turns\" holds a value that is not a string");
  CHECK(question_error("{\"question_id\": 1, \"category\": \"qa\", \"turns\": [\"x\"]}\n"
                       "{\"question_id\": 1, \"category\": \"qa\", \"turns\": [\"y\"]}") ==
        "line 2: question_id 1 appears twice");
  CHECK_THROWS_WITH(load_questions(temp_file("empty.jsonl", "\n\n")), Catch::Contains("has no entries"));

  auto answer_error = [](const std::string& text) {
    const fs::path file = temp_file("answers.jsonl", text);
    try {
      load_answers(file);
    } catch (const input_error& e) {
      const std::string message = e.what();
      return message.substr(message.find(" line ") + 1);
    }
    return std::string("no error");
  };
  CHECK(answer_error("{\"question_id\": 1}") == "line 1: \"choices\" is missing or not a list of objects");
  CHECK(answer_error("{\"question_id\": 1, \"choices\": [{\"turns\": \"x\"}]}") ==
        "line 1 choices[0]: \"turns\" is missing or not a non-empty list of strings");
  CHECK(answer_error("{\"question_id\": 1, \"choices\": [{\"turns\": [\"x\"], \"new_tokens\": [1, 2]}]}") ==
        "line 1: \"new_tokens\" is not a list with one count per turn");}

TEST_CASE("jsonl: a number out of double range is malformed input (internal error: out_of_range.406)", "[specbench]") {
  // Issue 20 (found by fuzzing): 1e400 escaped read_jsonl as an internal error without file or line.
  const fs::path file = temp_file("huge_number.jsonl", "{\"question_id\": 1e400}\n");
  CHECK_THROWS_AS(load_questions(file), input_error);
  CHECK_THROWS_WITH(load_questions(file),
                    Catch::Contains("huge_number.jsonl line 1: malformed JSON") && Catch::Contains("1e400"));
}

TEST_CASE("jsonl: question_id and new_tokens wider than int are refused (they were truncated)", "[specbench]") {
  // Issue 20: 4294967297 became question 1, so a question could be paired with the wrong answer.
  CHECK_THROWS_WITH(load_questions(temp_file("wide_id.jsonl",
                                             "{\"question_id\": 4294967297, \"category\": \"qa\", \"turns\": [\"x\"]}")),
                    Catch::Contains("line 1: \"question_id\" 4294967297 does not fit in an int"));
  CHECK_THROWS_WITH(load_answers(temp_file("wide_negative_id.jsonl", "{\"question_id\": -2147483649, \"choices\": []}")),
                    Catch::Contains("line 1: \"question_id\" -2147483649 does not fit in an int"));
  CHECK_THROWS_WITH(load_answers(temp_file("wide_count.jsonl",
                                           "{\"question_id\": 1, \"choices\": [{\"turns\": [\"x\"], \"new_tokens\": [4294967300]}]}")),
                    Catch::Contains("line 1: \"new_tokens\" holds 4294967300, not a count in [0, 2147483647]"));
  CHECK_THROWS_WITH(load_answers(temp_file("negative_count.jsonl",
                                           "{\"question_id\": 1, \"choices\": [{\"turns\": [\"x\"], \"new_tokens\": [-3]}]}")),
                    Catch::Contains("\"new_tokens\" holds -3"));
  CHECK(load_questions(temp_file("widest_id.jsonl", "{\"question_id\": 2147483647, \"category\": \"qa\", \"turns\": [\"x\"]}"))
            .front()
            .id == 2147483647);
}

// ---- tokenisation and the corpus (need the Llama 2 tokenizer) -------------------------------

TEST_CASE("the tokenizer treats <s> and </s> as special ids and encodes each chunk separately", "[specbench]") {
  const auto model = specdec::testing::data_file("tokenizers/llama2.model");
  if (!model) return;
  const Tokenizer tokenizer(*model);
  CHECK(tokenizer.vocab_size() == 32000);
  CHECK(tokenizer.bos() == 1);
  CHECK(tokenizer.eos() == 2);
  // "A chat" gets the dummy-prefix space: "▁A" (319) "▁chat" (13563).
  CHECK(tokenizer.encode("<s>A chat") == std::vector<token_t>{1, 319, 13563});
  const auto hi = tokenizer.encode("Hi");
  const auto user = tokenizer.encode("USER: x");
  std::vector<token_t> expected{1};
  expected.insert(expected.end(), hi.begin(), hi.end());
  expected.push_back(2);
  expected.insert(expected.end(), user.begin(), user.end());
  CHECK(tokenizer.encode("<s>Hi</s>USER: x") == expected);
  CHECK(tokenizer.encode("</s></s>") == std::vector<token_t>{2, 2});
  CHECK_THROWS_WITH(Tokenizer(kFixtures / "vicuna.template"), Catch::Contains("is not a SentencePiece model"));
  CHECK_THROWS_WITH(Tokenizer(kFixtures / "absent.model"), Catch::Contains("absent.model: no such file"));
}

TEST_CASE("the corpus pairs questions with answers and replays turn 2 on top of turn 1's answer", "[specbench]") {
  const auto model = specdec::testing::data_file("tokenizers/llama2.model");
  if (!model) return;
  const Tokenizer tokenizer(*model);
  const ChatTemplate vicuna = ChatTemplate::builtin("vicuna");
  const auto questions = load_questions(kFixtures / "specbench/question.jsonl");
  const auto answers = load_answers(kFixtures / "specbench/vicuna-7b-v1.3-greedy.jsonl");

  const Corpus corpus = build_corpus(questions, answers, tokenizer, vicuna, {});
  REQUIRE(corpus.turns.size() == 4);
  CHECK(corpus.categories == std::vector<std::string>{"writing", "qa", "rag"});
  CHECK(corpus.stop_token == 2);
  const Turn& first = corpus.turns[0];
  const Turn& second = corpus.turns[1];
  CHECK(first.prompt == tokenizer.encode(vicuna.render(std::span(questions[0].turns).first(1), {})));
  CHECK(first.answer == tokenizer.encode(answers[0].turns[0]));
  std::vector<token_t> history = first.prompt;
  history.insert(history.end(), first.answer.begin(), first.answer.end());
  history.push_back(2);
  REQUIRE(second.prompt.size() > history.size());
  CHECK(std::equal(history.begin(), history.end(), second.prompt.begin()));
  CHECK(second.index == 1);
  const TokenCountCheck check = check_token_counts(corpus);
  CHECK(check.turns == 4);
  CHECK(check.exact == 4);

  SECTION("filters") {
    const std::vector<std::string> qa{"qa"};
    const Corpus only_qa = build_corpus(questions, answers, tokenizer, vicuna, {qa, 0, {}});
    REQUIRE(only_qa.turns.size() == 1);
    CHECK(only_qa.turns[0].question_id == 2);
    CHECK(build_corpus(questions, answers, tokenizer, vicuna, {{}, 3, {}}).turns.size() == 3);
    const std::vector<std::string> poetry{"poetry"};
    CHECK_THROWS_WITH(build_corpus(questions, answers, tokenizer, vicuna, {poetry, 0, {}}),
                      "unknown category 'poetry'; the questions file has: writing, qa, rag");
    // As people write them (issue 49): a list with blanks and empty items, any case.
    const std::vector<std::string> written{"QA, ", "Rag"};
    CHECK(build_corpus(questions, answers, tokenizer, vicuna, {written, 0, {}}).categories ==
          std::vector<std::string>{"qa", "rag"});
    const std::vector<std::string> none{","};
    CHECK_THROWS_WITH(build_corpus(questions, answers, tokenizer, vicuna, {none, 0, {}}),
                      "no category is named; the questions file has: writing, qa, rag");
  }
  SECTION("a question without an answer, or with a different number of turns") {
    CHECK_THROWS_WITH(build_corpus(questions, load_answers(kFixtures / "answers_missing.jsonl"), tokenizer, vicuna, {}),
                      "question 3 has no answer in the answers file");
    auto short_answers = answers;
    short_answers[0].turns.pop_back();
    CHECK_THROWS_WITH(build_corpus(questions, short_answers, tokenizer, vicuna, {}),
                      "question 1 has 2 turns but its answer has 1");
  }
  SECTION("an answer containing </s> is bad input, not a decoder bug (the output differed)") {
    // Issue 20: the answer's "</s>" became the stop token and the replay ended early.
    auto with_eos = answers;
    with_eos[1].turns[0] = "Paris.</s> And more.";
    CHECK_THROWS_AS(build_corpus(questions, with_eos, tokenizer, vicuna, {}), input_error);
    CHECK_THROWS_WITH(build_corpus(questions, with_eos, tokenizer, vicuna, {}),
                      Catch::Matches("question 2 turn 1: the answer contains the end-of-sequence piece '</s>' \\(token "
                                     "[0-9]+ of [0-9]+\\), which would end its replay early"));
  }
}

TEST_CASE("the bundled answers re-tokenise to the token counts recorded with them", "[specbench][data]") {
  const auto model = specdec::testing::data_file("tokenizers/llama2.model");
  const auto questions = specdec::testing::data_file("specbench/question.jsonl");
  const auto answers = specdec::testing::data_file("specbench/vicuna-7b-v1.3-greedy.jsonl");
  if (!model || !questions || !answers) return;
  const Corpus corpus = build_corpus(load_questions(*questions), load_answers(*answers), Tokenizer(*model),
                                     ChatTemplate::builtin("vicuna"), {});
  const TokenCountCheck check = check_token_counts(corpus);
  CHECK(corpus.turns.size() == 560);
  CHECK(check.turns == 560);
  // A few answers were cut at the 1024-token limit (no EOS was generated); all others match.
  CHECK(check.exact >= check.turns * 99 / 100);
  CHECK(check.max_difference <= 2);
}

// ---- combinations and the runner -------------------------------------------------------------

TEST_CASE("combinations are found by their drafters' names in any order", "[specbench]") {
  const std::vector<std::string> one{"empty"};
  CHECK(find_combination(one).name() == "empty");
  const std::vector<std::string> joined{"empty,frequent"};
  CHECK(find_combination(joined).name() == "frequent,empty");
  const std::vector<std::string> separate{"empty", "frequent"};
  CHECK(&find_combination(separate) == &find_combination(joined));
  const std::vector<std::string> unknown{"nope"};
  CHECK_THROWS_WITH(find_combination(unknown), Catch::StartsWith("unknown drafter 'nope'; the drafters are: empty, frequent, "));
  const std::vector<std::string> twice{"empty,frequent", "empty"};
  CHECK_THROWS_WITH(find_combination(twice), "drafter 'empty' is given twice; a combination merges different drafters");
  // As people write them (issue 49): blanks, empty items, any case; a list of nothing is refused.
  const std::vector<std::string> written{" Frequent, ,EMPTY,"};
  CHECK(&find_combination(written) == &find_combination(joined));
  const std::vector<std::string> none{", "};
  CHECK_THROWS_WITH(find_combination(none), Catch::StartsWith("no drafter is named; the drafters are: empty, frequent, "));
  const std::vector<std::string> twice_in_case{"empty", "EMPTY"};
  CHECK_THROWS_WITH(find_combination(twice_in_case), "drafter 'empty' is given twice; a combination merges different drafters");
  const std::vector<std::string> absent{"pld,tree"};
  CHECK_THROWS_WITH(find_combination(absent), Catch::StartsWith("no compiled combination of the drafters 'pld,tree'; "
                                                                "the combinations are: empty; frequent; frequent,empty"));
  const std::vector<std::string> names = drafter_names();
  REQUIRE(names.size() >= 2);
  CHECK(names[0] == "empty");
  CHECK(names[1] == "frequent");
  CHECK(std::set<std::string>(names.begin(), names.end()).size() == names.size());
}

TEST_CASE("every combination replays the hand-made corpus losslessly", "[specbench]") {
  const Corpus corpus = hand_made_corpus();
  // rest's datastore: the first turn's answer, so that its drafts are partly right on turn 2.
  specdec::TokenDocuments docs;
  docs.add(std::vector<std::uint32_t>(corpus.turns[0].answer.begin(), corpus.turns[0].answer.end()));
  const fs::path datastore = temp_file("replay.ds", "");
  specdec::build_datastore(docs, datastore, {.vocab_size = corpus.vocab_size});
  // ngram's model, from the same answer; staged's draft model: a tiny model of the corpus's vocabulary.
  DrafterResources resources(datastore);
  resources.ngram = temp_file("replay.ngram", "");
  specdec::build_ngram_model(docs, resources.ngram, {.vocab_size = corpus.vocab_size});
  resources.draft_model = temp_file("replay_draft.bin", "");
  specdec::testing::write_tiny_llama(resources.draft_model, {.vocab = corpus.vocab_size, .seq_len = 64});
  for (const Combination& combination : combinations()) {
    CAPTURE(combination.name());
    if (!combination.replay) {  // feature drafters: `model` only
      const std::string& first = combination.drafters[0];
      CHECK((first == "dresd" || first == "eagle"));
      continue;
    }
    const ReplayOptions options{.budget = 64, .resources = resources};
    const ReplayRun run = combination.replay(corpus, options);
    REQUIRE(run.turns.size() == corpus.turns.size());
    CHECK(run.drafters == combination.drafters);
    for (std::size_t t = 0; t < corpus.turns.size(); ++t)
      CHECK(run.turns[t].tokens == static_cast<std::int64_t>(corpus.turns[t].answer.size()) + 1);
    const Report report = summarise(corpus, run, options);
    CHECK(report.overall.turns == 3);
    CHECK(report.overall.tokens == 8 + 5 + 1);
    REQUIRE(report.categories.size() == 2);
    CHECK(report.categories[0].first == "qa");
    CHECK(report.categories[0].second.tokens == 8 + 1);
    CHECK(report.categories[1].second.steps + report.categories[0].second.steps == report.overall.steps);
    for (const auto& histogram : report.overall.accepted_by_drafter) {
      std::int64_t steps = 0;
      for (auto count : histogram) steps += count;
      CHECK(steps == report.overall.steps);
    }
    if (combination.name() == "empty") CHECK(report.overall.tau() == 1.0);
    // "frequent" drafts 13, 29892 and 278 among others: one of them is accepted in 3 of the 5
    // steps of turn 1 and in 2 of the 3 steps of turn 2; turn 3 (EOS only) takes one step.
    if (combination.name() == "frequent") {
      CHECK(report.overall.steps == 9);
      CHECK(report.overall.accepted_by_drafter[0] == std::vector<std::int64_t>{4, 5});
    }
  }
}

namespace {

/// Counts what reaches a coster.
struct CountingCoster final : StepCoster {
  int prefills = 0, forwards = 0, turns = 0;
  void prefill(std::span<const token_t>) override { ++prefills; }
  void forward(const specdec::TreeView&) override { ++forwards; }
  void commit(std::span<const specdec::node_t>) override {}
  std::pair<double, double> turn_seconds(std::int64_t) override {
    ++turns;
    return {1.0, 2.0};
  }
};

}  // namespace

TEST_CASE("a warm history: the turns left out teach tree_history, neither costed nor counted", "[specbench]") {
  // Turns 1 and 2 give the same answer; a subsample of 2 of the 4 keeps turns 0 and 2.
  Corpus corpus;
  corpus.vocab_size = 32000;
  corpus.stop_token = 2;
  corpus.categories = {"qa"};
  std::vector<token_t> repeated;
  for (token_t t = 0; t < 24; ++t) repeated.push_back(3000 + 7 * t);
  corpus.turns.push_back({1, "qa", 0, {1, 500}, {800, 900, 1000}, -1});
  corpus.turns.push_back({2, "qa", 0, {1, 600}, repeated, -1});
  corpus.turns.push_back({3, "qa", 0, {1, 700}, repeated, -1});
  corpus.turns.push_back({4, "qa", 0, {1, 750}, {810}, -1});
  const std::vector<std::string> names{"tree_history"};
  const Combination& combination = find_combination(names);
  std::array<ReplayRun, 2> runs;
  for (const bool warm : {false, true}) {
    CAPTURE(warm);
    Corpus sampled = corpus;
    sample_turns(sampled, 2, warm);
    CountingCoster coster;
    runs[warm] = combination.replay(sampled, {.budget = 64, .resources = {}, .coster = &coster});
    REQUIRE(runs[warm].turns.size() == 2);
    CHECK(coster.prefills == 2);
    CHECK(coster.turns == 2);
    CHECK(coster.forwards == runs[warm].turns[0].stats.steps + runs[warm].turns[1].stats.steps);
    CHECK(runs[warm].turns[1].tokens == 25);
    CHECK(runs[warm].turns[1].cost_seconds == 1.0);
  }
  // Cold, turn 2 is new to tree_history; warm, it repeats the history's turn 1.
  CHECK(runs[0].turns[1].stats.steps == 25);
  CHECK(runs[1].turns[1].stats.steps * 3 <= runs[0].turns[1].stats.steps);
  CHECK(runs[0].turns[0].stats.steps == runs[1].turns[0].stats.steps);
}

TEST_CASE("rest without a datastore, or with one of a larger vocabulary, is an input error", "[specbench]") {
  const Corpus corpus = hand_made_corpus();
  const Combination& rest = find_combination(std::vector<std::string>{"rest"});
  CHECK_THROWS_AS(rest.replay(corpus, {.budget = 8, .resources = {}}), input_error);
  CHECK_THROWS_WITH(rest.replay(corpus, {.budget = 8, .resources = {}}),
                    Catch::StartsWith("the drafter rest needs a token datastore: --datastore FILE"));
  specdec::TokenDocuments docs;
  docs.add(std::vector<std::uint32_t>{1, 2, 40000});
  const fs::path datastore = temp_file("large_vocab.ds", "");
  specdec::build_datastore(docs, datastore);
  CHECK_THROWS_WITH(rest.replay(corpus, {.budget = 8, .resources = DrafterResources(datastore)}),
                    Catch::Contains("has vocabulary size 40001, larger than the target's 32000"));
  CHECK_THROWS_WITH(rest.replay(corpus, {.budget = 8, .resources = DrafterResources("/nonexistent.ds")}),
                    Catch::Contains("/nonexistent.ds"));
}

TEST_CASE("reports as JSON and SVG", "[specbench]") {
  const Corpus corpus = hand_made_corpus();
  const std::vector<std::string> names{"frequent,empty"};
  const ReplayOptions options{.budget = 5, .resources = {}};
  const Report report = summarise(corpus, find_combination(names).replay(corpus, options), options);

  const auto j = to_json(report);
  CHECK(j["drafters"] == nlohmann::ordered_json({"frequent", "empty"}));
  CHECK(j["budget"] == 5);
  for (const auto* part : {&j["overall"], &j["categories"]["qa"], &j["categories"]["rag"]}) {
    for (const char* key : {"tau", "steps", "tokens", "draft_nodes_per_step", "draft_us_per_step"})
      CHECK(part->contains(key));
  }
  CHECK(j["overall"]["tokens"] == 14);
  CHECK(j["overall"]["draft_nodes_per_step"] == 5.0);  // 8 tokens drafted, budget 5
  CHECK(j["accepted_length_histogram"]["frequent"] == nlohmann::ordered_json(report.overall.accepted_by_drafter[0]));

  const std::string svg = histogram_svg(report);
  CHECK(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
  CHECK(svg.ends_with("</svg>\n"));
  std::size_t bars = 0;
  for (std::size_t at = svg.find("<title>"); at != std::string::npos; at = svg.find("<title>", at + 1)) ++bars;
  CHECK(bars == 2 * 2);  // two drafters, accepted lengths 0 and 1
}
