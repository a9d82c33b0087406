// specdec-datastore: builds, inspects and checks REST token datastores (docs/drafters/rest.md).
//
//   specdec-datastore build --out DS [--tokens FILE]... [--jsonl FILE --tokenizer MODEL]...
//                           [--questions Q --answers A --parity odd|even --tokenizer MODEL]
//                           [--vocab N] [--sort divsufsort|doubling]
//   specdec-datastore info DS [--verify | --no-verify]
//   specdec-datastore synth --out FILE --tokens N [--vocab V] [--seed S]
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <specdec/index/datastore_builder.hpp>
#include <specdec/index/token_datastore.hpp>
#include <specdec/index/token_file.hpp>
#include <specdec/tokenizers/llama2c_tokenizer.hpp>

#include "chat_template.hpp"
#include "common/cli_checks.hpp"
#include "common/cli_values.hpp"
#include "common/progress.hpp"
#include "corpus.hpp"
#include "input_error.hpp"
#include "synthetic_text.hpp"

namespace fs = std::filesystem;
using specdec::TokenDocuments;

namespace {

using specdec::tools::Clock;
using specdec::tools::one_of;
using specdec::tools::progress;
using specdec::tools::whole_number_at_least;
using specdec::tools::whole_number_in;

/// Text to tokens with a SentencePiece model (*.model) or a llama2.c tokenizer (*.bin).
class TextTokenizer {
 public:
  TextTokenizer(const fs::path& file, int vocab_size) {
    if (file.extension() == ".bin") llama2c_ = specdec::Llama2cTokenizer::load(file, vocab_size);
    else sentencepiece_ = std::make_unique<specbench::Tokenizer>(file);
  }
  int vocab_size() const { return sentencepiece_ ? sentencepiece_->vocab_size() : llama2c_->vocab_size(); }
  /// llama2.c text gets a BOS first, as the model's prompts do.
  std::vector<std::uint32_t> encode(const std::string& text) const {
    const auto ids = sentencepiece_ ? sentencepiece_->encode(text) : llama2c_->encode(text);
    return {ids.begin(), ids.end()};
  }

 private:
  std::unique_ptr<specbench::Tokenizer> sentencepiece_;
  std::optional<specdec::Llama2cTokenizer> llama2c_;
};

struct BuildArgs {
  std::string out;
  std::vector<std::string> token_files;
  std::vector<std::string> jsonl_files;
  std::string text_key = "text";
  std::string questions, answers, parity, template_name = "vicuna";
  std::string tokenizer;
  int vocab = 0;
  std::string sort = "divsufsort";
};

/// One document per line of a jsonl file: the line's string field `key`.
void add_jsonl(const fs::path& file, const std::string& key, const TextTokenizer& tokenizer, TokenDocuments& docs) {
  std::ifstream in(file);
  if (!in) throw specbench::input_error("jsonl file " + file.string() + " cannot be read (does it exist?)");
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    line = specdec::tools::text_line<specbench::input_error>(line, number, "jsonl file " + file.string());
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const auto value = nlohmann::json::parse(line, nullptr, false);
    const auto field = value.is_object() ? value.find(key) : value.end();
    if (value.is_discarded() || field == value.end() || !field->is_string())
      throw specbench::input_error("jsonl file " + file.string() + " line " + std::to_string(number) +
                                   ": expected an object with a string \"" + key + "\"");
    docs.add(tokenizer.encode(field->get<std::string>()));
  }
}

/// One document per Spec-Bench question of the chosen parity: its last turn's prompt (the chat
/// template with every earlier user turn and recorded answer), its recorded answer and the stop
/// token: the tokens a replay of that question sees, tokenised as the replay does.
void add_specbench(const BuildArgs& a, TokenDocuments& docs) {
  const int keep = a.parity == "odd" ? 1 : 0;
  std::vector<specbench::Question> questions;
  for (auto& q : specbench::load_questions(a.questions))
    if (((q.id % 2) + 2) % 2 == keep) questions.push_back(std::move(q));
  const specbench::Tokenizer tokenizer(a.tokenizer);
  const auto corpus = specbench::build_corpus(questions, specbench::load_answers(a.answers), tokenizer,
                                              specbench::ChatTemplate::builtin(a.template_name), {});
  std::map<int, const specbench::Turn*> last;  // a question's last turn holds the earlier ones
  for (const auto& turn : corpus.turns) last[turn.question_id] = &turn;
  for (const auto& [id, turn] : last) {
    std::vector<std::uint32_t> doc(turn->prompt.begin(), turn->prompt.end());
    doc.insert(doc.end(), turn->answer.begin(), turn->answer.end());
    doc.push_back(static_cast<std::uint32_t>(corpus.stop_token));
    docs.add(doc);
  }
  progress(fmt::format("{} Spec-Bench questions with {} ids", last.size(), a.parity));
}

void run_build(const BuildArgs& a) {
  using specdec::tools::check_input_file;
  for (const auto& f : a.token_files) check_input_file(f, "--tokens");
  for (const auto& f : a.jsonl_files) check_input_file(f, "--jsonl");
  for (const auto& [file, option] : {std::pair{a.questions, "--questions"}, {a.answers, "--answers"},
                                     {a.tokenizer, "--tokenizer"}})
    if (!file.empty()) check_input_file(file, option);
  specdec::tools::check_output_file(a.out, "--out");
  TokenDocuments docs;
  for (const auto& f : a.token_files) {
    specdec::read_token_file(f, docs);
    progress(fmt::format("read {}: {} tokens in {} documents so far", f, docs.tokens(), docs.documents));
  }
  int vocab = a.vocab;
  if (!a.jsonl_files.empty() || !a.questions.empty()) {
    if (a.tokenizer.empty()) throw specbench::input_error("--tokenizer is required with --jsonl and --questions");
    const TextTokenizer tokenizer(a.tokenizer, a.vocab);
    if (vocab == 0) vocab = tokenizer.vocab_size();
    for (const auto& f : a.jsonl_files) {
      add_jsonl(f, a.text_key, tokenizer, docs);
      progress(fmt::format("tokenised {}: {} tokens in {} documents so far", f, docs.tokens(), docs.documents));
    }
    if (!a.questions.empty()) add_specbench(a, docs);
  }
  specdec::build_datastore(docs, a.out,
                           {.vocab_size = vocab,
                            .sort = a.sort == "doubling" ? specdec::SuffixSort::doubling : specdec::SuffixSort::divsufsort,
                            .progress = progress});
}

