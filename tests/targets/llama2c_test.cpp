#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <specdec/core/tree.hpp>
#include <specdec/targets/llama2c.hpp>
#include <specdec/testing/laid_out_tree.hpp>
#include <specdec/testing/target_conformance.hpp>
#include <specdec/tokenizers/llama2c_tokenizer.hpp>

#include "support/data.hpp"
#include "support/random_tree.hpp"
#include "support/temp_dir.hpp"
#include "support/tiny_llama.hpp"
#include "targets/llama2c_plain.hpp"

using namespace specdec;
using testing::LaidOutTree;
using Catch::Matchers::Contains;

namespace {

std::shared_ptr<const Llama2cModel> stories() {
  static std::shared_ptr<const Llama2cModel> model = [] {
    auto path = testing::data_file("models/stories260K.bin");
    return path ? std::make_shared<const Llama2cModel>(Llama2cModel::load(*path)) : nullptr;
  }();
  return model;
}

std::vector<float> row(std::span<const float> s) { return {s.begin(), s.end()}; }

/// How far our logits may be from the independent reference's. That check is "we compute the
/// right function", not losslessness (bit equality, tested below): our exp is a couple of ulp
/// from libm's expf, which the reference calls, and moves logits by up to 1.5e-5 on stories260K.
/// An absolute bound, because that error comes from the hidden state through the classifier,
/// not from the logit's size (a relative one fails on small logits); a real bug (a wrong RoPE,
/// a missing norm, a wrong head) moves logits by far more than 1e-3.
constexpr float reference_tolerance = 3e-5f;

float max_abs_diff(std::span<const float> a, std::span<const float> b) {
  float d = 0.0f;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

/// Logits and features after running `sequence` alone (prefill all but the last, one-node tree).
std::pair<std::vector<float>, std::vector<float>> run_alone(Llama2cTarget& target, const std::vector<token_t>& sequence) {
  target.prefill(std::span(sequence).first(sequence.size() - 1));
  const LaidOutTree single({-1}, {sequence.back()});
  const auto& out = target.forward(single.view(target.cached()));
  return {row(out.logits(0)), row(out.features(0))};
}

}  // namespace

TEST_CASE("Llama2cModel reads stories260K's header", "[llama2c]") {
  auto model = stories();
  if (!model) return;
  const LlamaConfig& c = model->config();
  CHECK(c.dim == 64);
  CHECK(c.hidden_dim == 172);
  CHECK(c.n_layers == 5);
  CHECK(c.n_heads == 8);
  CHECK(c.n_kv_heads == 4);
  CHECK(c.vocab_size == 512);
  CHECK(c.seq_len == 512);
  CHECK(c.shared_classifier);
  const Llama2cTarget target(model);
  CHECK(target.max_positions() == 512);
  CHECK(target.feature_dim() == 64);
}

TEST_CASE("Llama2cTarget: greedy text equals an independent single-sequence forward", "[llama2c]") {
  auto model = stories();
  auto tok_path = testing::data_file("models/tok512.bin");
  if (!model || !tok_path) return;
  const auto tokenizer = Llama2cTokenizer::load(*tok_path, model->config().vocab_size);
  auto ckpt = testing::data_file("models/stories260K.bin");
  Llama2cTarget target(model);
  for (const char* text : {"Once upon a time", "Lily and Tom went to the park.", "The dog"}) {
    const std::vector<token_t> prompt = tokenizer.encode(text);
    testing::PlainLlama plain(*ckpt);
    const std::vector<token_t> expected = plain.greedy(prompt, 150);
    const std::vector<token_t> got = target.generate(prompt, 150);
    INFO("prompt: " << text);
    INFO("plain:  " << tokenizer.decode(expected, prompt.back()));
    INFO("target: " << tokenizer.decode(got, prompt.back()));
    CHECK(got == expected);
  }
  // The text is a story, not noise: it uses frequent English words.
  const std::string story = tokenizer.decode(target.generate(tokenizer.encode("Once upon a time"), 100));
  std::cout << "stories260K greedy: Once upon a time" << story << "\n";
  CHECK_THAT(story, Contains(" the ") || Contains(" was ") || Contains(" and "));
}

TEST_CASE("Llama2cTarget: logits match the independent forward at every position", "[llama2c]") {
  auto model = stories();
  if (!model) return;
  testing::PlainLlama plain(*testing::data_file("models/stories260K.bin"));
  Llama2cTarget target(model);
  std::mt19937_64 rng(7);
  std::vector<token_t> sequence{1};
  for (int i = 0; i < 60; ++i) sequence.push_back(static_cast<token_t>(rng() % 512));
  float worst = 0.0f;
  for (std::size_t n = 1; n <= sequence.size(); ++n) {
    const auto expected = plain.step(sequence[n - 1], static_cast<int>(n) - 1);
    const auto [logits, features] = run_alone(target, std::vector<token_t>(sequence.begin(), sequence.begin() + n));
    worst = std::max(worst, max_abs_diff(logits, expected));
  }
  INFO("largest difference " << worst);
  CHECK(worst <= reference_tolerance);
}

TEST_CASE("Llama2cTarget: a tree forward gives every node the logits of its path run alone", "[llama2c]") {
  auto model = stories();
  if (!model) return;
  Llama2cTarget tree_target(model), alone(model);
  std::mt19937_64 rng(11);
  const std::vector<token_t> prompt{1, 403, 407, 261, 378, 292};
  for (int trial = 0; trial < 6; ++trial) {
    const int n = trial == 0 ? 1 : 5 + trial * 9;
    auto random = testing::random_tree(rng, n, 512);
    if (trial == 5) {  // a pure chain as well
      for (int i = 1; i < n; ++i) random.parent[i] = i - 1;
    }
    const LaidOutTree tree(random.parent, random.token);
    tree_target.prefill(prompt);
    const auto& out = tree_target.forward(tree.view(tree_target.cached()));
    float worst = 0.0f;
    bool bit_identical = true;
    for (int i = 0; i < n; ++i) {
      std::vector<token_t> sequence = prompt;
      const auto path = tree.path_tokens(i);
      sequence.insert(sequence.end(), path.begin(), path.end());
      const auto [logits, features] = run_alone(alone, sequence);
      worst = std::max(worst, max_abs_diff(out.logits(i), logits));
      bit_identical = bit_identical && std::ranges::equal(out.logits(i), logits) &&
                      std::ranges::equal(out.features(i), features);
      CHECK(out.argmax(i) == core::argmax_row(logits.data(), 512));
    }
    // features(i) is the classifier's input: with the shared classifier, logit v is its dot
    // product with token v's embedding, summed in input order, each step fused or not as the
    // kernels are (models/host_kernels.hpp).
    const auto& emb = model->embedding();
    const bool fused = llama::kernels().fused;
    for (int i = 0; i < n; i += 7) {
      for (int v : {0, 1, 100, 511}) {
        float dot = 0.0f;
        for (int j = 0; j < 64; ++j) {
          const float w = emb[static_cast<std::size_t>(v) * 64 + j], x = out.features(i)[j];
          dot = fused ? std::fma(w, x, dot) : dot + w * x;
        }
        CHECK(dot == out.logits(i)[v]);
      }
    }
    INFO("tree of " << n << " nodes");
    CHECK(worst <= 1e-5f);
    // Sums run in the same order in both, so the results are the same bits (what makes
    // speculative decoding with the exact verifier reproduce generate() exactly).
    CHECK(bit_identical);
  }
}

TEST_CASE("Llama2cTarget: commit keeps exactly the accepted path in the KV cache", "[llama2c]") {
  auto model = stories();
  if (!model) return;
  Llama2cTarget target(model), alone(model);
  std::mt19937_64 rng(5);
  const std::vector<token_t> prompt{1, 403, 407};
  std::vector<token_t> committed = prompt;
  target.prefill(prompt);
  token_t root = 300;
  for (int step = 0; step < 8; ++step) {
    const auto random = testing::random_tree(rng, 3 + 4 * step, 512);
    std::vector<token_t> tokens = random.token;
    tokens[0] = root;
    const LaidOutTree tree(random.parent, tokens);
    target.forward(tree.view(target.cached()));
    // Accept the path to the last node (the deepest-indexed, its ancestors are spread out) —
    // or only the root on even steps.
    std::vector<node_t> path;
    for (int k = step % 2 ? tree.view(0).size - 1 : 0; k >= 0; k = tree.parent[k]) path.insert(path.begin(), k);
    target.commit(path);
    for (node_t k : path) committed.push_back(tree.token[k]);
    REQUIRE(target.cached() == static_cast<int>(committed.size()));
    root = static_cast<token_t>(rng() % 512);
  }
  // The cache now behaves exactly like one built from the committed tokens.
  const LaidOutTree probe({-1, 0, 0, 1}, {root, 17, 260, 300});
  const auto& out = target.forward(probe.view(target.cached()));
  alone.prefill(committed);
  const auto& expected = alone.forward(probe.view(alone.cached()));
  for (int i = 0; i < 4; ++i) CHECK(std::ranges::equal(out.logits(i), expected.logits(i)));
}

TEST_CASE("Llama2cTarget: a tree wider than the spare cache slots grows the cache", "[llama2c]") {
  auto model = stories();
  if (!model) return;
  Llama2cTarget target(model), alone(model);
  std::vector<token_t> prompt(500);
  for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<token_t>((i * 31 + 7) % 512);
  target.prefill(prompt);
  // 300 nodes (depths 1 to 3) need slots up to 800: more than were reserved.
  std::vector<node_t> parents{-1};
  std::vector<token_t> tokens{9};
  for (int i = 1; i < 300; ++i) {
    parents.push_back(i < 150 ? 0 : i - 149);
    tokens.push_back(static_cast<token_t>((i * 17) % 512));
  }
  const LaidOutTree tree(parents, tokens);
  const auto& out = target.forward(tree.view(500));
  for (int i : {0, 1, 149, 150, 299}) {
    std::vector<token_t> sequence = prompt;
    const auto path = tree.path_tokens(i);
    sequence.insert(sequence.end(), path.begin(), path.end());
    CHECK(std::ranges::equal(out.logits(i), run_alone(alone, sequence).first));
  }
  target.commit(std::vector<node_t>{0, 1, 150, 299});
  prompt.insert(prompt.end(), {9, tokens[1], tokens[150], tokens[299]});
  const LaidOutTree next({-1}, {4});
  const auto after = row(target.forward(next.view(504)).logits(0));
  alone.prefill(prompt);
  CHECK(std::ranges::equal(after, alone.forward(next.view(504)).logits(0)));
}

TEST_CASE("Llama2cTarget: forward and commit reject bad input", "[llama2c][errors]") {
  auto model = stories();
  if (!model) return;
  Llama2cTarget target(model);
  const LaidOutTree tree({-1, 0, 1}, {5, 6, 7});
  CHECK_THROWS_WITH(target.forward(tree.view(0)), Contains("prefill() first"));
  CHECK_THROWS_WITH(target.commit(std::vector<node_t>{0}), Contains("no forward()"));
  const std::vector<token_t> bad_prompt{1, 512};
  CHECK_THROWS_WITH(target.prefill(bad_prompt), Contains("512") && Contains("outside the vocabulary"));
  const std::vector<token_t> negative{1, -3};
  CHECK_THROWS_WITH(target.prefill(negative), Contains("-3"));
  CHECK_THROWS_WITH(target.generate(negative, 5), Contains("-3"));
  const std::vector<token_t> prompt{1, 10, 20};
  target.prefill(prompt);
  CHECK_THROWS_WITH(target.forward(tree.view(2)), Contains("position 2") && Contains("holds 3"));
  const LaidOutTree bad_token({-1, 0}, {5, 9999});
  CHECK_THROWS_WITH(target.forward(bad_token.view(3)), Contains("9999") && Contains("tree node 1"));
  target.forward(tree.view(3));
  CHECK_THROWS_WITH(target.commit(std::vector<node_t>{1}), Contains("root"));
  CHECK_THROWS_WITH(target.commit(std::vector<node_t>{0, 2}), Contains("node 2"));
  CHECK_THROWS_WITH(target.commit(std::vector<node_t>{0, 1, 7}), Contains("node 7"));
  target.commit(std::vector<node_t>{0, 1});
  CHECK(target.cached() == 5);
  // A tree deeper than the positions left.
  std::vector<token_t> long_prompt(510, 7);
  target.prefill(long_prompt);
  CHECK_THROWS_WITH(target.forward(tree.view(510)), Contains("position 512") && Contains("512 positions"));
  CHECK_NOTHROW(target.forward(LaidOutTree({-1, 0}, {5, 6}).view(510)));
  CHECK_THROWS_WITH(target.generate(long_prompt, 10), Contains("exceed"));
  std::vector<token_t> too_long(513, 7);
  CHECK_THROWS_WITH(target.prefill(too_long), Contains("513"));
}

TEST_CASE("Llama2cTarget: decode is generate's second half, and rejects bad input", "[llama2c]") {
  auto model = stories();
  if (!model) return;
  Llama2cTarget target(model);
  CHECK_THROWS_WITH(target.decode(5, 3), Contains("prefill() first"));
  const std::vector<token_t> prompt{1, 403, 407, 261, 378};
  const std::vector<token_t> reference = target.generate(prompt, 40);
  target.prefill(std::span(prompt).first(prompt.size() - 1));
  CHECK(target.decode(prompt.back(), 40) == reference);
  CHECK(target.cached() == static_cast<int>(prompt.size()) - 1 + 40);
  // Stops after a stop token, included.
  const std::vector<token_t> stop{reference[10]};
  target.prefill(std::span(prompt).first(prompt.size() - 1));
  const std::vector<token_t> stopped = target.decode(prompt.back(), 40, stop);
  CHECK(stopped == std::vector<token_t>(reference.begin(), std::find(reference.begin(), reference.end(), stop[0]) + 1));
  target.prefill(std::span(prompt).first(prompt.size() - 1));
  CHECK_THROWS_WITH(target.decode(prompt.back(), -1), Contains("n must be >= 0"));
  CHECK_THROWS_WITH(target.decode(512, 1), Contains("512") && Contains("outside the vocabulary"));
  CHECK_THROWS_WITH(target.decode(prompt.back(), 509), Contains("4 cached tokens + 509") && Contains("512 positions"));
  CHECK(target.decode(prompt.back(), 0).empty());
  CHECK(target.decode(prompt.back(), 508).size() == 508);  // up to the last position
}

TEST_CASE("Llama2cTarget: decode with features gives forward()'s features(0) of each step, bit for bit",
          "[llama2c]") {
  auto model = stories();
  if (!model) return;
  Llama2cTarget target(model);
  const std::vector<token_t> prompt{1, 403, 407, 261, 378};
  const std::vector<token_t> stop{};
  std::vector<float> features{1.0f};  // replaced, not appended to
  target.prefill(std::span(prompt).first(prompt.size() - 1));
  const std::vector<token_t> tokens = target.decode(prompt.back(), 30, stop, features);
  REQUIRE(tokens.size() == 30);
  REQUIRE(features.size() == 30 * static_cast<std::size_t>(target.feature_dim()));
  // Step by step through forward(): the root alone, committed.
  target.prefill(std::span(prompt).first(prompt.size() - 1));
  token_t last = prompt.back();
  const std::vector<node_t> root{0};
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const LaidOutTree tree({-1}, {last});
    const auto& out = target.forward(tree.view(target.cached()));
    const std::span<const float> row = out.features(0);
    CHECK(std::equal(row.begin(), row.end(), features.begin() + static_cast<std::ptrdiff_t>(i * row.size())));
    last = out.argmax(0);
    CHECK(last == tokens[i]);
    target.commit(root);
  }
}

