// `specbench corpus`: the files are what the format says, the features are the model's own (bit
// for bit), greedy stories are the model's greedy continuations, and the output does not depend
// on the thread count.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include <specdec/index/token_file.hpp>
#include <specdec/targets/llama2c.hpp>
#include <specdec/testing/laid_out_tree.hpp>
#include <specdec/tokenizers/llama2c_tokenizer.hpp>

#include "input_error.hpp"
#include "story_corpus.hpp"
#include "support/stories260k.hpp"
#include "tasks.hpp"

using namespace specbench;
namespace fs = std::filesystem;
using specdec::token_t;

namespace {

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

StoryCorpusOptions options(const std::string& name, int threads) {
  StoryCorpusOptions o;
  o.out = fs::temp_directory_path() / ("story_corpus_test_" + name);
  o.stories = 12;
  o.tokens = 0;
  o.greedy_share = 0.25;  // stories 3, 7 and 11
  o.temperature = 0.9f;
  o.seed = 4;
  o.threads = threads;
  o.features = true;
  return o;
}

}  // namespace

TEST_CASE("corpus: token file, features and metadata", "[specbench][corpus]") {
  const auto* m = specdec::testing::stories260k();
  if (!m) return;
  const StoryCorpusOptions o = options("one_thread", 1);
  const StoryCorpusSummary summary = generate_story_corpus(m->model, m->tokenizer, o, nullptr);
  CHECK(summary.stories == 12);
  CHECK(summary.greedy_stories == 3);

  specdec::TokenDocuments docs;
  specdec::read_token_file(o.out / "tokens.bin", docs);
  REQUIRE(docs.documents == 12);
  REQUIRE(static_cast<std::int64_t>(docs.tokens()) == summary.tokens);
  const std::string features = file_bytes(o.out / "features.f32");
  REQUIRE(features.size() == docs.tokens() * 64 * sizeof(float));
  CHECK(file_bytes(o.out / "corpus.json").find("\"greedy_stories\": 3") != std::string::npos);

  // Split the documents; check each story against the model run one token at a time.
  const std::vector<std::string> openings = corpus_openings();
  std::size_t at = 0, row = 0;
  for (int s = 0; s < 12; ++s) {
    std::vector<token_t> story;
    while (docs.text[at] != specdec::kDocumentEnd) story.push_back(static_cast<token_t>(docs.text[at++]));
    ++at;
    INFO("story " << s);
    REQUIRE(story.size() <= 512);
    const bool greedy = s % 4 == 3;
    const std::vector<token_t> opening = m->tokenizer.encode(openings[greedy ? s / 4 : s]);
    REQUIRE(std::equal(opening.begin(), opening.end(), story.begin()));
    specdec::Llama2cTarget plain(m->model);
    std::size_t equal_rows = 0;
    specdec::testing::forward_one_by_one(plain, story, [&](int i, const specdec::Llama2cTarget::Output& out) {
      const float* expected = out.features(0).data();
      equal_rows += std::memcmp(features.data() + (row + i) * 64 * sizeof(float), expected, 64 * sizeof(float)) == 0;
    });
    CHECK(equal_rows == story.size());
    row += story.size();
    if (greedy) {
      const std::vector<token_t> stop{1, 2};
      const auto continuation = plain.generate(opening, 512 - static_cast<int>(opening.size()), stop);
      CHECK(std::equal(continuation.begin(), continuation.end(), story.begin() + static_cast<std::ptrdiff_t>(opening.size()),
                       story.end()));
    }
  }
}

TEST_CASE("corpus: the same files with any number of threads, another seed gives other stories",
          "[specbench][corpus]") {
  const auto* m = specdec::testing::stories260k();
  if (!m) return;
  const StoryCorpusOptions one = options("threads_1", 1), three = options("threads_3", 3);
  generate_story_corpus(m->model, m->tokenizer, one, nullptr);
  generate_story_corpus(m->model, m->tokenizer, three, nullptr);
  CHECK(file_bytes(one.out / "tokens.bin") == file_bytes(three.out / "tokens.bin"));
  CHECK(file_bytes(one.out / "features.f32") == file_bytes(three.out / "features.f32"));
  StoryCorpusOptions other = options("seed_5", 2);
  other.seed = 5;
  other.features = false;
  generate_story_corpus(m->model, m->tokenizer, other, nullptr);
  CHECK(file_bytes(other.out / "tokens.bin") != file_bytes(one.out / "tokens.bin"));
  CHECK_FALSE(fs::exists(other.out / "features.f32"));
}

TEST_CASE("corpus: stops after the story that reaches --tokens, bad options", "[specbench][corpus]") {
  const auto* m = specdec::testing::stories260k();
  if (!m) return;
  StoryCorpusOptions o = options("tokens", 2);
  o.stories = 0;
  o.tokens = 1000;
  o.features = false;
  const StoryCorpusSummary summary = generate_story_corpus(m->model, m->tokenizer, o, nullptr);
  CHECK(summary.tokens >= 1000);
  CHECK(summary.tokens < 1000 + 512);
  o.greedy_share = 1.5;
  CHECK_THROWS_WITH(generate_story_corpus(m->model, m->tokenizer, o, nullptr),
                    "corpus: --greedy-share must be in [0, 1], got 1.5");
  o.greedy_share = 0.1;
  o.out = "/proc/specbench_cannot_write_here";
  CHECK_THROWS_AS(generate_story_corpus(m->model, m->tokenizer, o, nullptr), input_error);
}
