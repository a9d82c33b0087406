// specbench's cost tables: loading, interpolation, the table coster's sums, the contexts a
// calibration keeps, the machine probes and the table as text.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <sstream>
#include <string>

#include <specdec/draft_budget.hpp>
#include <specdec/testing/laid_out_tree.hpp>

#include "support/temp_dir.hpp"

#include "corpus.hpp"
#include "calibrate.hpp"
#include "cost_report.hpp"
#include "cost_table.hpp"
#include "costers.hpp"
#include "machine_probes.hpp"
#include "input_error.hpp"

using namespace specbench;

namespace {

// In a directory of its own: ctest runs each test case as a process, two at a time in CI.
CostTable table_from(const std::string& json) {
  const specdec::testing::TempDir dir;
  return CostTable::load(dir.write("table.json", json));
}

const char* kTable = R"({"machine": "test", "nodes": [1, 4, 16],
  "contexts": [{"context": 100, "plain_us": 10, "forward_us": [10, 40, 100]},
               {"context": 300, "plain_us": 30, "forward_us": [30, 60, 300]}]})";

}  // namespace

TEST_CASE("a cost table interpolates between measured sizes and contexts", "[cost]") {
  const CostTable t = table_from(kTable);
  CHECK(t.metadata["machine"] == "test");
  CHECK(t.forward_seconds(1, 100) == Approx(10e-6));
  CHECK(t.forward_seconds(2, 100) == Approx(20e-6));    // a third of the way from 1 to 4
  CHECK(t.forward_seconds(10, 100) == Approx(70e-6));   // half way from 4 to 16
  CHECK(t.forward_seconds(4, 200) == Approx(50e-6));    // half way between the contexts
  CHECK(t.forward_seconds(16, 50) == Approx(100e-6));   // below the contexts: the nearest
  CHECK(t.forward_seconds(16, 900) == Approx(300e-6));  // above: the nearest
  CHECK(t.plain_seconds(250) == Approx(25e-6));
  CHECK_THROWS_AS(t.forward_seconds(17, 100), input_error);
  // What the file holds comes back.
  CHECK(t.to_json()["contexts"][1]["forward_us"][2] == 300.0);
}

TEST_CASE("a cost table is the library's cost model of --budget auto", "[cost]") {
  static_assert(specdec::CostModel<CostTable>);
  const specdec::AnyCostModel cost = table_from(kTable);
  CHECK(cost.step_seconds(10, 100) == Approx(70e-6));
  CHECK(cost.step_seconds(4, 200) == Approx(50e-6));
}

TEST_CASE("a batch's cost model extends the table linearly past its largest size", "[cost]") {
  static_assert(specdec::CostModel<BatchCostModel>);
  const BatchCostModel cost{table_from(kTable)};
  CHECK(cost.step_seconds(10, 100) == Approx(70e-6));   // inside: the table
  CHECK(cost.step_seconds(16, 300) == Approx(300e-6));
  // Beyond 16 nodes: the slope over the last doubling, from 4 (the largest size <= 16 / 2) to 16.
  CHECK(cost.step_seconds(28, 100) == Approx(160e-6));  // 100 + 12 x 5 us
  CHECK(cost.step_seconds(1016, 300) == Approx(300e-6 + 1000 * 20e-6));
}

TEST_CASE("a table coster sums the steps' forwards and the plain steps of the same tokens", "[cost]") {
  const CostTable t = table_from(kTable);
  TableCoster coster(t);
  coster.prefill(std::array<token_t, 3>{1, 2, 3});
  const specdec::testing::LaidOutTree four({-1, 0, 1, 1}, {3, 4, 5, 6});
  coster.forward(four.view(100));   // 40 us
  const specdec::testing::LaidOutTree one({-1}, {5});
  coster.forward(one.view(102));    // 10.2 us
  const auto [spec, plain] = coster.turn_seconds(3);  // plain steps at 100, 101, 102
  CHECK(spec == Approx(50.2e-6));
  CHECK(plain == Approx((10 + 10.1 + 10.2) * 1e-6));
}

TEST_CASE("a table's matrix product figures say whether its threads add arithmetic", "[cost]") {
  auto printed = [](const std::string& gflops) {
    std::ostringstream out;
    print_cost_table(out, table_from(R"({"matrix_product_gflops": )" + gflops + R"(, "nodes": [1],
      "contexts": [{"context": 100, "plain_us": 10, "forward_us": [10]}]})"));
    return out.str();
  };
  const std::string cores = printed(R"({"1": 80.0, "2": 150.0})");
  CHECK_THAT(cores, Catch::Contains("80.0 GFLOP/s on 1 thread, 150.0 on 2 (1.88 x)"));
  CHECK_THAT(cores, !Catch::Contains("share cores"));
  const std::string siblings = printed(R"({"1": 80.0, "2": 96.0})");
  CHECK_THAT(siblings, Catch::Contains("2 threads add 20 % to one thread's arithmetic where separate cores would add "
                                       "about 100 %: they share cores"));
  // Four threads that add one core's worth share cores too.
  CHECK_THAT(printed(R"({"1": 80.0, "4": 160.0})"), Catch::Contains("4 threads add 100 %"));
  // A hand-written table's odd figures print nothing rather than fail.
  CHECK_THAT(printed(R"({"1": "fast", "2": 96.0})"), !Catch::Contains("matrix product"));
  CHECK_THAT(printed(R"({"1": 80.0})"), !Catch::Contains("matrix product"));
}

