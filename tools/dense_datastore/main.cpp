// specdec-dense-datastore: builds, inspects and measures DReSD's dense datastores
// (docs/drafters/dresd.md).
//
//   specdec-dense-datastore build --tokens TOKENS --features FEATURES --out DS [--key-dim L]
//                                 [--sample S] [--seed S] [--vocab N]
//   specdec-dense-datastore info DS [--verify | --no-verify]
//   specdec-dense-datastore mrr DS [--queries Q] [--seed S]
//   specdec-dense-datastore bench DS [--queries Q] [--neighbours K] [SEARCH]
//   specdec-dense-datastore compare --dense DS --rest RDS --model M --prompts TOKENS [--prompt-tokens P]
//                                   [--max-prompts N] [--new N] [--budget B] [SEARCH]
// SEARCH: --backend exact|faiss-flat|faiss-ivf|faiss-hnsw|gpu-flat [--ivf-lists N] [--ivf-nprobe N]
//         [--hnsw-m M] [--hnsw-ef-search N] [--hnsw-ef-construction N] (tools/common/dense_search_options.hpp)
//
// The features are read, not computed: FEATURES holds one float32 row per token of TOKENS
// (separators excluded, in order), as `specbench corpus --features` writes them, the target's
// own features bit for bit. So the builder needs no model, and any target that can dump its
// features (e.g. a Hugging Face model with numpy's tofile) gets a datastore.
#include <Eigen/Dense>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <specdec/index/dense_datastore.hpp>
#include <specdec/index/dense_datastore_builder.hpp>
#include <specdec/index/dense_search.hpp>
#include <specdec/index/token_datastore.hpp>
#include <specdec/index/token_file.hpp>
#include <specdec/decoder.hpp>
#include <specdec/policies/drafters/dresd.hpp>
#include <specdec/policies/drafters/rest.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/targets/llama2c.hpp>

#include "common/cli_checks.hpp"
#include "common/cli_values.hpp"
#include "common/dense_search_choice.hpp"
#include "common/dense_search_options.hpp"
#include "common/progress.hpp"

namespace fs = std::filesystem;