// ---- bad files ----------------------------------------------------------------------------

namespace {

using testing::TempDir;
using testing::file_bytes;

std::string header(std::vector<std::int32_t> h) {
  return std::string(reinterpret_cast<const char*>(h.data()), h.size() * 4);
}

}  // namespace

TEST_CASE("Llama2cModel rejects missing, truncated, wrong-sized and garbage files", "[llama2c][errors]") {
  TempDir dir;
  CHECK_THROWS_WITH(Llama2cModel::load(dir.path / "nope.bin"), Contains("nope.bin") && Contains("no such file"));
  CHECK_THROWS_WITH(Llama2cModel::load(dir.path), Contains("is a directory, not a file"));
  CHECK_THROWS_WITH(Llama2cModel::load(dir.write("empty.bin", "")), Contains("0 bytes") && Contains("header"));
  CHECK_THROWS_WITH(Llama2cModel::load(dir.write("garbage.bin", std::string(4096, '\xff'))),
                    Contains("not a llama2.c checkpoint") && Contains("dim -1"));
  CHECK_THROWS_WITH(Llama2cModel::load(dir.write("odd.bin", header({64, 172, 5, 7, 7, 512, 512}))),
                    Contains("n_heads 7 does not divide dim 64"));
  CHECK_THROWS_WITH(Llama2cModel::load(dir.write("gqa.bin", header({64, 172, 5, 8, 3, 512, 512}))),
                    Contains("n_kv_heads 3"));
  CHECK_THROWS_WITH(Llama2cModel::load(dir.write("huge_vocab.bin", header({64, 172, 5, 8, 4, -2147483647 - 1, 512}))),
                    Contains("vocab_size -2147483648"));

  // A well-formed tiny model: dim 4, hidden 6, 1 layer, 2 heads, 1 kv head, vocab 5, seq_len 3.
  LlamaConfig c{4, 6, 1, 2, 1, 5, 3, true};
  const std::string tiny = header({4, 6, 1, 2, 1, 5, 3}) + std::string(Llama2cModel::weight_floats(c) * 4, '\0');
  CHECK_NOTHROW(Llama2cModel::load(dir.write("tiny.bin", tiny)));
  CHECK_THROWS_WITH(Llama2cModel::load(dir.write("truncated.bin", tiny.substr(0, tiny.size() - 4))),
                    Contains(std::to_string(tiny.size() - 4) + " bytes") && Contains("truncated"));
  CHECK_THROWS_WITH(Llama2cModel::load(dir.write("long.bin", tiny + "xx")), Contains("needs exactly " + std::to_string(tiny.size())));
  // The same weights read as an unshared classifier need vocab * dim more floats.
  CHECK_THROWS_WITH(Llama2cModel::load(dir.write("unshared.bin", header({4, 6, 1, 2, 1, -5, 3}) + tiny.substr(28))),
                    Contains("unshared classifier") && Contains("truncated"));
  const std::string unshared = header({4, 6, 1, 2, 1, -5, 3}) + tiny.substr(28) + std::string(5 * 4 * 4, '\0');
  const Llama2cModel m = Llama2cModel::load(dir.write("unshared_ok.bin", unshared));
  CHECK_FALSE(m.config().shared_classifier);
  CHECK(m.config().vocab_size == 5);
  CHECK_THROWS_WITH(Llama2cTarget(dir.path / "missing.bin"), Contains("missing.bin"));
}

