// `specbench model`'s runner: every combination decodes a real model losslessly with the exact
// verifier, sampling runs are reproducible by seed, and another checkpoint (another vocabulary,
// 128 positions) works with generation cut to its positions.
#include <catch2/catch.hpp>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <specdec/index/datastore_builder.hpp>
#include <specdec/index/dense_datastore_builder.hpp>
#include <specdec/index/ngram_model_builder.hpp>
#include <specdec/targets/llama2c.hpp>
#include <specdec/tokenizers/llama2c_tokenizer.hpp>

#include "input_error.hpp"
#include "model.hpp"
#include "registry.hpp"
#include "report.hpp"
#include "support/stories260k.hpp"
#include "support/tiny_llama.hpp"
#include "tasks.hpp"

using namespace specbench;
namespace fs = std::filesystem;

namespace {

/// stories260K with the first `per_task` prompts of each task, or nullopt without the data.
std::optional<ModelBench> stories_bench(int per_task, int max_new_tokens) {
  const specdec::testing::Stories260K* stories = specdec::testing::stories260k();
  if (!stories) return std::nullopt;
  const std::vector<std::string> all{"all"};
  return make_model_bench(stories->model, stories->tokenizer, find_tasks(all), max_new_tokens, per_task, nullptr);
}

std::vector<std::vector<token_t>> outputs(const ModelRun& run) {
  std::vector<std::vector<token_t>> out;
  for (const ModelTurn& t : run.turns) out.push_back(t.output);
  return out;
}

ModelRunner runner(const std::string& combination, VerifierKind verifier) {
  return find_combination(std::vector<std::string>{combination}).model[static_cast<std::size_t>(verifier)];
}

/// Exact-verifier options whose datastores (and n-gram model) hold the bench's prompts (so rest,
/// dresd and ngram draft), with the committed stories260K EAGLE head and draft model.
ModelOptions with_datastores(const ModelBench& bench, const std::string& name) {
  specdec::TokenDocuments docs;
  std::vector<float> features;
  specdec::Llama2cTarget target(bench.model);
  for (const ModelPrompt& p : bench.prompts) {
    docs.add(std::vector<std::uint32_t>(p.tokens.begin(), p.tokens.end()));
    target.prefill(p.tokens);
    features.insert(features.end(), target.prefill_features().begin(), target.prefill_features().end());
  }
  const int vocab = bench.model->config().vocab_size;
  ModelOptions options;
  options.resources.datastore = fs::temp_directory_path() / ("specbench_model_test_" + name + ".ds");
  specdec::build_datastore(docs, options.resources.datastore, {.vocab_size = vocab});
  options.resources.dense_datastore = fs::temp_directory_path() / ("specbench_model_test_" + name + ".dense");
  specdec::build_dense_datastore(docs, features, bench.model->config().dim, options.resources.dense_datastore,
                                 {.key_dim = 16, .vocab_size = vocab});
  options.resources.eagle_head = fs::path(SPECDEC_SOURCE_DIR) / "tools/eagle/heads/stories260K.eagle";
  options.resources.draft_model = fs::path(SPECDEC_SOURCE_DIR) / "tools/draft_model/models/stories260K-draft.bin";
  options.resources.ngram = fs::temp_directory_path() / ("specbench_model_test_" + name + ".ngram");
  specdec::build_ngram_model(docs, options.resources.ngram, {.vocab_size = vocab});
  return options;
}

}  // namespace

TEST_CASE("model: every combination is lossless on stories260K with the exact verifier", "[specbench][model]") {
  const auto bench = stories_bench(2, 48);
  if (!bench) return;
  REQUIRE(bench->prompts.size() == 4);
  const ModelOptions options = with_datastores(*bench, "stories260k");
  for (const Combination& c : combinations()) {
    CAPTURE(c.name());
    const ModelRun run = c.model[static_cast<std::size_t>(VerifierKind::exact)](*bench, options);
    REQUIRE(run.turns.size() == bench->prompts.size());
    for (const ModelTurn& turn : run.turns) {
      CHECK(turn.equals_plain);
      CHECK(turn.output.size() == static_cast<std::size_t>(turn.plain_tokens));
      CHECK(turn.result.stats.steps > 0);
    }
    const ModelReport report = summarise_model(*bench, run, options);
    CHECK(report.equal_to_plain == 4);
    REQUIRE(report.report.categories.size() == 2);
    CHECK(report.report.categories[0].first == "stories");
    CHECK(report.report.categories[1].first == "retell");
    if (c.name() == "empty") CHECK(report.report.overall.tau() == 1.0);
  }
}

