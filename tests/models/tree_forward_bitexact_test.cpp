// A tree forward gives every node, bit for bit, the logits and features of a single-token forward
// of its path: for trees of 1..256 nodes (chains, stars, random), 1..4 threads and several prefill
// chunkings, on stories260K (skipped without the data file) and on a small random model that is
// always there; for each ISA path this CPU runs (Options::isa), in one process (stories260K: the
// portable path and the best). The paths differ (fused multiply-adds or not), each is
// consistent with itself.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include <specdec/targets/llama2c.hpp>
#include <specdec/testing/laid_out_tree.hpp>

#include "support/data.hpp"
#include "support/random_tree.hpp"
#include "support/temp_dir.hpp"
#include "support/tiny_llama.hpp"

using namespace specdec;
using testing::LaidOutTree;

namespace {

struct Row {
  std::vector<float> logits, features;
};

// Single-token forwards of paths after a fixed prompt, remembered by path: plain decoding's one
// forward per token. The cache keeps the last path's tokens, so a path that shares a prefix with it
// rewinds to that prefix instead of recomputing the whole sequence.
class Reference {
 public:
  Reference(std::shared_ptr<const Llama2cModel> model, std::vector<token_t> prompt, llama::HostIsa isa)
      : target_(std::move(model), Llama2cTarget::Options{1, isa}), prompt_(std::move(prompt)) {
    target_.prefill(prompt_);
  }
  const Row& of(const std::vector<token_t>& path) {
    auto it = rows_.find(path);
    if (it != rows_.end()) return it->second;
    const std::span<const token_t> before = std::span(path).first(path.size() - 1);
    const auto kept = std::mismatch(cached_path_.begin(), cached_path_.end(), before.begin(), before.end());
    cached_path_.erase(kept.first, cached_path_.end());
    target_.rewind(static_cast<int>(prompt_.size() + cached_path_.size()));
    for (auto t = kept.second; t != before.end(); ++t) {
      one_forward(*t);
      target_.commit(std::vector<node_t>{0});
      cached_path_.push_back(*t);
    }
    const auto& out = one_forward(path.back());
    Row r{{out.logits(0).begin(), out.logits(0).end()}, {out.features(0).begin(), out.features(0).end()}};
    return rows_.emplace(path, std::move(r)).first->second;
  }

 private:
  const Llama2cTarget::Output& one_forward(token_t token) {
    const LaidOutTree single({-1}, {token});
    return target_.forward(single.view(target_.cached()));
  }

  Llama2cTarget target_;
  std::vector<token_t> prompt_;
  std::vector<token_t> cached_path_;  // the tokens after the prompt in target_'s cache
  std::map<std::vector<token_t>, Row> rows_;
};

// Puts `prompt` in the cache in chunks of `chunk` tokens: a prefill, then chains forwarded and
// committed whole.
void fill(Llama2cTarget& target, const std::vector<token_t>& prompt, int chunk) {
  const int n = static_cast<int>(prompt.size());
  const int first = std::min(n, chunk);
  target.prefill(std::span(prompt).first(static_cast<std::size_t>(first)));
  for (int at = first; at < n; at += chunk) {
    const int len = std::min(chunk, n - at);
    std::vector<node_t> parent(static_cast<std::size_t>(len)), path(static_cast<std::size_t>(len));
    for (int i = 0; i < len; ++i) parent[static_cast<std::size_t>(i)] = i - 1, path[static_cast<std::size_t>(i)] = i;
    const LaidOutTree chain(parent, std::vector<token_t>(prompt.begin() + at, prompt.begin() + at + len));
    target.forward(chain.view(target.cached()));
    target.commit(path);
  }
}

LaidOutTree make_tree(const std::string& shape, int n, int vocab, std::mt19937_64& rng) {
  std::vector<node_t> parent(static_cast<std::size_t>(n));
  std::vector<token_t> token(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    parent[static_cast<std::size_t>(i)] = i == 0 ? -1 : shape == "chain" ? i - 1 : 0;  // else a star
    token[static_cast<std::size_t>(i)] = static_cast<token_t>(shape == "chain" ? (i * 37 + 11) % vocab : rng() % vocab);
  }
  if (shape == "random") {
    const auto t = testing::random_tree(rng, n, vocab);
    return LaidOutTree(t.parent, t.token);
  }
  return LaidOutTree(parent, token);
}

// The ISA paths this CPU runs (the portable one always).
std::vector<llama::HostIsa> runnable_isas() {
  std::vector<llama::HostIsa> all;
  for (llama::HostIsa isa : {llama::HostIsa::portable, llama::HostIsa::avx2, llama::HostIsa::avx512})
    if (llama::host_isa_unavailable(isa).empty()) all.push_back(isa);
  return all;
}

void sweep(const std::shared_ptr<const Llama2cModel>& model, const std::vector<int>& sizes, llama::HostIsa isa,
           int prompt_length = 19) {
  const int vocab = model->config().vocab_size;
  std::vector<token_t> prompt;
  for (int i = 0; i < prompt_length; ++i) prompt.push_back(static_cast<token_t>((i * 53 + 1) % vocab));
  Reference reference(model, prompt, isa);
  for (int threads : {1, 2, 3, 4}) {
    Llama2cTarget target(model, Llama2cTarget::Options{threads, isa});
    if (isa != llama::HostIsa::automatic) REQUIRE(std::string(target.isa()) == llama::host_isa_name(isa));
    for (const char* shape : {"chain", "star", "random"}) {
      for (int n : sizes) {
        const int chunk = std::vector<int>{19, 1, 7, 5}[static_cast<std::size_t>(n + threads) % 4];
        std::mt19937_64 rng(static_cast<std::uint64_t>(n) * 7919u + 13u);
        const LaidOutTree tree = make_tree(shape, n, vocab, rng);
        fill(target, prompt, chunk);
        const auto& out = target.forward(tree.view(target.cached()));
        int mismatches = 0;
        for (int i = 0; i < n; ++i) {
          const Row& want = reference.of(tree.path_tokens(i));
          const auto logits = out.logits(i), features = out.features(i);
          if (std::memcmp(logits.data(), want.logits.data(), want.logits.size() * sizeof(float)) != 0 ||
              std::memcmp(features.data(), want.features.data(), want.features.size() * sizeof(float)) != 0)
            ++mismatches;
        }
        INFO(llama::host_isa_name(isa) << ": " << shape << " tree of " << n << " nodes, " << threads
                                       << " threads, prefill chunks of " << chunk);
        CHECK(mismatches == 0);
      }
    }
  }
}

}  // namespace

