// specbench --batch (bench/specbench/batch.hpp, batch.cpp): the list of batch sizes, the batched
// replay and model runners (plain and speculative side by side, lossless per request), the report,
// a B the device cannot hold left out.
#include <catch2/catch.hpp>

#include <climits>
#include <filesystem>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include <specdec/targets/llama2c.hpp>
#include <specdec/tokenizers/llama2c_tokenizer.hpp>

#include "batch.hpp"
#include "input_error.hpp"
#include "registry.hpp"
#include "support/tiny_llama.hpp"
#include "tasks.hpp"

using namespace specbench;
namespace fs = std::filesystem;

namespace {

/// Three turns made by hand (Llama-sized vocabulary, EOS 2); the first repeats its prompt, which
/// copy drafters find.
Corpus hand_made_corpus() {
  Corpus corpus;
  corpus.vocab_size = 32000;
  corpus.stop_token = 2;
  corpus.categories = {"qa"};
  corpus.turns.push_back({1, "qa", 0, {1, 500, 600, 700, 800}, {500, 600, 700, 800, 500, 600, 700, 800, 500, 600, 700, 900}, -1});
  corpus.turns.push_back({2, "qa", 0, {1, 500, 13}, {278, 278, 278, 4000}, -1});
  corpus.turns.push_back({3, "qa", 0, {1, 7}, {}, -1});
  return corpus;
}

}  // namespace