namespace {

/// A checkpoint with random weights for header h (vocab_size negative: unshared classifier).
std::string random_checkpoint(const std::vector<std::int32_t>& h, std::uint64_t seed) {
  LlamaConfig c{h[0], h[1], h[2], h[3], h[4], std::abs(h[5]), h[6], h[5] > 0};
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.3f);
  std::vector<float> w(Llama2cModel::weight_floats(c));
  for (float& x : w) x = normal(rng);
  return header(h) + std::string(reinterpret_cast<const char*>(w.data()), w.size() * 4);
}

}  // namespace

TEST_CASE("Llama2cTarget matches the plain forward on random checkpoints of other shapes", "[llama2c]") {
  TempDir dir;
  // {dim, hidden, layers, heads, kv_heads, vocab (negative: unshared classifier), seq_len}
  const std::vector<std::vector<std::int32_t>> shapes{
      {16, 24, 2, 4, 2, -40, 48},  // grouped-query attention, unshared classifier
      {24, 40, 3, 3, 3, 50, 64},   // multi-head attention (kv_heads == heads), shared classifier
      {32, 20, 1, 2, 1, -30, 40},  // multi-query attention, head size 16
  };
  for (std::size_t s = 0; s < shapes.size(); ++s) {
    const auto path = dir.write("random" + std::to_string(s) + ".bin", random_checkpoint(shapes[s], s + 1));
    auto model = std::make_shared<const Llama2cModel>(Llama2cModel::load(path));
    Llama2cTarget target(model), alone(model);
    testing::PlainLlama plain(path);
    const int vocab = target.vocab_size();
    INFO("shape " << s << ": " << Llama2cModel::describe(model->config()));
    const std::vector<token_t> prompt{1, 5, static_cast<token_t>(vocab - 1), 7};
    CHECK(target.generate(prompt, 30) == plain.greedy(prompt, 30));
    float worst = 0.0f;
    std::vector<token_t> sequence{3};
    for (int pos = 0; pos < 20; ++pos) {
      const auto expected = plain.step(sequence.back(), pos);
      worst = std::max(worst, max_abs_diff(run_alone(target, sequence).first, expected));
      sequence.push_back(static_cast<token_t>((pos * 13 + 5) % vocab));
    }
    CHECK(worst <= reference_tolerance);
    // And a tree forward on it gives each node its path's logits.
    std::mt19937_64 rng(s);
    const auto random = testing::random_tree(rng, 12, vocab);
    const LaidOutTree tree(random.parent, random.token);
    target.prefill(prompt);
    const auto& out = target.forward(tree.view(target.cached()));
    for (int i = 0; i < 12; ++i) {
      std::vector<token_t> seq = prompt;
      const auto p = tree.path_tokens(i);
      seq.insert(seq.end(), p.begin(), p.end());
      CHECK(std::ranges::equal(out.logits(i), run_alone(alone, seq).first));
    }
  }
}

