#include "story_corpus.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <fstream>
#include <mutex>
#include <ostream>
#include <stdexcept>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <specdec/decoder.hpp>
#include <specdec/index/token_file.hpp>
#include <specdec/policies/verifiers/rejection_sampling.hpp>
#include <specdec/targets/llama2c.hpp>

#include "input_error.hpp"
#include "tasks.hpp"

namespace specbench {

using specdec::token_t;

namespace {

/// A drafter that drafts nothing and keeps the feature rows it is told: every position's.
class FeatureRecorder {
 public:
  static constexpr const char* name = "feature recorder";
  static constexpr bool needs_target_features = true;

  void begin(std::span<const token_t>, const specdec::TargetFeatures& f) {
    rows_.clear();
    keep(f);
  }
  void observe(std::span<const token_t>, const specdec::TargetFeatures& f) { keep(f); }
  void propose(const specdec::DraftContext&, specdec::DraftTree&) {}
  std::vector<float>& rows() { return rows_; }

 private:
  void keep(const specdec::TargetFeatures& f) {
    rows_.insert(rows_.end(), f.data, f.data + static_cast<std::size_t>(f.rows) * static_cast<std::size_t>(f.dim));
  }
  std::vector<float> rows_;
};

using StoryDecoder = specdec::SpeculativeDecoder<specdec::Llama2cTarget, FeatureRecorder, specdec::RejectionSampling>;

struct Story {
  std::vector<token_t> tokens;
  std::vector<float> features;
  bool greedy = false;
};

/// Is story s decoded greedily, and from which opening?
struct StoryPlan {
  bool greedy;
  std::size_t opening;
};

StoryPlan plan(std::int64_t s, double greedy_share, std::size_t openings) {
  const auto greedy_before = static_cast<std::int64_t>(std::floor(static_cast<double>(s) * greedy_share));
  const bool greedy = static_cast<std::int64_t>(std::floor(static_cast<double>(s + 1) * greedy_share)) > greedy_before;
  if (greedy && static_cast<std::size_t>(greedy_before) < openings)
    return {true, static_cast<std::size_t>(greedy_before)};  // the g-th greedy story: opening g
  return {false, static_cast<std::size_t>(s) % openings};
}

class StoryWriter {
 public:
  explicit StoryWriter(const StoryCorpusOptions& o) : options_(o) {
    std::error_code ec;
    std::filesystem::create_directories(o.out, ec);
    if (ec) throw input_error("cannot create the output directory " + o.out.string() + ": " + ec.message());
    tokens_.open(o.out / "tokens.bin", std::ios::binary | std::ios::trunc);
    if (!tokens_) throw input_error("cannot write " + (o.out / "tokens.bin").string());
    if (o.features) {
      features_.open(o.out / "features.f32", std::ios::binary | std::ios::trunc);
      if (!features_) throw input_error("cannot write " + (o.out / "features.f32").string());
    }
  }

  void write(const Story& story) {
    static_assert(std::endian::native == std::endian::little, "token and feature files are little-endian");
    tokens_.write(reinterpret_cast<const char*>(story.tokens.data()),
                  static_cast<std::streamsize>(story.tokens.size() * sizeof(token_t)));
    const std::uint32_t end = specdec::kDocumentEnd;
    tokens_.write(reinterpret_cast<const char*>(&end), sizeof end);
    if (options_.features)
      features_.write(reinterpret_cast<const char*>(story.features.data()),
                      static_cast<std::streamsize>(story.features.size() * sizeof(float)));
    if (!tokens_ || (options_.features && !features_)) throw input_error("cannot write to " + options_.out.string());
  }

  void close() {
    tokens_.close();
    if (options_.features) features_.close();
    if (!tokens_ || (options_.features && !features_)) throw input_error("cannot write to " + options_.out.string());
  }

 private:
  const StoryCorpusOptions& options_;
  std::ofstream tokens_, features_;
};

}  // namespace

StoryCorpusSummary generate_story_corpus(std::shared_ptr<const specdec::Llama2cModel> model,
                                         const specdec::Llama2cTokenizer& tokenizer, const StoryCorpusOptions& o,
                                         std::ostream* progress) {
  if (o.tokens < 1 && o.stories < 1) throw input_error("corpus: give --tokens or --stories");
  if (!(o.greedy_share >= 0.0 && o.greedy_share <= 1.0))
    throw input_error(fmt::format("corpus: --greedy-share must be in [0, 1], got {}", o.greedy_share));
  if (!(o.temperature >= 0.0f) || !std::isfinite(o.temperature))
    throw input_error(fmt::format("corpus: --temperature must be a finite number >= 0, got {}", o.temperature));
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };

