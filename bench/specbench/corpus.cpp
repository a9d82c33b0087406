#include "corpus.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include <nlohmann/json.hpp>
#include <sentencepiece_processor.h>

#include "common/cli_checks.hpp"
#include "common/values.hpp"
#include "input_error.hpp"

namespace specbench {
namespace {

using nlohmann::json;

/// Calls `on_line(value, where)` for every non-blank line of a jsonl file; `where` is
/// "FILE line N" for error messages.
template <class OnLine>
void read_jsonl(const std::filesystem::path& file, const std::string& what, OnLine on_line) {
  specdec::tools::check_input_file<input_error>(file, what + " file");
  std::ifstream in(file);
  if (!in) throw input_error(what + " file " + file.string() + " cannot be read (does it exist?)");
  std::string line;
  int lines = 0;
  for (int number = 1; std::getline(in, line); ++number) {
    line = specdec::tools::text_line<input_error>(line, number, what + " file " + file.string());
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const std::string where = what + " file " + file.string() + " line " + std::to_string(number);
    json value;
    try {
      value = json::parse(line);
    } catch (const json::exception& e) {  // parse_error, and out_of_range for a number like 1e400
      throw input_error(where + ": malformed JSON (" + e.what() + ")");
    }
    if (!value.is_object()) throw input_error(where + ": expected a JSON object");
    on_line(value, where);
    ++lines;
  }
  if (lines == 0) throw input_error(what + " file " + file.string() + " has no entries");
}

/// An integer that fits in an int (get<int>() would silently truncate a wider one).
bool fits_int(const json& value) {
  if (value.is_number_unsigned()) return value.get<std::uint64_t>() <= static_cast<std::uint64_t>(INT_MAX);
  return value.is_number_integer() && value.get<std::int64_t>() >= INT_MIN && value.get<std::int64_t>() <= INT_MAX;
}

int get_id(const json& value, const std::string& where) {
  const auto id = value.find("question_id");
  if (id == value.end() || !id->is_number_integer())
    throw input_error(where + ": \"question_id\" is missing or not an integer");
  if (!fits_int(*id)) throw input_error(where + ": \"question_id\" " + id->dump() + " does not fit in an int");
  return id->get<int>();
}

std::vector<std::string> get_strings(const json& value, const char* key, const std::string& where) {
  const auto it = value.find(key);
  if (it == value.end() || !it->is_array() || it->empty())
    throw input_error(where + ": \"" + key + "\" is missing or not a non-empty list of strings");
  std::vector<std::string> out;
  for (const auto& s : *it) {
    if (!s.is_string()) throw input_error(where + ": \"" + key + "\" holds a value that is not a string");
    out.push_back(s.get<std::string>());
  }
  return out;
}

}  // namespace

// ---- Tokenizer -------------------------------------------------------------------------------

Tokenizer::Tokenizer(const std::filesystem::path& model) : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  specdec::tools::check_input_file<input_error>(model, "tokenizer file");
  const auto status = sp_->Load(model.string());
  if (!status.ok())
    throw input_error("tokenizer file " + model.string() + " is not a SentencePiece model (" + status.ToString() + ")");
  if (sp_->bos_id() < 0 || sp_->eos_id() < 0)
    throw input_error("tokenizer file " + model.string() + " has no BOS or no EOS piece");
  bos_piece_ = sp_->IdToPiece(sp_->bos_id());
  eos_piece_ = sp_->IdToPiece(sp_->eos_id());
}

Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

int Tokenizer::vocab_size() const { return sp_->GetPieceSize(); }
token_t Tokenizer::bos() const { return sp_->bos_id(); }
token_t Tokenizer::eos() const { return sp_->eos_id(); }

std::vector<token_t> Tokenizer::encode(std::string_view text) const {
  std::vector<token_t> out;
  std::vector<int> ids;
  auto encode_chunk = [&](std::string_view chunk) {
    if (chunk.empty()) return;
    const auto status = sp_->Encode(chunk, &ids);
    if (!status.ok()) throw std::runtime_error("SentencePiece failed to encode text: " + status.ToString());
    out.insert(out.end(), ids.begin(), ids.end());
  };
  std::size_t chunk_start = 0;
  for (std::size_t i = 0; i < text.size();) {
    const bool is_bos = text.substr(i).starts_with(bos_piece_);
    const bool is_eos = !is_bos && text.substr(i).starts_with(eos_piece_);
    if (!is_bos && !is_eos) {
      ++i;
      continue;
    }
    encode_chunk(text.substr(chunk_start, i - chunk_start));
    out.push_back(is_bos ? bos() : eos());
    i += (is_bos ? bos_piece_ : eos_piece_).size();
    chunk_start = i;
  }
  encode_chunk(text.substr(chunk_start));
  return out;
}

