// The backend-target skeleton that docs/cuda.md shows ("Writing a backend target"): a toy model on
// the host backend whose tree attention is the part a real model must get right. The tests check
// that it passes the backend conformance kit and decodes exactly what plain greedy decoding does.
#include <catch2/catch.hpp>

#include <vector>

#include <specdec/step/backend_step.hpp>
#include <specdec/decoder.hpp>
#include <specdec/policies/drafters/oracle.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/testing/backend_target_conformance.hpp>
#include <specdec/testing/laid_out_tree.hpp>

// [backend_target]
#include <cmath>
#include <span>
#include <vector>

#include <specdec/backend.hpp>
#include <specdec/concepts.hpp>

/// A toy model: the K/V of position p is one float made from its token and p; a node's logits
/// read the K/V rows it attends to, in position order.
class ToyBackendTarget {
 public:
  using backend_type = specdec::backend::host;  // backend::cuda for a model on a GPU (in a .cu file)

  ToyBackendTarget(int vocab, int max_positions)
      : vocab_(vocab),
        layout_(specdec::core::kv_layout(/*layers=*/1, max_positions, /*kv_heads=*/1, /*head_dim=*/1, sizeof(float))),
        kv_(static_cast<std::size_t>(max_positions)) {}

  backend_type backend() const { return {}; }  // for CUDA: a tag with the model's stream
  int vocab_size() const { return vocab_; }
  // Where forward writes the K/V; the decoder moves the accepted nodes' rows with backend::compact_kv.
  specdec::core::KvCacheView kv_cache() { return {layout_, reinterpret_cast<unsigned char*>(kv_.data()), nullptr}; }

  // A new sequence whose cache holds exactly `tokens` (host memory) at positions 0, 1, ...
  void prefill(std::span<const specdec::token_t> tokens) {
    for (std::size_t p = 0; p < tokens.size(); ++p) kv_[p] = key(tokens[p], static_cast<int>(p));
  }

  // The tree's arrays are in backend memory. Node i sits at position tree.position(i), writes its
  // K/V at cache row base_position + i and attends to the cache and to its tree ancestors only.
  specdec::LogitsRows forward(const specdec::TreeView& tree) {
    logits_.resize(static_cast<std::size_t>(tree.size) * vocab_);
    for (int i = 0; i < tree.size; ++i) kv_[tree.base_position + i] = key(tree.token[i], tree.position(i));
    for (int i = 0; i < tree.size; ++i) {
      float state = 0.0f;
      for (int p = 0; p < tree.base_position; ++p) state = attend(state, kv_[p]);
      for (int j = 0; j <= i; ++j)  // ancestors come before their descendants
        if (tree.attends(i, j)) state = attend(state, kv_[tree.base_position + j]);
      for (int v = 0; v < vocab_; ++v) logits_[static_cast<std::size_t>(i) * vocab_ + v] = logit(state, v);
    }
    return {logits_.data(), vocab_};  // node i's row at data + i * row_stride
  }

 private:
  float key(specdec::token_t token, int position) const {
    return static_cast<float>((token * 7 + position * 3) % vocab_);
  }
  static float attend(float state, float kv) { return state * 0.5f + kv; }
  float logit(float state, int v) const { return -std::fabs(std::fmod(state * 1.7f, static_cast<float>(vocab_)) - v); }

  int vocab_;
  specdec::core::KvCacheLayout layout_;
  std::vector<float> kv_;
  std::vector<float> logits_;
};
static_assert(specdec::BackendTarget<ToyBackendTarget>);
// [backend_target]

using namespace specdec;

namespace {

/// Plain greedy decoding of `target`: one root-alone tree per token, its K/V left at its position.
std::vector<token_t> greedy(ToyBackendTarget& target, const std::vector<token_t>& prompt, int n) {
  target.prefill(std::span<const token_t>(prompt.data(), prompt.size() - 1));
  std::vector<token_t> out;
  token_t next = prompt.back();
  for (int k = 0; k < n; ++k) {
    const testing::LaidOutTree root({-1}, {next});
    const LogitsRows rows = target.forward(root.view(static_cast<int>(prompt.size() + out.size()) - 1));
    next = static_cast<token_t>(core::argmax_row(rows.data, target.vocab_size()));
    out.push_back(next);
  }
  return out;
}

}  // namespace

TEST_CASE("the backend-target skeleton of docs/cuda.md passes the backend conformance kit",
          "[testing][conformance][backend]") {
  ToyBackendTarget target(/*vocab=*/32, /*max_positions=*/128);
  const testing::ConformanceReport report = testing::check_backend_target(target);
  INFO(report.str());
  CHECK(report.ok());
}

TEST_CASE("the backend-target skeleton of docs/cuda.md decodes exactly greedy", "[testing][backend]") {
  ToyBackendTarget target(/*vocab=*/32, /*max_positions=*/128);
  const std::vector<token_t> prompt{3, 1, 4, 1, 5};
  const std::vector<token_t> plain = greedy(target, prompt, 60);
  std::vector<token_t> truth = prompt;
  truth.insert(truth.end(), plain.begin(), plain.end());
  SpeculativeDecoder<ToyBackendTarget, OracleDrafter, ExactVerifier> decoder(
      target, DecoderOptions{.budget = 8}, OracleDrafter(truth, /*depth=*/4, /*error_rate=*/0.3, /*width=*/3),
      ExactVerifier{});
  decoder.prefill(prompt);
  CHECK(decoder.generate(60) == plain);
  CHECK(decoder.stats().tau() > 1.5);  // drafts were accepted: the tree attention was used
}