namespace {

using specdec::tools::Clock;
using specdec::tools::progress;
using specdec::tools::whole_number_at_least;
using specdec::tools::whole_number_in;

struct BuildArgs {
  std::string tokens, features, out;
  int key_dim = 64;
  std::uint64_t sample = 1'000'000, seed = 0;
  int vocab = 0;
};

void run_build(const BuildArgs& a) {
  specdec::tools::check_input_file(a.tokens, "--tokens");
  specdec::tools::check_input_file(a.features, "--features");
  specdec::tools::check_output_file(a.out, "--out");
  specdec::TokenDocuments docs;
  specdec::read_token_file(a.tokens, docs);
  std::error_code ec;
  const auto bytes = fs::file_size(a.features, ec);
  if (ec) throw specdec::error("feature file " + a.features + " cannot be read (" + ec.message() + ")");
  const std::uint64_t floats = bytes / 4;
  if (bytes % 4 != 0 || docs.tokens() == 0 || floats % docs.tokens() != 0)
    throw specdec::error("feature file " + a.features + " has " + std::to_string(bytes) + " bytes, not one float32 row per " +
                         "token of " + a.tokens + " (" + std::to_string(docs.tokens()) + " tokens)");
  const int dim = static_cast<int>(floats / docs.tokens());
  std::vector<float> features(floats);
  specdec::detail::File f = specdec::detail::open_file(a.features, "rb", "feature file");
  if (std::fread(features.data(), 4, features.size(), f.get()) != features.size())
    throw specdec::error("feature file " + a.features + " could not be read to its end");
  progress(fmt::format("read {} tokens in {} documents, features of dim {}", docs.tokens(), docs.documents, dim));
  const auto summary = specdec::build_dense_datastore(
      docs, features, dim, a.out,
      {.key_dim = a.key_dim, .sample = a.sample, .seed = a.seed, .vocab_size = a.vocab, .progress = progress});
  std::cout << fmt::format("{}: {} keys, dim {} -> {}, PCA fitted on {} features, explained variance {:.1f}%\n", a.out,
                           summary.keys, dim, a.key_dim, summary.sample, 100.0 * summary.explained_variance);
}

void run_info(const std::string& file, specdec::DatastoreVerify level) {
  const auto start = Clock::now();
  const specdec::DenseDatastore ds(file, level);
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  const auto& h = ds.header();
  std::cout << fmt::format(
      "{}: format version {}, vocabulary {}, {} keys in {} documents, features {} -> keys {} (explained variance "
      "{:.1f}%, fitted on {}), {} bytes\n",
      file, h.version, h.vocab_size, ds.keys(), ds.documents(), ds.feature_dim(), ds.key_dim(),
      100.0 * h.explained_variance, h.sample, ds.file_bytes());
  std::cout << fmt::format("opened in {:.1f} ms ({})\n", ms, specdec::tools::verify_words(level));
}

/// Retrieval quality over sampled stored keys, each querying the whole datastore (scores by
/// Eigen's GEMM over blocks of keys):
///  - MRR of self-retrieval (DReSD's Table 1): the rank of the query's own key counts the other
///    keys scoring at least as high (within 1e-6), so duplicated states (stories that share a
///    prefix) count against it, as the paper says. Keys are unit vectors, so nothing but a
///    duplicate can outrank a key's own score of 1: this MRR measures duplicates, not l.
///  - next-token MRR (leave one out): the rank, among the other keys, of the first whose stored
///    next token is the query's own next token: whether the nearest states continue alike, what
///    DReSD's first-token filter needs. This one depends on l.
void run_mrr(const std::string& file, std::uint64_t queries, std::uint64_t seed) {
  const specdec::DenseDatastore ds(file);
  const auto n = ds.keys();
  const int l = ds.key_dim();
  const auto text = ds.text();
  const auto positions = ds.key_positions();
  const auto next = [&](std::uint64_t i) { return text[positions[i] + 1]; };
  const auto chosen = specdec::detail::sample_indices(n, std::min(n, queries), seed);
  const auto q = static_cast<Eigen::Index>(chosen.size());
  Eigen::MatrixXf query(l, q);
  Eigen::VectorXf self(q);
  for (Eigen::Index c = 0; c < q; ++c) {
    const auto key = ds.key(chosen[c]);
    query.col(c) = Eigen::Map<const Eigen::VectorXf>(key.data(), l);
    self[c] = query.col(c).squaredNorm();
  }
  std::vector<std::uint64_t> ahead(chosen.size(), 0), strictly(chosen.size(), 0), before_match(chosen.size(), 0);
  std::vector<float> match(chosen.size(), -2.0f);  // best score of another key with the same next token
  using Rows = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  constexpr std::uint64_t kBlock = 16384;
  Eigen::MatrixXf scores;
  const auto start = Clock::now();
  for (int pass = 0; pass < 2; ++pass) {
    for (std::uint64_t b = 0; b < n; b += kBlock) {
      const auto rows = static_cast<Eigen::Index>(std::min(kBlock, n - b));
      const Eigen::Map<const Rows> keys(ds.key(b).data(), rows, l);
      scores.noalias() = keys * query;  // rows x q
      for (Eigen::Index c = 0; c < q; ++c) {
        const std::uint32_t want = next(chosen[c]);
        for (Eigen::Index r = 0; r < rows; ++r) {
          const std::uint64_t j = b + static_cast<std::uint64_t>(r);
          if (j == chosen[c]) continue;
          const float s = scores(r, c);
          if (pass == 0) {
            ahead[c] += s >= self[c] - 1e-6f;
            strictly[c] += s > self[c] + 1e-6f;
            if (want != specdec::kDocumentEnd && next(j) == want) match[c] = std::max(match[c], s);
          } else {
            before_match[c] += s > match[c];
          }
        }
      }
    }
  }
  double mrr = 0, distinct = 0, top1 = 0, next_mrr = 0, next_top1 = 0, with_next = 0;
  for (std::size_t c = 0; c < chosen.size(); ++c) {
    mrr += 1.0 / static_cast<double>(1 + ahead[c]);
    distinct += 1.0 / static_cast<double>(1 + strictly[c]);
    top1 += ahead[c] == 0;
    if (next(chosen[c]) == specdec::kDocumentEnd) continue;
    ++with_next;
    if (match[c] > -2.0f) next_mrr += 1.0 / static_cast<double>(1 + before_match[c]);
    next_top1 += match[c] > -2.0f && before_match[c] == 0;
  }
  const double count = static_cast<double>(chosen.size());
  std::cout << fmt::format("{}: l = {} (explained variance {:.1f}%), {} keys, {} queries: self-retrieval MRR {:.3f} "
                           "(top-1 {:.1f}%; {:.3f} over distinct states), next-token MRR {:.3f} (top-1 {:.1f}%) "
                           "({:.1f} s)\n",
                           file, l, 100.0 * ds.header().explained_variance, n, chosen.size(), mrr / count,
                           100.0 * top1 / count, distinct / count, next_mrr / with_next, 100.0 * next_top1 / with_next,
                           std::chrono::duration<double>(Clock::now() - start).count());
}

/// Drafting's search cost: µs per query of a backend (stored keys as queries), and for an
/// approximate one its recall@k against the exact search on the same queries.
void run_bench(const std::string& file, std::uint64_t queries, int neighbours,
               const specdec::tools::DenseSearchChoice& backend) {
  const auto ds = std::make_shared<const specdec::DenseDatastore>(file);
  const auto exact = std::make_shared<const specdec::ExactDenseSearch>(ds);
  const auto built = Clock::now();
  const std::shared_ptr<const specdec::DenseSearch> search =
      backend.backend == "exact" ? exact : specdec::tools::make_dense_search(ds, backend);
  const double build_s = std::chrono::duration<double>(Clock::now() - built).count();
  const auto chosen = specdec::detail::sample_indices(ds->keys(), std::min(ds->keys(), queries), 1);
  std::vector<std::vector<specdec::DenseNeighbour>> found(chosen.size());
  std::vector<float> query(static_cast<std::size_t>(ds->key_dim()));
  const auto start = Clock::now();
  const std::clock_t cpu_start = std::clock();
  for (std::size_t q = 0; q < chosen.size(); ++q) {
    const auto key = ds->key(chosen[q]);
    query.assign(key.begin(), key.end());
    search->search(query, neighbours, found[q]);
  }
  const double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count() / chosen.size();
  // CPU time too: on a shared machine the wall time mostly measures the other processes.
  const double cpu_us = 1e6 * static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC / chosen.size();
  std::string recall;
  if (search != exact) {
    double hits = 0, total = 0;
    std::vector<specdec::DenseNeighbour> truth;
    for (std::size_t q = 0; q < chosen.size(); ++q) {
      const auto key = ds->key(chosen[q]);
      query.assign(key.begin(), key.end());
      exact->search(query, neighbours, truth);
      for (const auto& t : truth)
        hits += std::any_of(found[q].begin(), found[q].end(), [&](const auto& f) { return f.key == t.key; });
      total += static_cast<double>(truth.size());
    }
    recall = fmt::format(", recall@{} {:.3f}, index built in {:.1f} s", neighbours, hits / total, build_s);
  }
  std::cout << fmt::format("{}: {} search, {} keys of dim {}, k = {}: {:.0f} us CPU ({:.0f} us wall) per query "
                           "({} queries{})\n",
                           file, specdec::tools::describe(backend), ds->keys(), ds->key_dim(), neighbours, cpu_us, us,
                           chosen.size(),
                           recall);
}

struct CompareArgs {
  std::string dense, rest, model, prompts;
  specdec::tools::DenseSearchChoice backend;
  int prompt_tokens = 16, max_prompts = 40, new_tokens = 128, budget = 64;
};

/// Greedy decoding of the same prompts with REST and DReSD (exact verifier), each checked against
/// plain decoding: mean acceptance rate (accepted / drafted, per prompt, then averaged, as the
/// DReSD paper's MAR), τ (tokens per target call, bonus token included) and drafting µs per step.
/// The prompts are the first prompt_tokens tokens of each document of a token file (e.g. a
/// corpus sampled with another seed than the datastore's). The inputs are checked and the
/// datastores opened before the plain decoding that the comparison starts with.
void run_compare(const CompareArgs& a) {
  specdec::tools::check_input_file(a.dense, "--dense");
  specdec::tools::check_input_file(a.rest, "--rest");
  specdec::tools::check_input_file(a.model, "--model");
  specdec::tools::check_input_file(a.prompts, "--prompts");
  auto model = std::make_shared<const specdec::Llama2cModel>(specdec::Llama2cModel::load(a.model));
  const auto rest = std::make_shared<const specdec::TokenDatastore>(a.rest);
  const auto dense = std::make_shared<const specdec::DenseDatastore>(a.dense);
  const auto search = specdec::tools::make_dense_search(dense, a.backend);
  specdec::TokenDocuments docs;
  specdec::read_token_file(a.prompts, docs);
  std::vector<std::vector<specdec::token_t>> prompts;
  std::size_t begin = 0;
  for (std::size_t i = 0; i < docs.text.size() && static_cast<int>(prompts.size()) < a.max_prompts; ++i) {
    if (docs.text[i] != specdec::kDocumentEnd) continue;
    if (i - begin >= static_cast<std::size_t>(a.prompt_tokens))
      prompts.emplace_back(docs.text.begin() + static_cast<std::ptrdiff_t>(begin),
                           docs.text.begin() + static_cast<std::ptrdiff_t>(begin + a.prompt_tokens));
    begin = i + 1;
  }
  specdec::Llama2cTarget target(model);
  std::vector<std::vector<specdec::token_t>> expected;
  for (const auto& p : prompts) expected.push_back(target.generate(p, a.new_tokens));
  const auto run = [&](const std::string& name, auto make) {
    double mar = 0, seconds = 0;
    std::int64_t steps = 0, tokens = 0, drafted = 0, wrong = 0;
    for (std::size_t p = 0; p < prompts.size(); ++p) {
      specdec::SpeculativeDecoder<specdec::Llama2cTarget, decltype(make()), specdec::ExactVerifier> decoder(
          target, specdec::DecoderOptions{.budget = a.budget}, make(), specdec::ExactVerifier{});
      decoder.prefill(prompts[p]);
      wrong += decoder.generate(a.new_tokens) != expected[p];
      const auto& st = decoder.stats();
      mar += st.drafted_nodes ? static_cast<double>(st.tokens - st.steps) / static_cast<double>(st.drafted_nodes) : 0.0;
      steps += st.steps, tokens += st.tokens, drafted += st.drafted_nodes, seconds += st.draft_seconds;
    }
    std::cout << fmt::format("{:<22} prompts {:3}  MAR {:5.1f}%  accepted {:6} of {:7} drafted  tau {:.2f}  "
                             "drafting {:7.0f} us/step  outputs differing from plain decoding: {}\n",
                             name, prompts.size(), 100.0 * mar / prompts.size(), tokens - steps, drafted,
                             static_cast<double>(tokens) / steps, 1e6 * seconds / steps, wrong);
  };
  std::cout << fmt::format("{} prompts of {} tokens, {} new tokens each, budget {}; REST {} ({} tokens), DReSD {} "
                           "(l = {}, {} search)\n",
                           prompts.size(), a.prompt_tokens, a.new_tokens, a.budget, a.rest, rest->tokens(), a.dense,
                           dense->key_dim(), specdec::tools::describe(a.backend));
  run("rest", [&] { return specdec::RestDrafter(rest); });
  run("dresd 3x20 (greedy)", [&] { return specdec::DresdDrafter(dense, specdec::DresdOptions::greedy(), search); });
  run("dresd 10x10 (sampling)", [&] { return specdec::DresdDrafter(dense, specdec::DresdOptions::sampling(), search); });
  run("dresd 10x6 (REST's)", [&] {
    return specdec::DresdDrafter(dense, {.neighbours = 64, .drafts = 10, .depth = 6}, search);
  });
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"specdec-dense-datastore: builds and measures the dense datastores DReSD drafts from"};
  app.require_subcommand(1);