TEST_CASE("Tree forward is bit-exact per node on a random model: sizes 1..256, chain/star/random, 1..4 threads",
          "[llama2c][bitexact]") {
  testing::TempDir dir;
  testing::TinyLlamaShape shape;
  shape.dim = 48, shape.hidden = 100, shape.layers = 2, shape.heads = 6, shape.kv_heads = 2, shape.vocab = 300,
  shape.seq_len = 300;
  testing::write_tiny_llama(dir.path / "tiny.bin", shape, 5);
  const auto model = std::make_shared<const Llama2cModel>(Llama2cModel::load(dir.path / "tiny.bin"));
  for (llama::HostIsa isa : runnable_isas()) sweep(model, {1, 2, 3, 5, 8, 13, 16, 17, 31, 64, 100, 129, 256}, isa);
}

// Options::isa does switch the path: the portable path's logits differ from a fused path's (the
// roundings of separate multiplies and adds are not an FMA's), and each fused path agrees with the
// other (the same operations in the same order).
TEST_CASE("Options::isa runs the path it names: portable and fused logits differ, AVX2 and AVX-512 agree",
          "[llama2c][bitexact][isa]") {
  testing::TempDir dir;
  testing::write_tiny_llama(dir.path / "tiny.bin");
  const auto model = std::make_shared<const Llama2cModel>(Llama2cModel::load(dir.path / "tiny.bin"));
  std::map<std::string, std::vector<float>> logits;
  for (llama::HostIsa isa : runnable_isas()) {
    Llama2cTarget target(model, Llama2cTarget::Options{2, isa});
    target.prefill(std::vector<token_t>{1, 5, 9, 2, 7});
    const LaidOutTree next({-1, 0, 0}, {3, 4, 6});
    const auto& out = target.forward(next.view(target.cached()));
    auto& row = logits[llama::host_isa_name(isa)];
    for (int i = 0; i < 3; ++i) row.insert(row.end(), out.logits(i).begin(), out.logits(i).end());
  }
  if (logits.size() == 1) {
    WARN("only the portable path runs here");
    return;
  }
  const auto fused = logits.count("avx2") ? logits["avx2"] : logits["avx512"];
  CHECK(logits["portable"] != fused);
  if (logits.count("avx2") && logits.count("avx512")) CHECK(logits["avx2"] == logits["avx512"]);
}

