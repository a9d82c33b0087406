// The replay data: questions and recorded answers (jsonl), tokenised once with a chat template.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <specdec/config.hpp>

#include "chat_template.hpp"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace specbench {

using specdec::token_t;

/// A SentencePiece model. encode() treats the model's BOS and EOS pieces (`<s>`, `</s>`) in the
/// text as those special ids and encodes each text chunk between them separately, with
/// SentencePiece's dummy-prefix space: what the Hugging Face "slow" Llama tokenizer does.
class Tokenizer {
 public:
  /// Throws input_error when the file is missing or not a SentencePiece model.
  explicit Tokenizer(const std::filesystem::path& model);
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  std::vector<token_t> encode(std::string_view text) const;
  int vocab_size() const;
  token_t bos() const;
  token_t eos() const;
  /// The text that encode() turns into eos() (e.g. "</s>").
  const std::string& eos_piece() const { return eos_piece_; }

 private:
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::string bos_piece_;
  std::string eos_piece_;
};

/// One line of the questions file.
struct Question {
  int id = 0;
  std::string category;
  std::vector<std::string> turns;
};

/// One line of the answers file: the recorded answer text per turn and, when the file has them
/// (`choices[0].new_tokens`), the token counts recorded with them.
struct Answer {
  int id = 0;
  std::vector<std::string> turns;
  std::vector<int> recorded_tokens;
};

/// Where the data files are looked for: `data_dir` when not empty, else $SPECDEC_DATA, else the
/// build's SPECDEC_DEFAULT_DATA_DIR (../shared/data beside the checkout).
std::filesystem::path data_root(const std::string& data_dir);

/// Throw input_error naming the file and line of a malformed entry.
std::vector<Question> load_questions(const std::filesystem::path& file);
std::vector<Answer> load_answers(const std::filesystem::path& file);

/// One turn to replay: the prompt as the model saw it and the recorded answer, tokenised.
struct Turn {
  int question_id = 0;
  std::string category;
  int index = 0;                 ///< 0 for the first user turn of the question
  std::vector<token_t> prompt;   ///< template applied; earlier turns carry their recorded answers
  std::vector<token_t> answer;   ///< the recorded answer, without the stop token
  /// Tokens the model generated for this turn as recorded with the answer (EOS included when it
  /// stopped on it, as Spec-Bench counts), -1 when unknown.
  int recorded_tokens = -1;
  /// Corpus::history[0, history_end) comes before this turn in corpus order (--warm-history).
  std::size_t history_end = 0;
};

struct CorpusOptions {
  /// Replay only these (empty: all); they may hold comma-separated lists ("writing, qa":
  /// specdec::tools::list_items), and a name matches the file's regardless of case.
  std::vector<std::string> categories;
  int max_turns = 0;                    ///< replay at most this many turns, in file order (0: all)
  /// "odd" or "even": replay only the questions whose id has that parity (empty: all), e.g. to
  /// evaluate REST on one fold with a datastore built from the other.
  std::string parity;
};

struct Corpus {
  std::vector<Turn> turns;
  /// `--turns K --warm-history`: the turns the subsample left out, in corpus order, up to the last
  /// kept turn. The replay decodes each one before the kept turn that follows it, neither costed
  /// nor counted, so drafters that learn across turns (tree_history) hold what a server that had
  /// served the whole corpus would hold.
  std::vector<Turn> history;
  std::vector<std::string> categories;  ///< of the turns, in order of first appearance
  int vocab_size = 0;
  token_t stop_token = 0;               ///< follows every answer (the tokenizer's EOS)
};

/// Pairs every question with its answer (input_error naming a question without one, or with a
/// different number of turns) and tokenises each turn's prompt and answer.
Corpus build_corpus(const std::vector<Question>& questions, const std::vector<Answer>& answers,
                    const Tokenizer& tokenizer, const ChatTemplate& chat, const CorpusOptions& options);

/// Keeps `count` turns spread evenly over the corpus (turn floor(i N / count) of N, i < count) and
/// their categories: a fixed subsample, the same turns every run. No-op when count >= N. With
/// `keep_history`, the turns left out before the last kept one move to corpus.history.
void sample_turns(Corpus& corpus, int count, bool keep_history = false);
/// Positions a model's cache needs to replay turn `t` with trees of up to `room` nodes: its prompt,
/// answer and stop token, and the room.
long positions_needed(const Turn& t, int room);
/// The most positions_needed of the corpus's turns (0 without turns).
long positions_needed(const Corpus& corpus, int room);
/// Drops the turns whose positions_needed exceed `positions` (a model that costs the replay must
/// hold every tree); returns how many were dropped.
int drop_turns_longer_than(Corpus& corpus, int positions, int room);
/// Fits `corpus` to the timed model `name` (`--timed-model`) of `vocab` tokens and `positions`
/// positions: input_error when its vocabulary is smaller than the replay's or no turn fits; drops
/// (and says so on stderr) the turns it cannot hold with `budget` draft nodes.
void fit_to_timed_model(Corpus& corpus, const std::string& name, int vocab, int positions, int budget);

/// How closely the tokenised answers plus the stop token (what the replay decodes) match the
/// token counts recorded with them.
struct TokenCountCheck {
  int turns = 0;      ///< turns that have a recorded count
  int exact = 0;      ///< ... equal to answer.size() + 1
  int within_2 = 0;   ///< ... within ±2 tokens
  int max_difference = 0;
};
TokenCountCheck check_token_counts(const Corpus& corpus);

}  // namespace specbench