TEST_CASE("the matrix product probe measures arithmetic on one thread and on several", "[cost]") {
  const MatrixProductGflops gflops = matrix_product_gflops(2, specdec::WeightFormat::fp32);
  // 2 · 256 · 256 · 32 operations (4.2 MFLOP) a product: positive and finite, whatever the machine.
  CHECK(gflops.one_thread > 0.1);
  CHECK(gflops.all_threads > 0.1);
  CHECK(std::isfinite(gflops.one_thread));
  CHECK(std::isfinite(gflops.all_threads));
}

TEST_CASE("a calibration keeps the contexts with room for its largest tree, and the largest that has room", "[cost]") {
  CHECK(fitting_contexts({128, 512, 2048}, 4096, 128) == std::vector<int>{128, 512, 2048});
  // 2048 + 128 > 2048 positions: the largest context with room takes its place.
  CHECK(fitting_contexts({128, 512, 2048}, 2048, 128) == std::vector<int>{128, 512, 1920});
  CHECK(fitting_contexts({128, 512}, 256, 65) == std::vector<int>{128, 191});
  CHECK_THROWS_WITH(fitting_contexts({128}, 64, 65), Catch::Contains("no context of --contexts leaves room for a tree of 65"));
}

TEST_CASE("bad cost tables are refused with the field named", "[cost]") {
  CHECK_THROWS_WITH(table_from(R"({"contexts": []})"), Catch::Contains("\"nodes\" (the measured tree sizes) is missing"));
  CHECK_THROWS_WITH(table_from(R"({"nodes": [2, 4], "contexts": []})"), Catch::Contains("\"nodes\" must start at 1"));
  CHECK_THROWS_WITH(table_from(R"({"nodes": [1, 4], "contexts": [{"context": 0, "plain_us": 1, "forward_us": [1, -2]}]})"),
                    Catch::Contains("contexts[0].forward_us[1] must be a positive number of microseconds, got -2"));
  CHECK_THROWS_WITH(table_from(R"({"nodes": [1], "contexts": [{"context": 5, "plain_us": 1, "forward_us": [1]},
                                                          {"context": 5, "plain_us": 1, "forward_us": [1]}]})"),
                    Catch::Contains("contexts[1].context must be a whole number >= 0, larger than the previous"));
  CHECK_THROWS_WITH(table_from("[1, 2]"), Catch::Contains("expected a JSON object"));
}

TEST_CASE("a fixed subsample spreads over the corpus and keeps its categories in order", "[cost]") {
  Corpus corpus;
  for (int i = 0; i < 10; ++i) {
    Turn t;
    t.question_id = i;
    t.category.assign(1, i < 5 ? 'a' : 'b');
    t.prompt.assign(static_cast<std::size_t>(i + 1), 7);
    corpus.turns.push_back(t);
  }
  corpus.categories = {"a", "b"};
  Corpus sampled = corpus;
  sample_turns(sampled, 3);  // turns 0, 3, 6
  REQUIRE(sampled.turns.size() == 3);
  CHECK(sampled.turns[1].question_id == 3);
  CHECK(sampled.turns[2].question_id == 6);
  REQUIRE(sampled.categories.size() == 2);
  CHECK(sampled.categories[0] == "a");
  CHECK(sampled.categories[1] == "b");
  // prompt i + 1 tokens, no answer, stop, room 2: fits 6 positions up to i = 2.
  CHECK(positions_needed(corpus, 2) == 13);  // turn 9: 10 + 0 + 1 + 2
  CHECK(drop_turns_longer_than(corpus, 6, 2) == 7);
  CHECK(corpus.turns.size() == 3);
  CHECK(positions_needed(corpus, 2) == 6);  // the longest left, turn 2: as many as the rule allows
  CHECK(positions_needed(Corpus{}, 2) == 0);
  REQUIRE(corpus.categories.size() == 1);
  CHECK(corpus.categories[0] == "a");
}

TEST_CASE("a warm history keeps the turns a subsample leaves out before its last turn, in order", "[cost]") {
  Corpus corpus;
  for (int i = 0; i < 10; ++i) {
    Turn t;
    t.question_id = i;
    t.category = "a";
    corpus.turns.push_back(t);
  }
  corpus.categories = {"a"};
  Corpus cold = corpus;
  sample_turns(cold, 3);
  CHECK(cold.history.empty());
  sample_turns(corpus, 3, true);  // keeps turns 0, 3, 6; 1, 2, 4, 5 precede them; 7, 8, 9 precede none
  REQUIRE(corpus.turns.size() == 3);
  REQUIRE(corpus.history.size() == 4);
  const std::array<int, 4> history{1, 2, 4, 5};
  for (std::size_t h = 0; h < history.size(); ++h) CHECK(corpus.history[h].question_id == history[h]);
  CHECK(corpus.turns[0].history_end == 0);
  CHECK(corpus.turns[1].history_end == 2);
  CHECK(corpus.turns[2].history_end == 4);
}