  BuildArgs b;
  auto* build = app.add_subcommand("build", "Build a dense datastore from a token file and its features");
  build->add_option("--tokens", b.tokens, "Token file (u32 little-endian, 0xFFFFFFFF ends a document)")->required();
  build->add_option("--features", b.features, "float32 rows, one per token of --tokens (specbench corpus --features)")
      ->required();
  build->add_option("--out", b.out, "Dense datastore file to write")->required();
  build->add_option("--key-dim", b.key_dim, "Principal components kept (default 64)")->transform(whole_number_at_least(1));
  build->add_option("--sample", b.sample, "Features the statistics and PCA are fitted on, at most (default 1000000)")
      ->transform(whole_number_in(2, 1LL << 40));
  build->add_option("--seed", b.seed, "Seed of the sample (default 0)")->transform(whole_number_at_least(0, LLONG_MAX));
  build->add_option("--vocab", b.vocab, "Vocabulary size (default: the largest token + 1)")
      ->transform(whole_number_at_least(0));

  std::string file;
  bool verify = false, no_verify = false;
  auto* info = app.add_subcommand("info", "Open a dense datastore, check it and print its header");
  info->add_option("datastore", file, "Dense datastore file")->required();
  info->add_flag("--verify", verify, "Also verify the payload checksum (every stored value is checked by default)");
  info->add_flag("--no-verify", no_verify, "Check the header only, not every stored value (a huge file opened often)")
      ->excludes("--verify");