TEST_CASE("Llama2cModel rejects a truncated or extended stories260K", "[llama2c][errors]") {
  auto real = testing::data_file("models/stories260K.bin");
  if (!real) return;
  TempDir dir;
  const std::string bytes = file_bytes(*real);
  CHECK_THROWS_WITH(Llama2cModel::load(dir.write("cut.bin", bytes.substr(0, bytes.size() / 2))),
                    Contains("dim 64") && Contains("needs exactly 1056540 bytes") && Contains("truncated"));
  CHECK_THROWS_WITH(Llama2cModel::load(dir.write("extended.bin", bytes + std::string(64, '\0'))),
                    Contains("1056604 bytes"));
}

TEST_CASE("Llama2cTokenizer: encode, decode and bad files", "[llama2c][tokenizer]") {
  auto path = testing::data_file("models/tok512.bin");
  if (!path) return;
  const auto tok = Llama2cTokenizer::load(*path, 512);
  CHECK(tok.vocab_size() == 512);
  const auto ids = tok.encode("Once upon a time");
  REQUIRE(ids.size() >= 3);
  CHECK(ids.front() == Llama2cTokenizer::bos);
  CHECK(tok.decode(ids) == "Once upon a time");
  // BPE merges: fewer tokens than characters, and each token is a piece of the text.
  CHECK(ids.size() < 1 + std::string(" Once upon a time").size());
  const auto with_eos = tok.encode("Hi", false, true);
  CHECK(with_eos.back() == Llama2cTokenizer::eos);
  CHECK(tok.encode("", false, false).empty());
  // Characters outside the 512-token vocabulary fall back to <0xXX> byte tokens and come back.
  const std::string unusual = "caf\xc3\xa9 \xf0\x9f\x99\x82 ~";
  const auto bytes = tok.encode(unusual);
  CHECK(std::ranges::any_of(bytes, [&](token_t t) { return tok.piece(t).rfind("<0x", 0) == 0; }));
  CHECK(tok.decode(bytes) == unusual);
  CHECK_THROWS_WITH(tok.decode(std::vector<token_t>{512}), Contains("512"));

  TempDir dir;
  const std::string good = file_bytes(*path);
  CHECK_THROWS_WITH(Llama2cTokenizer::load(dir.path / "none.bin"), Contains("none.bin") && Contains("no such file"));
  CHECK_THROWS_WITH(Llama2cTokenizer::load(dir.write("cut.bin", good.substr(0, good.size() - 3))), Contains("truncated"));
  CHECK_THROWS_WITH(Llama2cTokenizer::load(dir.write("zero.bin", header({0}))), Contains("max_token_length 0"));
  CHECK_THROWS_WITH(Llama2cTokenizer::load(dir.write("long.bin", header({4, 0, 9}) + "abcdefghi")),
                    Contains("token 0 has length 9"));
  CHECK_THROWS_WITH(Llama2cTokenizer::load(*path, 32000), Contains("512 tokens") && Contains("32000"));
}