  const std::vector<std::string> openings = corpus_openings();
  std::vector<std::vector<token_t>> opening_tokens;
  for (const std::string& text : openings) opening_tokens.push_back(tokenizer.encode(text));
  const specdec::LlamaConfig& config = model->config();
  for (const auto& t : opening_tokens)
    if (static_cast<int>(t.size()) >= config.seq_len)
      throw input_error(fmt::format("corpus: an opening has {} tokens, too many for the model's {} positions", t.size(),
                                    config.seq_len));
  const int threads = o.threads > 0 ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  const std::vector<token_t> stop{specdec::Llama2cTokenizer::bos, specdec::Llama2cTokenizer::eos};

  // Decodes story s into `story`. Every token gets a feature row: the last one's comes from one
  // more step, whose committed token is dropped; so a story ends one position before the last.
  auto decode = [&](StoryDecoder& decoder, std::int64_t s, Story& story) {
    const StoryPlan p = plan(s, o.greedy_share, openings.size());
    const std::vector<token_t>& prompt = opening_tokens[p.opening];
    decoder.verifier() = specdec::RejectionSampling(specdec::SamplingOptions{
        .sampling = {.temperature = p.greedy ? 0.0f : o.temperature}, .seed = o.seed, .sequence = static_cast<std::uint32_t>(s)});
    decoder.prefill(prompt);
    const int max_new = config.seq_len - static_cast<int>(prompt.size());
    const std::vector<token_t> out = decoder.generate(max_new, stop);
    story.greedy = p.greedy;
    story.tokens.assign(prompt.begin(), prompt.end());
    story.tokens.insert(story.tokens.end(), out.begin(), out.end());
    story.features.clear();
    if (o.features) {
      decoder.step();
      std::vector<float>& rows = decoder.drafter<0>().rows();
      if (rows.size() != story.tokens.size() * static_cast<std::size_t>(config.dim))
        throw std::logic_error(fmt::format("story {}: {} feature floats for {} tokens", s, rows.size(), story.tokens.size()));
      story.features.swap(rows);
    }
  };

  StoryWriter writer(o);
  StoryCorpusSummary summary;
  const std::int64_t batch = 32 * threads;
  std::vector<Story> stories(static_cast<std::size_t>(batch));
  double last_report = 0;
  const bool by_stories = o.stories > 0;
  while (by_stories ? summary.stories < o.stories : summary.tokens < o.tokens) {
    const std::int64_t first = summary.stories;
    const std::int64_t count = by_stories ? std::min(batch, o.stories - first) : batch;
    std::atomic<std::int64_t> next{0};
    std::vector<std::thread> pool;
    std::exception_ptr failure;
    std::mutex failure_mutex;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&] {
        try {
          specdec::Llama2cTarget target(model);
          StoryDecoder decoder(target, specdec::DecoderOptions{.budget = 0}, FeatureRecorder{},
                               specdec::RejectionSampling{});
          for (std::int64_t i = next++; i < count; i = next++) decode(decoder, first + i, stories[static_cast<std::size_t>(i)]);
        } catch (...) {
          const std::lock_guard lock(failure_mutex);
          if (!failure) failure = std::current_exception();
        }
      });
    }
    for (auto& thread : pool) thread.join();
    if (failure) std::rethrow_exception(failure);
    for (std::int64_t i = 0; i < count; ++i) {
      const Story& story = stories[static_cast<std::size_t>(i)];
      writer.write(story);
      ++summary.stories;
      summary.greedy_stories += story.greedy;
      summary.tokens += static_cast<std::int64_t>(story.tokens.size());
      if (!by_stories && summary.tokens >= o.tokens) break;
    }
    if (progress && (elapsed() - last_report >= 5.0 || (by_stories ? summary.stories >= o.stories : summary.tokens >= o.tokens))) {
      last_report = elapsed();
      *progress << fmt::format("specbench corpus: {} stories, {} tokens, {:.0f} s, {:.0f} tokens/s\n", summary.stories,
                               summary.tokens, last_report, static_cast<double>(summary.tokens) / last_report);
      progress->flush();
    }
  }
  writer.close();
  summary.seconds = elapsed();

  nlohmann::ordered_json j;
  j["format"] = "specbench corpus 1 (see bench/specbench/story_corpus.hpp)";
  j["model"] = {{"dim", config.dim},          {"n_layers", config.n_layers}, {"n_heads", config.n_heads},
                {"vocab_size", config.vocab_size}, {"seq_len", config.seq_len}};
  j["stories"] = summary.stories;
  j["greedy_stories"] = summary.greedy_stories;
  j["tokens"] = summary.tokens;
  j["files"] = {{"tokens", "tokens.bin"}};
  if (o.features) j["files"]["features"] = "features.f32";
  j["feature_dim"] = config.dim;
  j["options"] = {{"temperature", o.temperature}, {"greedy_share", o.greedy_share}, {"seed", o.seed},
                  {"openings", openings.size()}};
  j["seconds"] = summary.seconds;
  std::ofstream meta(o.out / "corpus.json");
  meta << j.dump(2) << "\n";
  if (!meta.flush()) throw input_error("cannot write " + (o.out / "corpus.json").string());
  return summary;
}

}  // namespace specbench
