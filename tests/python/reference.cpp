// The C++ side of tests/python: what SpeculativeDecoder and the verifiers do on the inputs the
// Python tests give the module, printed for the tests to compare.
//
//   specdec_python_reference decode copy STEPS           pld, casd, tree, casd_prompt on HashTarget(16)
//   specdec_python_reference decode model STEPS CKPT     tree_history, draft_model(CKPT) on HashTarget(512)
//   specdec_python_reference decode eagle STEPS CKPT HEAD eagle(HEAD) on Llama2cTarget(CKPT)
//     prints "vocab V", "prompt ...", then per step "step" lines: parents | tokens | sources | path | next;
//     eagle also prints "features FIRST ROWS DIM values..." for what the drafter is told (begin, then
//     each step's observe, before its step line)
//   specdec_python_reference decode dresd STEPS CKPT DS  dresd(DS) on Llama2cTarget(CKPT), as eagle
//   specdec_python_reference dense_datastore CKPT DS      builds DS: CKPT's stories from the decode's prompt
//   specdec_python_reference decode pause STEPS TICK    pld on HashTarget(16), automatic budget with the
//     modelled pause, drafting TICK seconds a step (ForwardCost, tick_clock)
//   specdec_python_reference verify FILE greedy
//   specdec_python_reference verify FILE rejection TEMPERATURE TOP_K TOP_P MIN_P SEED SEQUENCE
//   specdec_python_reference verify FILE conditional EOS DELTA TOP_K TEMPERATURE SEED SEQUENCE
//     FILE: int32 n, vocab, base_position, parents[n], tokens[n], then float32 logits[n][vocab];
//     prints "path ... | next"
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <specdec/decoder.hpp>
#include <specdec/policies/drafters/casd.hpp>
#include <specdec/policies/drafters/context_tree.hpp>
#include <specdec/index/dense_datastore_builder.hpp>
#include <specdec/policies/drafters/dresd.hpp>
#include <specdec/policies/drafters/eagle.hpp>
#include <specdec/policies/drafters/pld.hpp>
#include <specdec/policies/drafters/staged.hpp>
#include <specdec/policies/verifiers/conditional.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/policies/verifiers/rejection_sampling.hpp>
#include <specdec/targets/llama2c.hpp>
#include <specdec/testing/hash_target.hpp>
#include <specdec/testing/laid_out_tree.hpp>

using namespace specdec;

namespace {

template <class T>
void print(const T* values, int n) {
  for (int i = 0; i < n; ++i) std::cout << (i ? " " : "") << values[i];
}

/// The prompt of both decodes: a repetitive sequence, so that the copy drafters find matches.
std::vector<token_t> prompt(int vocab) {
  std::vector<token_t> p;
  for (int i = 0; i < 48; ++i) p.push_back(static_cast<token_t>((i * i + 3 * (i / 7)) % 11 % vocab));
  return p;
}

void print_features(const TargetFeatures& f) {
  std::printf("features %d %d %d", f.first_position, f.rows, f.dim);
  for (int i = 0; i < f.rows * f.dim; ++i) std::printf(" %.9g", static_cast<double>(f.data[i]));
  std::printf("\n");
}

/// A feature drafter (EAGLE, DReSD), printing the features it is told.
template <class D>
struct Printing : D {
  using D::D;
  void begin(std::span<const token_t> prompt, const TargetFeatures& f) {
    print_features(f);
    D::begin(prompt, f);
  }
  void observe(std::span<const token_t> committed, const TargetFeatures& f) {
    print_features(f);
    D::observe(committed, f);
  }
};

template <class Decoder>
int decode(Decoder& decoder, int vocab, int steps) {
  const std::vector<token_t> p = prompt(vocab);
  std::cout << "vocab " << vocab << "\nprompt ";
  print(p.data(), static_cast<int>(p.size()));
  std::cout << "\n";
  decoder.prefill(p);
  for (int s = 0; s < steps; ++s) {
    decoder.step();
    const DraftTree& t = decoder.last_tree();
    const Verdict& v = decoder.last_verdict();
    std::cout << "step ";
    print(t.parents().data(), t.size());
    std::cout << " | ";
    print(t.tokens().data(), t.size());
    std::cout << " | ";
    print(t.sources().data(), t.size());
    std::cout << " | ";
    print(v.path.data(), static_cast<int>(v.path.size()));
    std::cout << " | " << v.next_token << "\n";
  }
  return 0;
}

/// The automatic budget's cost model of the pause test: a forward of n nodes costs 1 + 0.01 (n - 1)
/// seconds (test_budget.py's FORWARD).
struct ForwardCost {
  double step_seconds(int nodes, int /*context*/) const { return 1.0 + 0.01 * (nodes - 1); }
};

/// A clock that advances `tick` seconds at each reading (test_budget.py's TickClock): a step's
/// drafting takes one tick.
double tick = 0;
std::chrono::steady_clock::time_point tick_clock() {
  static double now = 0;
  now += tick;
  return std::chrono::steady_clock::time_point(
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(now)));
}

/// A tiny dense datastore: stories260K's greedy continuations of the decode's prompt and of its
/// shorter prefixes, with the model's features of every position.
int dense_datastore(const std::filesystem::path& checkpoint, const std::filesystem::path& out) {
  Llama2cTarget target(checkpoint);
  const std::vector<token_t> p = prompt(target.vocab_size());
  TokenDocuments docs;
  std::vector<float> features;
  for (std::size_t length : {20, 29, 38, 48}) {
    std::vector<token_t> doc(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(length));
    for (token_t t : target.generate(doc, 80)) doc.push_back(t);
    target.prefill(doc);
    const auto rows = target.prefill_features();
    features.insert(features.end(), rows.begin(), rows.end());
    docs.add(std::vector<std::uint32_t>(doc.begin(), doc.end()));
  }
  build_dense_datastore(docs, features, target.feature_dim(), out, {.key_dim = 16, .vocab_size = target.vocab_size()});
  return 0;
}

