// specdec-ngram: builds and inspects the Katz back-off trigram models NgramDrafter drafts from
// (docs/drafters/ngram.md).
//
//   specdec-ngram build --corpus DIR_OR_FILE --out MODEL [--vocab N] [--max-tokens N] [--cutoff K]
//   specdec-ngram info MODEL [--verify | --no-verify] [--heldout DIR_OR_FILE] [--max-tokens N]
//
// A corpus is a token file (u32 ids, 0xFFFFFFFF between documents), or a directory holding one as
// tokens.bin (what `specbench corpus` writes).
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <specdec/error.hpp>
#include <specdec/index/ngram_model.hpp>
#include <specdec/index/ngram_model_builder.hpp>
#include <specdec/index/token_file.hpp>

#include "common/cli_checks.hpp"
#include "common/cli_values.hpp"
#include "common/progress.hpp"

namespace fs = std::filesystem;
using specdec::TokenDocuments;

namespace {

using specdec::tools::Clock;
using specdec::tools::progress;
using specdec::tools::whole_number_at_least;
using specdec::tools::whole_number_in;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

/// The documents of a corpus (a token file, or a directory with tokens.bin), cut after
/// `max_tokens` tokens when that is not 0 (the document it falls in is cut there).
TokenDocuments read_corpus(const fs::path& corpus, std::uint64_t max_tokens) {
  const fs::path file = fs::is_directory(corpus) ? corpus / "tokens.bin" : corpus;
  TokenDocuments all;
  specdec::read_token_file(file, all);
  if (max_tokens == 0 || all.tokens() <= max_tokens) return all;
  TokenDocuments cut;
  std::vector<std::uint32_t> doc;
  for (const std::uint32_t t : all.text) {
    if (t != specdec::kDocumentEnd && cut.tokens() + doc.size() < max_tokens) {
      doc.push_back(t);
      continue;
    }
    cut.add(doc);
    doc.clear();
    if (cut.tokens() >= max_tokens) break;
  }
  return cut;
}

void run_build(const fs::path& corpus, const fs::path& out, int vocab, std::uint64_t max_tokens, int cutoff) {
  specdec::tools::check_output_file(out, "--out");
  const TokenDocuments docs = read_corpus(corpus, max_tokens);
  progress(fmt::format("read {}: {} tokens in {} documents", corpus.string(), docs.tokens(), docs.documents));
  specdec::build_ngram_model(docs, out, {.vocab_size = vocab, .cutoff = cutoff, .progress = progress});
  progress(fmt::format("wrote {}: {} bytes", out.string(), fs::file_size(out)));
}

/// Perplexity and top-1 accuracy of the model on held-out documents (each token predicted from
/// the up to two tokens before it in its document), and the time of the model's queries.
void print_heldout(const specdec::NgramModel& model, const fs::path& corpus, std::uint64_t max_tokens) {
  const TokenDocuments docs = read_corpus(corpus, max_tokens);
  double log_sum = 0;
  std::uint64_t scored = 0, zero = 0, top1 = 0, queries = 0;
  std::vector<specdec::NgramCandidate> top;
  const auto start = Clock::now();
  std::size_t begin = 0;
  for (std::size_t i = 0; i < docs.text.size(); ++i) {
    if (docs.text[i] == specdec::kDocumentEnd) {
      begin = i + 1;
      continue;
    }
    const auto w = static_cast<specdec::token_t>(docs.text[i]);
    const std::size_t from = i - std::min<std::size_t>(2, i - begin);
    const std::vector<specdec::token_t> context(docs.text.begin() + static_cast<std::ptrdiff_t>(from),
                                                docs.text.begin() + static_cast<std::ptrdiff_t>(i));
    const double p = model.probability(context, w);
    if (p > 0) log_sum += std::log(p), ++scored;
    else ++zero;
    model.top_k(context, 1, top);
    top1 += !top.empty() && top[0].token == w;
    ++queries;
  }
  const double seconds = seconds_since(start);
  if (queries == 0) throw specdec::error("held-out corpus " + corpus.string() + " has no tokens");
  std::cout << fmt::format("held-out {}: {} tokens in {} documents\n", corpus.string(), docs.tokens(), docs.documents);
  std::cout << fmt::format("perplexity {:.3f} over {} tokens ({} of probability 0 left out), top-1 accuracy {:.2f}%\n",
                           std::exp(-log_sum / static_cast<double>(std::max<std::uint64_t>(scored, 1))), scored, zero,
                           100.0 * static_cast<double>(top1) / static_cast<double>(queries));
  std::cout << fmt::format("{:.3f} us per token (one probability and one top-1 query)\n",
                           1e6 * seconds / static_cast<double>(queries));
  // The drafter's query: top 3 after two tokens, on the held-out contexts.
  const auto top3_start = Clock::now();
  std::uint64_t top3 = 0;
  for (std::size_t i = 2; i < docs.text.size(); ++i) {
    const auto* c = docs.text.data() + i - 2;
    if (c[0] == specdec::kDocumentEnd || c[1] == specdec::kDocumentEnd) continue;
    const specdec::token_t context[2] = {static_cast<specdec::token_t>(c[0]), static_cast<specdec::token_t>(c[1])};
    model.top_k(context, 3, top);
    ++top3;
  }
  std::cout << fmt::format("{:.3f} us per top-3 query after two tokens ({} queries)\n",
                           1e6 * seconds_since(top3_start) / static_cast<double>(std::max<std::uint64_t>(top3, 1)), top3);
}

void run_info(const fs::path& file, specdec::DatastoreVerify level, const std::string& heldout, std::uint64_t max_tokens) {
  const auto start = Clock::now();
  const specdec::NgramModel model(file, level);
  const double ms = 1e3 * seconds_since(start);
  const auto& h = model.header();
  std::cout << fmt::format("{}: format version {}, vocabulary {}, {} tokens in {} documents, {} bytes\n", file.string(),
                           h.version, h.vocab_size, h.tokens, h.documents, model.file_bytes());
  std::cout << fmt::format("{} unigrams, {} bigrams after {} tokens, {} trigrams after {} contexts\n", h.unigrams,
                           h.bigrams, h.bigram_contexts, h.trigrams, h.trigram_contexts);
  const char* const orders[] = {"unigram", "bigram", "trigram"};
  for (int order = 1; order <= 3; ++order) {
    const auto d = model.discounts(order).first(h.effective_cutoff[order - 1]);
    std::string values;
    for (std::size_t r = 0; r < d.size(); ++r) values += fmt::format(" d{}={:.4f}", r + 1, d[r]);
    std::cout << fmt::format("{} discounts: cut-off {} of {}{}\n", orders[order - 1], d.size(), h.cutoff,
                             d.empty() ? " (none: maximum likelihood)" : values);
  }
  std::cout << fmt::format("opened in {:.1f} ms ({})\n", ms, specdec::tools::verify_words(level));
  if (!heldout.empty()) print_heldout(model, heldout, max_tokens);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"specdec-ngram: builds and checks the Katz back-off trigram models the ngram drafter drafts from"};
  app.require_subcommand(1);