// ---- files -----------------------------------------------------------------------------------

std::vector<Question> load_questions(const std::filesystem::path& file) {
  std::vector<Question> questions;
  std::unordered_set<int> seen;
  read_jsonl(file, "questions", [&](const json& value, const std::string& where) {
    Question q;
    q.id = get_id(value, where);
    if (!seen.insert(q.id).second) throw input_error(where + ": question_id " + std::to_string(q.id) + " appears twice");
    const auto category = value.find("category");
    if (category == value.end() || !category->is_string() || category->get<std::string>().empty())
      throw input_error(where + ": \"category\" is missing or not a non-empty string");
    q.category = category->get<std::string>();
    q.turns = get_strings(value, "turns", where);
    questions.push_back(std::move(q));
  });
  return questions;
}

std::vector<Answer> load_answers(const std::filesystem::path& file) {
  std::vector<Answer> answers;
  std::unordered_set<int> seen;
  read_jsonl(file, "answers", [&](const json& value, const std::string& where) {
    Answer a;
    a.id = get_id(value, where);
    if (!seen.insert(a.id).second) throw input_error(where + ": question_id " + std::to_string(a.id) + " appears twice");
    const auto choices = value.find("choices");
    if (choices == value.end() || !choices->is_array() || choices->empty() || !(*choices)[0].is_object())
      throw input_error(where + ": \"choices\" is missing or not a list of objects");
    const json& choice = (*choices)[0];
    a.turns = get_strings(choice, "turns", where + " choices[0]");
    if (const auto counts = choice.find("new_tokens"); counts != choice.end()) {
      if (!counts->is_array() || counts->size() != a.turns.size())
        throw input_error(where + ": \"new_tokens\" is not a list with one count per turn");
      for (const auto& c : *counts) {
        if (!c.is_number_integer()) throw input_error(where + ": \"new_tokens\" holds a value that is not an integer");
        if (!fits_int(c) || c.get<std::int64_t>() < 0)
          throw input_error(where + ": \"new_tokens\" holds " + c.dump() + ", not a count in [0, " + std::to_string(INT_MAX) + "]");
        a.recorded_tokens.push_back(c.get<int>());
      }
    }
    answers.push_back(std::move(a));
  });
  return answers;
}

// ---- corpus ----------------------------------------------------------------------------------

Corpus build_corpus(const std::vector<Question>& questions, const std::vector<Answer>& answers,
                    const Tokenizer& tokenizer, const ChatTemplate& chat, const CorpusOptions& options) {
  std::vector<std::string> known;
  for (const auto& q : questions)
    if (std::find(known.begin(), known.end(), q.category) == known.end()) known.push_back(q.category);
  const std::string list = "the questions file has: " + specdec::tools::joined_names(known);
  std::vector<std::string> chosen;  // as the questions file spells them
  for (const std::string& c : specdec::tools::list_items(options.categories)) {
    const std::optional<std::size_t> i = specdec::tools::name_index(c, known);
    if (!i) throw input_error("unknown category '" + c + "'; " + list);
    chosen.push_back(known[*i]);
  }
  if (!options.categories.empty() && chosen.empty()) throw input_error("no category is named; " + list);
  std::unordered_map<int, const Answer*> answer_of;
  for (const auto& a : answers) answer_of[a.id] = &a;

  Corpus corpus;
  corpus.vocab_size = tokenizer.vocab_size();
  corpus.stop_token = tokenizer.eos();
  for (const Question& q : questions) {
    const auto found = answer_of.find(q.id);
    if (found == answer_of.end())
      throw input_error("question " + std::to_string(q.id) + " has no answer in the answers file");
    const Answer& a = *found->second;
    if (a.turns.size() != q.turns.size())
      throw input_error("question " + std::to_string(q.id) + " has " + std::to_string(q.turns.size()) +
                        " turns but its answer has " + std::to_string(a.turns.size()));
    if (!chosen.empty() && std::find(chosen.begin(), chosen.end(), q.category) == chosen.end())
      continue;
    if (!options.parity.empty() && (q.id % 2 != 0) != (options.parity == "odd")) continue;
    for (std::size_t k = 0; k < q.turns.size(); ++k) {
      if (options.max_turns > 0 && static_cast<int>(corpus.turns.size()) == options.max_turns) break;
      Turn turn;
      turn.question_id = q.id;
      turn.category = q.category;
      turn.index = static_cast<int>(k);
      turn.prompt = tokenizer.encode(chat.render(std::span(q.turns).first(k + 1), std::span(a.turns).first(k)));
      turn.answer = tokenizer.encode(a.turns[k]);
      // The replay ends at the first stop token, so an answer holding one can never be replayed.
      if (const auto eos = std::find(turn.answer.begin(), turn.answer.end(), corpus.stop_token); eos != turn.answer.end())
        throw input_error("question " + std::to_string(q.id) + " turn " + std::to_string(k + 1) +
                          ": the answer contains the end-of-sequence piece '" + tokenizer.eos_piece() + "' (token " +
                          std::to_string(eos - turn.answer.begin()) + " of " + std::to_string(turn.answer.size()) +
                          "), which would end its replay early");
      if (!a.recorded_tokens.empty()) turn.recorded_tokens = a.recorded_tokens[k];
      if (turn.prompt.empty())
        throw input_error("question " + std::to_string(q.id) + " turn " + std::to_string(k + 1) +
                          ": the prompt is empty (check the template)");
      if (std::find(corpus.categories.begin(), corpus.categories.end(), q.category) == corpus.categories.end())
        corpus.categories.push_back(q.category);
      corpus.turns.push_back(std::move(turn));
    }
  }
  return corpus;
}