TEST_CASE("Llama2cTarget: a small checkpoint claiming 1024 layers x 2^20 positions does not reserve its whole KV cache (std::bad_alloc)",
          "[llama2c][errors]") {
  // Issue 20: this 8.5 MB file passed every check and the constructor reserved about 17 GB.
  TempDir dir;
  const auto path = dir.write("huge_cache.bin", random_checkpoint({2, 1, 1024, 1, 1, 2, 1 << 20}, 20));
  Llama2cTarget target(path);
  CHECK(target.max_positions() == (1 << 20));
  CHECK(target.kv_cache_bytes() < (std::size_t{64} << 20));
  const std::vector<token_t> prompt{1, 0, 1, 1};
  target.prefill(prompt);
  CHECK(target.cached() == 4);
}

TEST_CASE("Llama2cTarget passes the target conformance kit bit for bit", "[llama2c][conformance]") {
  TempDir dir;
  testing::write_tiny_llama(dir.path / "tiny.bin");
  Llama2cTarget tiny(dir.path / "tiny.bin");
  const testing::ConformanceReport report = testing::check_target(tiny);
  INFO(report.str());
  CHECK(report.ok());
  if (!stories()) return;  // data_file printed the skip
  Llama2cTarget target(stories());
  const testing::ConformanceReport stories_report = testing::check_target(target, {.prompts = 2});
  INFO(stories_report.str());
  CHECK(stories_report.ok());
}