TEST_CASE("model: dresd's search backend is reported, one it cannot build is a one-line input error",
          "[specbench][model]") {
  const auto bench = stories_bench(1, 32);
  if (!bench) return;
  ModelOptions options = with_datastores(*bench, "search");
  const ModelRunner dresd = runner("dresd", VerifierKind::exact);
  const ModelReport exact = summarise_model(*bench, dresd(*bench, options), options);
  CHECK(exact.dresd_search == "exact");
  CHECK(to_json(exact)["dresd_search"] == "exact");
  CHECK(exact.equal_to_plain == 2);
  const ModelOptions casd_options = with_datastores(*bench, "search_casd");
  const ModelReport casd = summarise_model(*bench, runner("casd", VerifierKind::exact)(*bench, casd_options), casd_options);
  CHECK(casd.dresd_search.empty());  // no dresd, no search
  CHECK_FALSE(to_json(casd).contains("dresd_search"));
  // gpu-flat runs where CUDA is built and a device is present; elsewhere it is one line naming the option.
  ModelOptions gpu = with_datastores(*bench, "search_gpu");
  gpu.resources.dresd_search.backend = "gpu-flat";
  try {
    const ModelReport report = summarise_model(*bench, dresd(*bench, gpu), gpu);
    CHECK(report.dresd_search == "gpu-flat");
    CHECK(report.equal_to_plain == 2);
  } catch (const input_error& e) {
    const std::string what = e.what();
    CHECK_THAT(what, Catch::StartsWith("--dresd-search: "));
    CHECK(what.find('\n') == std::string::npos);
  }
}

TEST_CASE("model: rejection sampling is reproducible by seed", "[specbench][model]") {
  const auto bench = stories_bench(2, 48);
  if (!bench) return;
  ModelOptions options;
  options.verifier = VerifierKind::rejection;
  options.sampling.temperature = 0.8f;
  options.seed = 5;
  const ModelRunner casd = runner("casd", VerifierKind::rejection);
  const ModelRun first = casd(*bench, options);
  CHECK(outputs(casd(*bench, options)) == outputs(first));
  options.seed = 6;
  CHECK(outputs(casd(*bench, options)) != outputs(first));
  // Sampling at temperature 0 is greedy decoding.
  options.sampling.temperature = 0.0f;
  const ModelRun greedy = runner("tree", VerifierKind::rejection)(*bench, options);
  const ModelRun exact = runner("tree", VerifierKind::exact)(*bench, ModelOptions{});
  CHECK(outputs(greedy) == outputs(exact));
}

TEST_CASE("model: conditional verification runs and reports itself lossy", "[specbench][model]") {
  const auto bench = stories_bench(2, 48);
  if (!bench) return;
  ModelOptions options;
  options.verifier = VerifierKind::conditional;
  options.conditional.delta = 0.05f;
  const ModelRun run = runner("casd", VerifierKind::conditional)(*bench, options);
  const ModelReport report = summarise_model(*bench, run, options);
  CHECK(report.report.overall.tau() >= 1.0);
  CHECK(report.verifier.find("LOSSY") != std::string::npos);
  CHECK_FALSE(report.greedy);
}