namespace {

void keep_turns(Corpus& corpus, std::vector<Turn> turns) {
  corpus.turns = std::move(turns);
  std::vector<std::string> categories;
  for (const std::string& c : corpus.categories)
    if (std::any_of(corpus.turns.begin(), corpus.turns.end(), [&](const Turn& t) { return t.category == c; }))
      categories.push_back(c);
  corpus.categories = std::move(categories);
}

}  // namespace

void sample_turns(Corpus& corpus, int count, bool keep_history) {
  const std::size_t n = corpus.turns.size();
  if (count <= 0 || static_cast<std::size_t>(count) >= n) return;
  std::vector<Turn> kept;
  std::size_t next = 0;  // the first turn not yet kept or moved to the history
  for (std::size_t i = 0; i < static_cast<std::size_t>(count); ++i) {
    const std::size_t pick = i * n / static_cast<std::size_t>(count);
    if (keep_history)
      std::move(corpus.turns.begin() + static_cast<std::ptrdiff_t>(next),
                corpus.turns.begin() + static_cast<std::ptrdiff_t>(pick), std::back_inserter(corpus.history));
    next = pick + 1;
    kept.push_back(std::move(corpus.turns[pick]));
    kept.back().history_end = corpus.history.size();
  }
  keep_turns(corpus, std::move(kept));
}

long positions_needed(const Turn& t, int room) {
  return static_cast<long>(t.prompt.size() + t.answer.size()) + 1 + room;
}

long positions_needed(const Corpus& corpus, int room) {
  long most = 0;
  for (const Turn& t : corpus.turns) most = std::max(most, positions_needed(t, room));
  return most;
}

int drop_turns_longer_than(Corpus& corpus, int positions, int room) {
  std::vector<Turn> kept;
  for (Turn& t : corpus.turns)
    if (positions_needed(t, room) <= positions) kept.push_back(std::move(t));
  const int dropped = static_cast<int>(corpus.turns.size() - kept.size());
  keep_turns(corpus, std::move(kept));
  return dropped;
}

void fit_to_timed_model(Corpus& corpus, const std::string& name, int vocab, int positions, int budget) {
  if (vocab < corpus.vocab_size)
    throw input_error("--timed-model " + name + ": its vocabulary has " + std::to_string(vocab) +
                      " tokens, fewer than the replay's " + std::to_string(corpus.vocab_size));
  const std::size_t turns = corpus.turns.size();
  if (const int dropped = drop_turns_longer_than(corpus, positions, budget); dropped > 0)
    std::cerr << "specbench: " << dropped << " of " << turns << " turns do not fit the timed model's " << positions
              << " positions (prompt + answer + stop + budget) and are left out\n";
  if (corpus.turns.empty()) throw input_error("--timed-model " + name + ": no turn fits its positions");
}

TokenCountCheck check_token_counts(const Corpus& corpus) {
  TokenCountCheck check;
  for (const Turn& t : corpus.turns) {
    if (t.recorded_tokens < 0) continue;
    const int difference = std::abs(static_cast<int>(t.answer.size()) + 1 - t.recorded_tokens);
    ++check.turns;
    check.exact += difference == 0;
    check.within_2 += difference <= 2;
    check.max_difference = std::max(check.max_difference, difference);
  }
  return check;
}

std::filesystem::path data_root(const std::string& data_dir) {
  if (!data_dir.empty()) return data_dir;
  const char* env = std::getenv("SPECDEC_DATA");
  return env && *env ? env : SPECDEC_DEFAULT_DATA_DIR;
}

}  // namespace specbench
