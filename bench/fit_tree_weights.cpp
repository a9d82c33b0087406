// Regenerates the tree drafters' scoring weights (the k...Weights initialisers in
// policies/drafters/context_tree.hpp) from the Spec-Bench replay data, as
// docs/drafters/context_tree.md describes: at every answer position of every turn (its stop token
// included), in file order, the candidates the drafter collects for the context at that point,
// labelled by whether they are the recorded next token, fit a logistic regression (Newton's
// method). The drafters run with their default options, and the history drafter keeps its history
// across turns, as specbench's does.
//
// Prints the four initialisers ready to paste, and on stderr the mean log-likelihood of a 2-fold
// cross-validation (fitted on the odd question ids, evaluated on the even ones, and the other way
// round) beside the in-sample one.
//
//   fit_tree_weights [--data-dir DIR] [--vector NAME]...
#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <span>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <specdec/policies/drafters/context_tree.hpp>

#include "chat_template.hpp"
#include "corpus.hpp"

namespace fs = std::filesystem;
using specdec::ContextTreeDrafter;
using specdec::HistoryTreeDrafter;
using specdec::token_t;

namespace {

constexpr int kFeatures = ContextTreeDrafter::feature_count;
using Weights = std::vector<double>;  // bias first, then one per feature

struct Row {
  std::array<float, kFeatures> features;
  bool produced;      // the recorded next token
  bool odd_question;  // its question id is odd (the cross-validation folds)
};

/// Which vector: the drafter and whether the candidates are collected as at the root.
struct Vector {
  const char* name;  // the constant in context_tree.hpp
  bool history;
  bool root;
};
constexpr std::array<Vector, 4> kVectors = {{{"kContextWeights", false, true},
                                             {"kContextNodeWeights", false, false},
                                             {"kHistoryWeights", true, true},
                                             {"kHistoryNodeWeights", true, false}}};

template <class Drafter>
std::vector<Row> collect_rows(const specbench::Corpus& corpus, bool root) {
  Drafter drafter;  // one for all turns: the history drafter remembers the earlier answers
  std::vector<Row> rows;
  std::vector<token_t> answer;
  for (const specbench::Turn& turn : corpus.turns) {
    drafter.begin(turn.prompt);
    answer = turn.answer;  // and the stop token after it: the replay decodes that too
    answer.push_back(corpus.stop_token);
    for (const token_t next : answer) {
      for (const auto& c : drafter.candidates(root))
        rows.push_back(Row{c.features, c.token == next, turn.question_id % 2 == 1});
      drafter.observe(std::span<const token_t>(&next, 1));
    }
  }
  return rows;
}

double probability(const Weights& w, const Row& r, const std::vector<int>& used) {
  double z = w[0];
  for (std::size_t j = 0; j < used.size(); ++j) z += w[j + 1] * r.features[used[j]];
  return 1.0 / (1.0 + std::exp(-z));
}

double log_likelihood(double p, bool produced) { return produced ? std::log(p + 1e-12) : std::log(1 - p + 1e-12); }

/// Newton's method on the rows `include` accepts, over the features `used` (those not 0 in every
/// row); a tiny ridge (1e-4) keeps the Hessian invertible. Returns compact weights (bias, used).
template <class Include>
Weights fit(const std::vector<Row>& rows, const std::vector<int>& used, Include include) {
  const int d = static_cast<int>(used.size()) + 1;
  Weights w(d, 0.0);
  std::vector<double> x(d);
  for (int iteration = 0; iteration < 20; ++iteration) {
    std::vector<double> gradient(d, 0.0), hessian(d * d, 0.0);
    for (const Row& r : rows) {
      if (!include(r)) continue;
      x[0] = 1;
      for (std::size_t j = 0; j < used.size(); ++j) x[j + 1] = r.features[used[j]];
      double z = 0;
      for (int i = 0; i < d; ++i) z += w[i] * x[i];
      const double p = 1 / (1 + std::exp(-z));
      for (int i = 0; i < d; ++i) {
        gradient[i] += (r.produced - p) * x[i];
        const double px = p * (1 - p) * x[i];
        for (int j = i; j < d; ++j) hessian[i * d + j] += px * x[j];
      }
    }
    for (int i = 0; i < d; ++i)
      for (int j = 0; j < i; ++j) hessian[i * d + j] = hessian[j * d + i];
    for (int i = 0; i < d; ++i) hessian[i * d + i] += 1e-4;
    // Gauss-Jordan: the Hessian is positive definite, so no pivoting is needed.
    for (int c = 0; c < d; ++c)
      for (int r = 0; r < d; ++r) {
        if (r == c) continue;
        const double f = hessian[r * d + c] / hessian[c * d + c];
        for (int k = 0; k < d; ++k) hessian[r * d + k] -= f * hessian[c * d + k];
        gradient[r] -= f * gradient[c];
      }
    for (int i = 0; i < d; ++i) w[i] += gradient[i] / hessian[i * d + i];
  }
  return w;
}

template <class Include>
double mean_log_likelihood(const std::vector<Row>& rows, const std::vector<int>& used, const Weights& w,
                           Include include) {
  double sum = 0;
  long n = 0;
  for (const Row& r : rows)
    if (include(r)) {
      sum += log_likelihood(probability(w, r, used), r.produced);
      ++n;
    }
  return sum / static_cast<double>(n);
}

/// As the header writes them: 4 decimals without trailing zeros, lines of at most 108 characters.
std::string initialiser(const char* name, const Weights& compact, const std::vector<int>& used) {
  std::vector<double> full(kFeatures + 1, 0.0);
  full[0] = compact[0];
  for (std::size_t j = 0; j < used.size(); ++j) full[used[j] + 1] = compact[j + 1];
  std::string out = fmt::format("  static constexpr Weights {} = {{\n", name);
  std::string line = "      ";
  for (std::size_t i = 0; i < full.size(); ++i) {
    std::string value = fmt::format("{:.4f}", full[i]);
    while (value.back() == '0') value.pop_back();
    if (value.back() == '.') value += '0';
    if (value == "-0.0") value = "0.0";
    const std::string piece = value + (i + 1 < full.size() ? "f, " : "f");
    if (line.size() + piece.size() + (i + 1 < full.size() ? 0 : 2) > 108) {
      out += line.substr(0, line.find_last_not_of(' ') + 1) + '\n';
      line = "      ";
    }
    line += piece;
  }
  return out + line + "};\n";
}

void fit_vector(const specbench::Corpus& corpus, const Vector& v) {
  const std::vector<Row> rows = v.history ? collect_rows<HistoryTreeDrafter>(corpus, v.root)
                                          : collect_rows<ContextTreeDrafter>(corpus, v.root);
  std::vector<int> used;
  for (int j = 0; j < kFeatures; ++j)
    for (const Row& r : rows)
      if (r.features[j] != 0.0f) {
        used.push_back(j);
        break;
      }
  const auto all = [](const Row&) { return true; };
  const auto odd = [](const Row& r) { return r.odd_question; };
  const auto even = [](const Row& r) { return !r.odd_question; };
  const Weights w = fit(rows, used, all);
  const Weights on_odd = fit(rows, used, odd);
  const Weights on_even = fit(rows, used, even);
  const double held_out = (mean_log_likelihood(rows, used, on_odd, even) + mean_log_likelihood(rows, used, on_even, odd)) / 2;
  std::cerr << fmt::format("{}: {} candidates, mean log-likelihood in-sample {:.5f}, 2-fold held-out {:.5f}\n",
                           v.name, rows.size(), mean_log_likelihood(rows, used, w, all), held_out);
  std::cout << initialiser(v.name, w, used) << std::flush;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("Fit the tree drafters' weights (policies/drafters/context_tree.hpp) on the Spec-Bench replay");
  std::string data_dir;
  std::vector<std::string> names;
  app.add_option("--data-dir", data_dir, "Data directory (default: $SPECDEC_DATA, else " SPECDEC_DEFAULT_DATA_DIR ")");
  std::vector<std::string> known;
  for (const Vector& v : kVectors) known.push_back(v.name);
  app.add_option("--vector", names, "Fit only this weight vector (repeatable; default: all four)")
      ->check(CLI::IsMember(known));
  CLI11_PARSE(app, argc, argv);
  try {
    const fs::path root = specbench::data_root(data_dir);
    const auto questions = specbench::load_questions(root / "specbench/question.jsonl");
    const auto answers = specbench::load_answers(root / "specbench/vicuna-7b-v1.3-greedy.jsonl");
    const specbench::Tokenizer tokenizer(root / "tokenizers/llama2.model");
    const specbench::Corpus corpus =
        specbench::build_corpus(questions, answers, tokenizer, specbench::ChatTemplate::builtin("vicuna"), {});
    for (const Vector& v : kVectors)
      if (names.empty() || std::find(names.begin(), names.end(), v.name) != names.end()) fit_vector(corpus, v);
  } catch (const std::exception& e) {
    std::cerr << "fit_tree_weights: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