TEST_CASE("Tree forward is bit-exact per node on stories260K: sizes 1..256, chain/star/random, 1..4 threads",
          "[llama2c][bitexact]") {
  const auto path = testing::data_file("models/stories260K.bin");
  if (!path) return;
  const auto model = std::make_shared<const Llama2cModel>(Llama2cModel::load(*path));
  // The portable path and the CPU's best (the random model above covers every path; CI's time).
  std::vector<llama::HostIsa> isas{llama::HostIsa::portable};
  if (llama::default_host_isa() != llama::HostIsa::portable) isas.push_back(llama::default_host_isa());
  for (llama::HostIsa isa : isas) sweep(model, {1, 2, 4, 9, 16, 33, 64, 128, 256}, isa);
}

// bf16 weights (AMX): the same sweep where the machine has AMX; elsewhere (and in the portable
// build) loading such a model is a one-line error that says why.
TEST_CASE("bf16 weights and attention: tree forward is bit-exact per node, sizes 1..256, 1..4 threads, heads of 8 to 64",
          "[llama2c][bitexact][bf16]") {
  testing::TempDir dir;
  testing::TinyLlamaShape shape;
  shape.dim = 48, shape.hidden = 100, shape.layers = 2, shape.heads = 6, shape.kv_heads = 2, shape.vocab = 300,
  shape.seq_len = 300;
  testing::write_tiny_llama(dir.path / "tiny.bin", shape, 5);
  const std::string& why = llama::bf16_unavailable();
  if (!why.empty()) {
    WARN("bf16 weights not run here: " << why);
    CHECK_THROWS_WITH(Llama2cModel::load(dir.path / "tiny.bin", WeightFormat::bf16),
                      "llama2.c checkpoint '" + (dir.path / "tiny.bin").string() + "': " + why);
    return;
  }
  // Heads of 8 values keep fp32 attention; heads of 16, 32 and 64 (two query heads a kv head for
  // 16 and 64) run it in bf16 on AMX, with prompts that fill some of its 32-slot chunks and not.
  const std::vector<int> sizes{1, 2, 3, 5, 8, 13, 16, 17, 31, 33, 64, 100, 129, 256};
  for (const auto& [dim, heads, kv_heads] : {std::tuple{48, 6, 2}, {64, 4, 2}, {96, 3, 3}, {128, 2, 1}}) {
    shape.dim = dim, shape.heads = heads, shape.kv_heads = kv_heads, shape.seq_len = 340;
    testing::write_tiny_llama(dir.path / "tiny.bin", shape, 5);
    const auto bf16 = std::make_shared<const Llama2cModel>(Llama2cModel::load(dir.path / "tiny.bin", WeightFormat::bf16));
    CHECK(bf16->weights() == WeightFormat::bf16);
    CHECK(llama::bf16_attention(bf16->weights(), dim / heads) == (dim / heads != 8));
    for (int prompt_length : {19, 70}) {
      INFO("head size " << dim / heads << ", prompt of " << prompt_length);
      sweep(bf16, sizes, llama::HostIsa::automatic, prompt_length);
    }

    // Another model's numbers than fp32's, but the same model to bf16's precision (this random
    // model: 1.6 % apart with bf16 weights, up to 2.8 % with bf16 attention too).
    const auto fp32 = std::make_shared<const Llama2cModel>(Llama2cModel::load(dir.path / "tiny.bin"));
    Llama2cTarget a(fp32), b(bf16);
    std::vector<token_t> prompt;
    for (int i = 0; i < 50; ++i) prompt.push_back(static_cast<token_t>((i * 97 + 17) % shape.vocab));
    a.prefill(prompt);
    b.prefill(prompt);
    const LaidOutTree next({-1}, {7});
    const auto& la = a.forward(next.view(a.cached())).logits(0);
    const auto& lb = b.forward(next.view(b.cached())).logits(0);
    double diff = 0, norm = 0;
    for (std::size_t i = 0; i < la.size(); ++i) {
      diff += (la[i] - lb[i]) * (la[i] - lb[i]);
      norm += la[i] * la[i];
    }
    INFO("head size " << dim / heads << ": relative difference " << std::sqrt(diff / norm));
    CHECK(diff > 0);
    CHECK(std::sqrt(diff / norm) < 0.04);
  }
}

TEST_CASE("Llama2cTarget rejects a thread count out of [1, 256] in one line", "[llama2c][errors]") {
  testing::TempDir dir;
  testing::write_tiny_llama(dir.path / "tiny.bin");
  const auto model = std::make_shared<const Llama2cModel>(Llama2cModel::load(dir.path / "tiny.bin"));
  for (int bad : {0, -1, 257, 1 << 20})
    CHECK_THROWS_WITH(Llama2cTarget(model, Llama2cTarget::Options{bad}),
                      "Llama2cTarget: threads must be in [1, 256], got " + std::to_string(bad));
}