void run_info(const std::string& file, specdec::DatastoreVerify level) {
  const auto start = Clock::now();
  const specdec::TokenDatastore ds(file, level);
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  const auto& h = ds.header();
  std::cout << fmt::format("{}: format version {}, vocabulary {}, {} tokens in {} documents, {} bytes\n", file,
                           h.version, h.vocab_size, ds.tokens(), ds.documents(), ds.file_bytes());
  std::cout << fmt::format("opened in {:.1f} ms ({})\n", ms, specdec::tools::verify_words(level));
}

void run_synth(const std::string& out, std::uint64_t tokens, std::uint32_t vocab, std::uint64_t seed) {
  specdec::tools::check_output_file(out, "--out");
  const TokenDocuments docs = specdec::tools::synthetic_documents(tokens, vocab, seed);
  specdec::write_token_file(out, docs);
  progress(fmt::format("wrote {}: {} tokens in {} documents", out, docs.tokens(), docs.documents));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"specdec-datastore: builds and checks the token datastores REST drafts from"};
  app.require_subcommand(1);

  BuildArgs b;
  auto* build = app.add_subcommand("build", "Build a datastore from token files, jsonl text or Spec-Bench answers");
  build->add_option("--out", b.out, "Datastore file to write")->required();
  build->add_option("--tokens", b.token_files, "Token file (u32 little-endian, 0xFFFFFFFF ends a document; repeatable)");
  build->add_option("--jsonl", b.jsonl_files, "jsonl file, one document per line's text field (repeatable)");
  build->add_option("--text-key", b.text_key, "The jsonl field holding the text (default: text)");
  build->add_option("--questions", b.questions, "Spec-Bench question.jsonl (with --answers and --parity)");
  build->add_option("--answers", b.answers, "Spec-Bench answers jsonl");
  build->add_option("--parity", b.parity, "Keep the questions with odd or even question_id")
      ->transform(one_of({"odd", "even"}));
  build->add_option("--template", b.template_name, "Built-in chat template for --questions (default: vicuna)");
  build->add_option("--tokenizer", b.tokenizer, "SentencePiece model (.model) or llama2.c tokenizer (.bin)");
  build->add_option("--vocab", b.vocab, "Vocabulary size (default: the tokenizer's, else the largest token + 1)")
      ->transform(whole_number_at_least(0));
  build->add_option("--sort", b.sort, "Suffix sort: divsufsort (default) or doubling")
      ->transform(one_of({"divsufsort", "doubling"}));
  build->callback([&] {
    if (b.questions.empty() != b.answers.empty() || b.questions.empty() != b.parity.empty())
      throw CLI::ValidationError("--questions, --answers and --parity go together");
    if (b.token_files.empty() && b.jsonl_files.empty() && b.questions.empty())
      throw CLI::ValidationError("no input: give --tokens, --jsonl or --questions");
  });

  std::string info_file;
  bool verify = false, no_verify = false;
  auto* info = app.add_subcommand("info", "Open a datastore, check it and print its header");
  info->add_option("datastore", info_file, "Datastore file")->required();
  info->add_flag("--verify", verify, "Also verify the payload checksum (every stored value is checked by default)");
  info->add_flag("--no-verify", no_verify, "Check the header only, not every stored value (a huge file opened often)")
      ->excludes("--verify");

  std::string synth_out;
  std::uint64_t synth_tokens = 0, synth_seed = 1;
  std::uint32_t synth_vocab = 32000;
  auto* synth = app.add_subcommand("synth", "Write a synthetic token file (Zipf tokens with repeated passages)");
  synth->add_option("--out", synth_out, "Token file to write")->required();
  synth->add_option("--tokens", synth_tokens, "Tokens to write")->required()->transform(whole_number_at_least(1, LLONG_MAX));
  synth->add_option("--vocab", synth_vocab, "Vocabulary size (default 32000)")->transform(whole_number_in(2, 0x7FFFFFFF));
  synth->add_option("--seed", synth_seed, "Random seed (default 1)")->transform(whole_number_at_least(0, LLONG_MAX));

  specdec::tools::keep_repeated_values(app);
  try {
    app.parse(argc, argv);
    specdec::tools::check_option_values<CLI::ValidationError>(app);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    std::cerr << "specdec-datastore: " << e.what() << " (see specdec-datastore --help)\n";
    return 2;
  }
  try {
    specdec::tools::check_stdout_open();
    if (build->parsed()) run_build(b);
    else if (info->parsed()) run_info(info_file, specdec::tools::verify_level(verify, no_verify));
    else run_synth(synth_out, synth_tokens, synth_vocab, synth_seed);
    specdec::tools::finish_stdout();
  } catch (const specbench::input_error& e) {
    std::cerr << "specdec-datastore: " << e.what() << "\n";
    return 2;
  } catch (const specdec::error& e) {
    std::cerr << "specdec-datastore: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "specdec-datastore: internal error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