  std::string corpus, out;
  int vocab = 0, cutoff = 5;
  std::uint64_t max_tokens = 0;
  auto* build = app.add_subcommand("build", "Build a model from a token corpus");
  build->add_option("--corpus", corpus, "Token file, or a directory with tokens.bin (specbench corpus)")->required();
  build->add_option("--out", out, "Model file to write")->required();
  build->add_option("--vocab", vocab, "Vocabulary size (default: the largest token + 1; give the model's)")
      ->transform(whole_number_at_least(0));
  build->add_option("--max-tokens", max_tokens, "Use the corpus's first N tokens only (default: all)")
      ->transform(whole_number_at_least(0, LLONG_MAX));
  build->add_option("--cutoff", cutoff, "Good-Turing cut-off k: counts above it are not discounted (default 5)")
      ->transform(whole_number_in(1, specdec::kNgramMaxCutoff));

  std::string info_file, heldout;
  bool verify = false, no_verify = false;
  std::uint64_t heldout_tokens = 0;
  auto* info = app.add_subcommand("info", "Open a model, check it and print its counts and discounts");
  info->add_option("model", info_file, "Model file")->required();
  info->add_flag("--verify", verify, "Also verify the payload checksum (every stored value is checked by default)");
  info->add_flag("--no-verify", no_verify, "Check the header only, not every stored value (a huge file opened often)")
      ->excludes("--verify");
  info->add_option("--heldout", heldout, "Token file or corpus directory: print perplexity, accuracy and query time");
  info->add_option("--max-tokens", heldout_tokens, "Use the held-out corpus's first N tokens only (default: all)")
      ->transform(whole_number_at_least(0, LLONG_MAX));

  specdec::tools::keep_repeated_values(app);
  try {
    app.parse(argc, argv);
    specdec::tools::check_option_values<CLI::ValidationError>(app);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    std::cerr << "specdec-ngram: " << e.what() << " (see specdec-ngram --help)\n";
    return 2;
  }
  try {
    specdec::tools::check_stdout_open();
    if (build->parsed()) run_build(corpus, out, vocab, max_tokens, cutoff);
    else run_info(info_file, specdec::tools::verify_level(verify, no_verify), heldout, heldout_tokens);
    specdec::tools::finish_stdout();
  } catch (const specdec::error& e) {
    std::cerr << "specdec-ngram: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "specdec-ngram: internal error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