TEST_CASE("batch sizes: a list of whole numbers in [1, 1024] sorted and anything else an input error", "[specbench][batch]") {
  CHECK(parse_batch_sizes("1,2,4") == std::vector<int>{1, 2, 4});
  CHECK(parse_batch_sizes("64,1,8") == std::vector<int>{1, 8, 64});
  CHECK(parse_batch_sizes("1024") == std::vector<int>{1024});
  // As people write lists and numbers (issue 49): blanks, empty items, 08, +4, 1e3.
  CHECK(parse_batch_sizes("1, 2,, 4,") == std::vector<int>{1, 2, 4});
  CHECK(parse_batch_sizes(" 08 ,+4,1e3") == std::vector<int>{4, 8, 1000});
  for (const char* bad : {"", ",", " , ", "0", "1025", "-1", "4x", "1.5", "0x10", "1 2", "99999999999"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(parse_batch_sizes(bad), input_error);
  }
  CHECK_THROWS_WITH(parse_batch_sizes("2,4,2"), "batch size 2 is listed twice in '2,4,2'");
  CHECK_THROWS_WITH(parse_batch_sizes("0"),
                    "expected batch sizes: whole numbers in [1, 1024], comma-separated, got '0'");
}

TEST_CASE("a batch's start-up calibration times the largest step, within half the positions and the forward's most",
          "[specbench][batch]") {
  CHECK(batch_calibration_size({1, 4}, 7, 4096, INT_MAX) == 32);      // 4 requests of 8 nodes
  CHECK(batch_calibration_size({4, 16, 64}, 64, 4096, INT_MAX) == 2048);  // half of 4096 positions
  CHECK(batch_calibration_size({4, 16, 64}, 64, 4096, 256) == 256);   // a device forward's most
  CHECK(batch_calibration_size({1}, 300, 128, INT_MAX) == 301);       // one request's tree, whatever the positions
  CHECK(batch_calibration_size({1}, 300, 128, 256) == 256);
}

TEST_CASE("replay batch: every turn reproduces its answer and speculative equals plain for any B", "[specbench][batch]") {
  const Corpus corpus = hand_made_corpus();
  BatchOptions options;
  options.sizes = {1, 2, 5};
  options.budget = 8;
  const BatchRun run = find_combination(std::vector<std::string>{"pld"}).batch.replay(corpus, options);
  REQUIRE(run.rows.size() == 3);
  CHECK(run.requests == 3);
  const std::int64_t tokens = 13 + 5 + 1;  // answers + stop tokens
  for (const BatchRow& row : run.rows) {
    CAPTURE(row.batch);
    CHECK(row.equal_to_plain == 3);
    CHECK(row.plain.tokens == tokens);
    CHECK(row.speculative.tokens == tokens);
    CHECK(row.plain.tau() == 1.0);
    CHECK(row.speculative.forwards <= row.plain.forwards);
    for (std::size_t t = 0; t < corpus.turns.size(); ++t) {
      std::vector<token_t> expected = corpus.turns[t].answer;
      expected.push_back(corpus.stop_token);
      CHECK(row.plain.outputs[t] == expected);
    }
  }
  CHECK(run.rows[0].plain.forwards == tokens);  // one request at a time: one forward per token
  CHECK(run.rows[2].plain.forwards == 13);       // all at once: the longest answer + stop
  CHECK(run.rows[0].speculative.tau() > 1.0);   // pld copies turn 1's repeated prompt

  const BatchReport report{run, "replay", "hand-made corpus", "ReplayBatchTarget", 8, ""};
  CHECK(report.lossless());
  std::ostringstream out;
  print_batch_report(out, report);
  CHECK_THAT(out.str(), Catch::Contains("lossless: every request's speculative output equals its plain output (3 requests"));
  const auto j = to_json(report);
  CHECK(j["rows"].size() == 3);
  CHECK(j["rows"][2]["batch"] == 5);
  CHECK(j["rows"][0]["plain"]["forwards"] == tokens);
  CHECK(j["lossless"] == true);
  const std::string svg = batch_svg(report);
  CHECK(svg.rfind("<svg ", 0) == 0);
  CHECK_THAT(svg, Catch::Contains(">speculative</text>") && Catch::Contains("<polyline"));

  BatchReport broken = report;
  broken.run.rows[1].equal_to_plain = 2;
  CHECK_FALSE(broken.lossless());
  out.str("");
  print_batch_report(out, broken);
  CHECK_THAT(out.str(), Catch::Contains("NOT LOSSLESS: B = 2: the speculative output equals the plain output for 2 of 3"));
}

TEST_CASE("batch table: a B the device cannot hold is left out, its row says why, nothing measured is an error",
          "[specbench][batch]") {
  const Corpus corpus = hand_made_corpus();
  BatchOptions options;
  options.sizes = {1, 2, 5};
  options.budget = 8;
  // A device that holds two sequences (B = 5 decodes the three turns in three slots).
  options.timed = [](int slots) -> std::unique_ptr<TimedBatch> {
    if (slots > 2) throw batch_does_not_fit(std::to_string(slots) + " slots do not fit");
    return nullptr;
  };
  const auto& runners = find_combination(std::vector<std::string>{"pld"}).batch;
  const BatchRun run = runners.replay(corpus, options);
  REQUIRE(run.rows.size() == 3);
  CHECK(run.rows[0].refused.empty());
  CHECK(run.rows[1].equal_to_plain == 3);
  CHECK(run.rows[2].batch == 5);
  CHECK(run.rows[2].refused == "3 slots do not fit");
  CHECK(run.rows[2].plain.forwards == 0);

  const BatchReport report{run, "replay", "hand-made corpus", "ReplayBatchTarget", 8, ""};
  CHECK(report.lossless());
  std::ostringstream out;
  print_batch_report(out, report);
  CHECK_THAT(out.str(), Catch::Contains("\n    5 not run: 3 slots do not fit\n") &&
                            Catch::Contains("(3 requests, at every B that ran)"));
  const auto j = to_json(report);
  CHECK(j["rows"][2] == nlohmann::ordered_json{{"batch", 5}, {"refused", "3 slots do not fit"}});
  CHECK(j["lossless"] == true);
  const std::string svg = batch_svg(report);
  CHECK_THAT(svg, Catch::Contains("not run (the device cannot hold them): B = 5") && !Catch::Contains(">5</text>"));

  options.sizes = {3, 5};  // nothing fits: the last refusal is the error
  CHECK_THROWS_AS(runners.replay(corpus, options), batch_does_not_fit);
}

TEST_CASE("model batch: plain batched decoding is greedy decoding and speculation does not change it",
          "[specbench][batch]") {
  const fs::path dir = fs::temp_directory_path() / "specbench_batch_test";
  fs::create_directories(dir);
  specdec::testing::write_tiny_llama(dir / "tiny.bin");
  specdec::testing::write_tiny_tokenizer(dir / "tiny_tok.bin");
  auto model = std::make_shared<const specdec::Llama2cModel>(specdec::Llama2cModel::load(dir / "tiny.bin"));
  const auto tokenizer = specdec::Llama2cTokenizer::load(dir / "tiny_tok.bin", model->config().vocab_size);
  const std::vector<std::string> stories{"stories"};
  const ModelBench bench = make_model_bench(model, tokenizer, find_tasks(stories), 40, 3, nullptr);
  BatchOptions options;
  options.sizes = {1, 2};
  options.budget = 16;
  const BatchRun run = find_combination(std::vector<std::string>{"casd"}).batch.model(bench, options);
  REQUIRE(run.rows.size() == 2);
  specdec::Llama2cTarget single(model);
  for (const BatchRow& row : run.rows) {
    CAPTURE(row.batch);
    CHECK(row.equal_to_plain == 3);
    for (std::size_t p = 0; p < bench.prompts.size(); ++p)
      CHECK(row.plain.outputs[p] ==
            single.generate(bench.prompts[p].tokens, bench.prompts[p].max_new_tokens, bench.stop_tokens));
  }
  CHECK(run.rows[1].plain.forwards < run.rows[0].plain.forwards);  // two requests share each forward
}

TEST_CASE("batch rounds: the first round's passes stay, and every round's outputs are checked", "[specbench][batch]") {
  // Two requests; the speculative pass of round 2 gets request 1 wrong.
  int plain_passes = 0, speculative_passes = 0;
  const auto pass = [](double seconds, std::vector<std::vector<token_t>> outputs) {
    BatchPass p;
    p.tokens = 4;
    p.seconds = seconds;
    p.outputs = std::move(outputs);
    return p;
  };
  BatchRow row{.batch = 2};
  detail::run_rounds(
      row, RoundRule{3, 0.0},
      [&] { return pass(++plain_passes, {{1, 2}, {3, 4}}); },
      [&] { return ++speculative_passes == 2 ? pass(1.0, {{1, 2}, {3, 5}}) : pass(1.0, {{1, 2}, {3, 4}}); });
  CHECK(plain_passes == 3);
  CHECK(speculative_passes == 3);
  CHECK(row.rounds.count() == 3);
  CHECK(row.plain.seconds == 1.0);  // the first round's pass
  CHECK(row.equal_to_plain == 1);
  const std::vector<double> speedups = row.rounds.speedups(), aa = row.rounds.plain_to_plain();
  REQUIRE(speedups.size() == 3);
  CHECK(speedups[1] == Approx(2.0));  // 4 tokens in 1 s against 4 tokens in 2 s
  CHECK(speedups[2] == Approx(3.0));
  REQUIRE(aa.size() == 2);
  CHECK(aa[0] == Approx(0.5));
  CHECK(aa[1] == Approx(2.0 / 3.0));

  BatchRow until_seconds{.batch = 1};
  int passes = 0;
  detail::run_rounds(
      until_seconds, RoundRule{1, 2.5}, [&] { return ++passes, pass(1.0, {{1}}); }, [&] { return pass(1.0, {{1}}); });
  CHECK(passes == 3);  // 1 s a pass: three rounds before each arm has run 2.5 s
  CHECK(until_seconds.equal_to_plain == 1);
}