int verify(const std::string& file, char** args, int count) {
  std::ifstream in(file, std::ios::binary);
  std::int32_t header[3];
  in.read(reinterpret_cast<char*>(header), sizeof header);
  const int n = header[0], vocab = header[1];
  std::vector<node_t> parents(static_cast<std::size_t>(n));
  std::vector<token_t> tokens(static_cast<std::size_t>(n));
  std::vector<float> logits(static_cast<std::size_t>(n) * static_cast<std::size_t>(vocab));
  in.read(reinterpret_cast<char*>(parents.data()), static_cast<std::streamsize>(n * sizeof(node_t)));
  in.read(reinterpret_cast<char*>(tokens.data()), static_cast<std::streamsize>(n * sizeof(token_t)));
  in.read(reinterpret_cast<char*>(logits.data()), static_cast<std::streamsize>(logits.size() * sizeof(float)));
  if (!in) throw error("reference: " + file + " is truncated");
  const testing::LaidOutTree tree(parents, tokens);
  struct Rows {
    const float* data;
    int vocab;
    std::span<const float> logits(node_t node) const {
      return {data + static_cast<std::size_t>(node) * static_cast<std::size_t>(vocab), static_cast<std::size_t>(vocab)};
    }
  } rows{logits.data(), vocab};
  const TreeView view = tree.view(header[2]);
  Verdict verdict;
  const std::string kind = count > 0 ? args[0] : "";
  const auto f = [&](int i) { return std::strtof(args[i], nullptr); };
  const auto u = [&](int i) { return std::strtoull(args[i], nullptr, 10); };
  if (kind == "greedy" && count == 1) {
    ExactVerifier{}.verify(view, rows, verdict);
  } else if (kind == "rejection" && count == 7) {
    RejectionSampling v(SamplingOptions{{f(1), static_cast<int>(u(2)), f(3), f(4)}, u(5), static_cast<std::uint32_t>(u(6))});
    v.verify(view, rows, verdict);
  } else if (kind == "conditional" && count == 7) {
    ConditionalVerifier v(ConditionalParams{f(2), static_cast<int>(u(3)), static_cast<token_t>(u(1))},
                          SamplingOptions{{f(4)}, u(5), static_cast<std::uint32_t>(u(6))});
    v.verify(view, rows, verdict);
  } else {
    std::cerr << "reference: unknown verifier arguments\n";
    return 2;
  }
  std::cout << "path ";
  print(verdict.path.data(), static_cast<int>(verdict.path.size()));
  std::cout << " | " << verdict.next_token << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) try {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "decode" && argc >= 4) {
    const std::string which = argv[2];
    const int steps = std::atoi(argv[3]);
    if (which == "copy") {
      HashTarget target(16);
      SpeculativeDecoder<HashTarget, PldDrafter, CasdDrafter, ContextTreeDrafter, CasdPromptDrafter, ExactVerifier> d(
          target, DecoderOptions{.budget = 24});
      return decode(d, 16, steps);
    }
    if (which == "model" && argc == 5) {
      HashTarget target(512);
      SpeculativeDecoder<HashTarget, HistoryTreeDrafter, StagedDrafter<Llama2cTarget>, ExactVerifier> d(
          target, DecoderOptions{.budget = 16}, HistoryTreeDrafter{},
          StagedDrafter<Llama2cTarget>(Llama2cTarget(std::filesystem::path(argv[4]))), ExactVerifier{});
      return decode(d, 512, steps);
    }
  }
  if (mode == "decode" && argc == 6 && std::string(argv[2]) == "eagle") {
    const auto model = std::make_shared<const Llama2cModel>(Llama2cModel::load(argv[4]));
    Llama2cTarget target(model);
    SpeculativeDecoder<Llama2cTarget, Printing<EagleDrafter>, ExactVerifier> d(
        target, DecoderOptions{.budget = 16}, Printing<EagleDrafter>(std::filesystem::path(argv[5]), model),
        ExactVerifier{});
    return decode(d, model->config().vocab_size, std::atoi(argv[3]));
  }
  if (mode == "decode" && argc == 6 && std::string(argv[2]) == "dresd") {
    Llama2cTarget target{std::filesystem::path(argv[4])};
    const int vocab = target.vocab_size();
    SpeculativeDecoder<Llama2cTarget, Printing<DresdDrafter>, ExactVerifier> d(
        target, DecoderOptions{.budget = 16},
        Printing<DresdDrafter>(std::make_shared<const DenseDatastore>(std::filesystem::path(argv[5]))), ExactVerifier{});
    return decode(d, vocab, std::atoi(argv[3]));
  }
  if (mode == "decode" && argc == 5 && std::string(argv[2]) == "pause") {
    tick = std::strtod(argv[4], nullptr);
    HashTarget target(16);
    SpeculativeDecoder<HashTarget, PldDrafter, ExactVerifier> d(
        target, DecoderOptions{.budget = 16, .cost = ForwardCost{}, .measured_pause = false, .clock = &tick_clock});
    return decode(d, 16, std::atoi(argv[3]));
  }
  if (mode == "dense_datastore" && argc == 4) return dense_datastore(argv[2], argv[3]);
  if (mode == "verify" && argc >= 4) return verify(argv[2], argv + 3, argc - 3);
  std::cerr << "usage: see the top of tests/python/reference.cpp\n";
  return 2;
} catch (const std::exception& e) {
  std::cerr << e.what() << "\n";
  return 1;
}