  std::uint64_t queries = 1000, seed = 0;
  auto* mrr = app.add_subcommand("mrr", "Retrieval quality: MRR of self-retrieval and of the next token, sampled stored keys");
  mrr->add_option("datastore", file, "Dense datastore file")->required();
  mrr->add_option("--queries", queries, "Stored keys to query (default 1000)")
      ->transform(whole_number_at_least(1, LLONG_MAX));
  mrr->add_option("--seed", seed, "Seed of the query sample (default 0)")->transform(whole_number_at_least(0, LLONG_MAX));

  int neighbours = 32;
  auto* bench = app.add_subcommand("bench", "Time a search backend (us per query; recall against the exact search)");
  bench->add_option("datastore", file, "Dense datastore file")->required();
  bench->add_option("--queries", queries, "Queries (default 1000)")->transform(whole_number_at_least(1, LLONG_MAX));
  bench->add_option("--neighbours", neighbours, "k (default 32)")->transform(whole_number_at_least(1));
  specdec::tools::DenseSearchChoice backend;
  specdec::tools::add_dense_search_options(*bench, backend, "--backend", "");

  CompareArgs c;
  auto* compare = app.add_subcommand("compare", "Greedy decoding with REST and DReSD on the same prompts");
  compare->add_option("--dense", c.dense, "Dense datastore")->required();
  compare->add_option("--rest", c.rest, "REST token datastore of the same corpus (specdec-datastore build)")->required();
  compare->add_option("--model", c.model, "llama2.c checkpoint the features came from")->required();
  compare->add_option("--prompts", c.prompts, "Token file: each document's first --prompt-tokens tokens are a prompt")
      ->required();
  compare->add_option("--prompt-tokens", c.prompt_tokens, "Tokens per prompt (default 16)")->transform(whole_number_at_least(1));
  compare->add_option("--max-prompts", c.max_prompts, "Prompts at most (default 40)")->transform(whole_number_at_least(1));
  compare->add_option("--new", c.new_tokens, "New tokens per prompt (default 128)")->transform(whole_number_at_least(1));
  compare->add_option("--budget", c.budget, "Draft nodes per step (default 64)")->transform(whole_number_at_least(1));
  specdec::tools::add_dense_search_options(*compare, c.backend, "--backend", "");

  specdec::tools::keep_repeated_values(app);
  try {
    app.parse(argc, argv);
    specdec::tools::check_option_values<CLI::ValidationError>(app);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    std::cerr << "specdec-dense-datastore: " << e.what() << " (see specdec-dense-datastore --help)\n";
    return 2;
  }
  try {
    specdec::tools::check_stdout_open();
    if (build->parsed()) run_build(b);
    else if (info->parsed()) run_info(file, specdec::tools::verify_level(verify, no_verify));
    else if (mrr->parsed()) run_mrr(file, queries, seed);
    else if (compare->parsed()) run_compare(c);
    else run_bench(file, queries, neighbours, backend);
    specdec::tools::finish_stdout();
  } catch (const specdec::error& e) {
    std::cerr << "specdec-dense-datastore: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "specdec-dense-datastore: internal error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