TEST_CASE("model: another checkpoint (vocabulary 350, 128 positions) with generation cut to its positions",
          "[specbench][model]") {
  const fs::path dir = fs::temp_directory_path() / "specbench_model_test";
  fs::create_directories(dir);
  specdec::testing::write_tiny_llama(dir / "tiny.bin");
  specdec::testing::write_tiny_tokenizer(dir / "tiny_tok.bin");
  auto model = std::make_shared<const specdec::Llama2cModel>(specdec::Llama2cModel::load(dir / "tiny.bin"));
  REQUIRE(model->config().vocab_size == 350);
  REQUIRE(model->config().seq_len == 128);
  const auto tokenizer = specdec::Llama2cTokenizer::load(dir / "tiny_tok.bin", 350);
  const std::vector<std::string> stories{"stories"};
  int clamped = -1;
  const ModelBench bench = make_model_bench(model, tokenizer, find_tasks(stories), 500, 3, &clamped);
  CHECK(clamped == 3);
  for (const ModelPrompt& p : bench.prompts)
    CHECK(p.max_new_tokens == 128 - static_cast<int>(p.tokens.size()) + 1);
  ModelOptions options;
  options.resources.datastore = fs::temp_directory_path() / "specbench_model_test_tiny.ds";
  specdec::TokenDocuments docs;
  for (const ModelPrompt& p : bench.prompts) docs.add(std::vector<std::uint32_t>(p.tokens.begin(), p.tokens.end()));
  specdec::build_datastore(docs, options.resources.datastore, {.vocab_size = 350});
  for (const char* name : {"casd", "tree", "pld,casd", "frequent", "rest"}) {
    CAPTURE(name);
    const ModelRun run = runner(name, VerifierKind::exact)(bench, options);
    for (std::size_t p = 0; p < run.turns.size(); ++p) {
      CHECK(run.turns[p].equals_plain);
      CHECK(run.turns[p].output.size() <= static_cast<std::size_t>(bench.prompts[p].max_new_tokens));
    }
  }
  // A prompt longer than the positions is left out and counted; none left is an input error.
  Task long_task{"long", "", {std::string(600, 'a'), "a short one"}};
  const Task* long_tasks[] = {&long_task};
  const ModelBench kept = make_model_bench(model, tokenizer, long_tasks, 10, 0, nullptr);
  CHECK(kept.skipped == 1);
  REQUIRE(kept.prompts.size() == 1);
  CHECK(kept.prompts[0].tokens == tokenizer.encode("a short one"));
  Task only_long{"long", "", {std::string(600, 'a')}};
  const Task* only_long_tasks[] = {&only_long};
  CHECK_THROWS_WITH(make_model_bench(model, tokenizer, only_long_tasks, 10, 0, nullptr),
                    "every prompt (1) is longer than the model's 128 positions");
}

TEST_CASE("tasks: at least 100 story openings, disjoint corpus openings, errors", "[specbench][model]") {
  const std::vector<std::string> stories{"stories"};
  REQUIRE(find_tasks(stories).size() == 1);
  CHECK(find_tasks(stories)[0]->prompts.size() >= 100);
  const std::vector<std::string> all{"all", "retell"};
  CHECK(find_tasks(all).size() == 2);
  const std::vector<std::string> unknown{"poems"};
  CHECK_THROWS_WITH(find_tasks(unknown), "unknown task 'poems'; the tasks are: stories, retell (or all)");
  // As people write them (issue 49): a list with blanks and a trailing comma, any case; a list of nothing is refused.
  const std::vector<std::string> written{" Stories, RETELL,", "stories"};
  CHECK(find_tasks(written) == find_tasks(all));
  const std::vector<std::string> none{" , "};
  CHECK_THROWS_WITH(find_tasks(none), "no task is named; the tasks are: stories, retell (or all)");
  const std::vector<std::string> openings = corpus_openings();
  CHECK(openings.size() >= 10000);
  for (const Task& task : builtin_tasks())
    for (const std::string& prompt : task.prompts)
      for (const std::string& opening : {openings.front(), openings.back()}) CHECK(prompt != opening);
}

TEST_CASE("model: staged drafts the same trees as draft_model with fewer draft-model forwards", "[specbench][model]") {
  const auto bench = stories_bench(2, 64);
  if (!bench) return;
  const ModelOptions options = with_datastores(*bench, "staged");
  const ModelRun one = runner("draft_model", VerifierKind::exact)(*bench, options);
  const ModelRun two = runner("staged", VerifierKind::exact)(*bench, options);
  CHECK(one.counts_draft_forwards);
  CHECK(two.counts_draft_forwards);
  CHECK_FALSE(runner("casd", VerifierKind::exact)(*bench, options).counts_draft_forwards);
  const ModelReport a = summarise_model(*bench, one, options), b = summarise_model(*bench, two, options);
  CHECK(a.report.overall.steps == b.report.overall.steps);  // the same trees: the same steps
  CHECK(a.report.overall.tokens == b.report.overall.tokens);
  CHECK(a.draft_forwards > 0);
  CHECK(b.draft_forwards > 0);
  CHECK(b.draft_forwards < a.draft_forwards);
  CHECK(a.draft_nodes >= a.draft_forwards);
  CHECK(to_json(b)["draft_model"]["forwards"] == b.draft_forwards);
}
