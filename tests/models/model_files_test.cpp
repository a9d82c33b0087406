// Crafted weight files (models/llama2c_model.hpp, models/eagle_head.hpp): +-inf and NaN weights
// are refused at load, a head or draft model that does not fit is refused from its header before
// its weights are read, and a forward whose logits overflow to +-inf is refused like NaN.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <specdec/models/eagle_head.hpp>
#include <specdec/models/llama2c_model.hpp>
#include <specdec/policies/drafters/eagle.hpp>
#include <specdec/targets/llama2c.hpp>
#include <specdec/targets/llama2c_batch.hpp>
#include <specdec/testing/laid_out_tree.hpp>

#include "support/eagle_head.hpp"
#include "support/temp_dir.hpp"
#include "support/tiny_llama.hpp"

using namespace specdec;
using Catch::Matchers::Contains;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// dim 4, hidden 6, 1 layer, 2 heads, 1 kv head, vocab 5 (unshared classifier), seq_len 3.
const LlamaConfig kTiny{4, 6, 1, 2, 1, 5, 3, false};

/// The checkpoint of kTiny with the weights `w` (Llama2cModel::weight_floats(kTiny) floats).
std::string checkpoint(const std::vector<float>& w) {
  const std::int32_t h[7] = {4, 6, 1, 2, 1, -5, 3};
  std::string bytes(reinterpret_cast<const char*>(h), sizeof h);
  bytes.append(reinterpret_cast<const char*>(w.data()), w.size() * sizeof(float));
  return bytes;
}

/// kTiny's weights: embedding and norms 1, layer matrices 0, classifier `classifier`. The
/// residual stream then stays the embedding, and each logit is 4 * classifier.
std::vector<float> tiny_weights(float classifier) {
  std::vector<float> w(Llama2cModel::weight_floats(kTiny), 0.0f);
  const std::size_t vocab_dim = 5 * 4, rope = 6;
  std::fill(w.begin(), w.begin() + vocab_dim + 4, 1.0f);                    // embedding, rms_att
  std::fill(w.begin() + 72, w.begin() + 76, 1.0f);                          // rms_ffn
  std::fill(w.end() - vocab_dim - rope - 4, w.end() - vocab_dim - rope, 1.0f);  // rms_final
  std::fill(w.end() - vocab_dim, w.end(), classifier);                     // wcls
  return w;
}

}  // namespace

TEST_CASE("Llama2cModel: a NaN or +-inf weight is refused at load, naming it", "[llama2c][errors][crafted]") {
  testing::TempDir dir;
  REQUIRE_NOTHROW(Llama2cModel::load(dir.write("good.bin", checkpoint(tiny_weights(0.5f)))));
  for (const float bad : {kInf, -kInf, std::numeric_limits<float>::quiet_NaN()}) {
    std::vector<float> w = tiny_weights(0.5f);
    w[20] = bad;  // the first rms_att weight: one infinite norm weight decoded garbage
    CHECK_THROWS_WITH(Llama2cModel::load(dir.write("bad.bin", checkpoint(w))),
                      Contains("bad.bin") && Contains("weight 20 (counted from the end of the header)") &&
                          Contains("not finite"));
  }
}

TEST_CASE("Llama2cModel::read_config reads and checks the header only", "[llama2c]") {
  testing::TempDir dir;
  std::vector<float> w = tiny_weights(0.5f);
  w[0] = kInf;  // not read
  const LlamaConfig c = Llama2cModel::read_config(dir.write("m.bin", checkpoint(w)));
  CHECK(c.dim == 4);
  CHECK(c.vocab_size == 5);
  CHECK(c.seq_len == 3);
  CHECK_FALSE(c.shared_classifier);
  const std::string cut = checkpoint(w).substr(0, 40);
  CHECK_THROWS_WITH(Llama2cModel::read_config(dir.write("cut.bin", cut)), Contains("truncated"));
}

TEST_CASE("Llama2cTarget: logits that overflow to +-inf are refused like NaN", "[llama2c][errors][crafted]") {
  testing::TempDir dir;
  for (const float classifier : {3e38f, -3e38f}) {  // finite weights, 4 * 3e38 overflows
    Llama2cTarget target(dir.write("m.bin", checkpoint(tiny_weights(classifier))));
    const std::vector<token_t> prompt{1};
    target.prefill(prompt);
    const testing::LaidOutTree tree({-1}, {2});
    CHECK_THROWS_WITH(target.forward(tree.view(1)), "Llama2cTarget: a logit of tree node 0 is not finite (NaN or +-inf)");
  }
}

// Llama2cBatchTarget::forward recorded a slot's tree only after a forward that succeeded: after a
// throw, a commit of the tree before passed its check and kept the K/V the failed forward had
// written over it (issue 49, defect f). The tree that ran is the one a commit is checked against,
// as Llama2cTarget does.
TEST_CASE("Llama2c targets: a forward that throws replaces the tree a commit is checked against",
          "[llama2c][errors][crafted]") {
  testing::TempDir dir;
  std::vector<float> w = tiny_weights(3e38f);
  std::fill(w.begin() + 4, w.begin() + 8, 0.0f);  // token 1's embedding 0: its logits are 0, the others' overflow
  const auto path = dir.write("m.bin", checkpoint(w));
  const std::vector<token_t> prompt{1};
  const testing::LaidOutTree finite({-1, 0, 0}, {1, 1, 1});  // token 1 throughout (3 positions)
  const testing::LaidOutTree overflowing({-1, 0}, {1, 2});   // node 1 is token 2
  const std::vector<node_t> finite_path{0, 2};
  const auto refused = Contains("path entry 1 (node 2) is not a child of node 0 in the last tree");

  Llama2cTarget single(path);
  single.prefill(prompt);
  REQUIRE_NOTHROW(single.forward(finite.view(1)));
  CHECK_THROWS_WITH(single.forward(overflowing.view(1)), Contains("not finite"));
  CHECK_THROWS_WITH(single.commit(finite_path), refused);

  Llama2cBatchTarget batch(std::make_shared<const Llama2cModel>(Llama2cModel::load(path)), 2);
  batch.prefill(0, prompt);
  batch.prefill(1, prompt);
  const std::vector<int> slots{0, 1};
  const std::vector<TreeView> before{finite.view(1), finite.view(1)}, after{finite.view(1), overflowing.view(1)};
  REQUIRE_NOTHROW(batch.forward(TreeBatchView{slots, before}));
  CHECK_THROWS_WITH(batch.forward(TreeBatchView{slots, after}), Contains("not finite"));
  CHECK_THROWS_WITH(batch.commit(1, finite_path), refused);
}

TEST_CASE("EagleHead: a NaN or +-inf weight is refused, a head for another model before its weights are read",
          "[eagle][errors][crafted]") {
  testing::TempDir dir;
  const testing::EagleHeadShape shape{16, 24, 2, 1, 350};
  const std::string good = testing::random_eagle_head(shape);
  REQUIRE_NOTHROW(EagleHead::load(dir.write("good.bin", good)));
  for (const float bad : {kInf, -kInf, std::numeric_limits<float>::quiet_NaN()}) {
    std::string b = good;
    std::memcpy(b.data() + EagleHead::header_bytes + 4 * 5, &bad, 4);
    CHECK_THROWS_WITH(EagleHead::load(dir.write("bad.bin", b)), Contains("bad.bin") && Contains("weight 5") &&
                                                                    Contains("not finite"));
  }

  testing::write_tiny_llama(dir.path / "tiny.bin");  // dim 16, vocab 350
  const auto target = std::make_shared<const Llama2cModel>(Llama2cModel::load(dir.path / "tiny.bin"));
  // A head of dim 32 whose weights are all NaN: refused for its dim, so its weights were never read.
  testing::EagleHeadShape other = shape;
  other.dim = 32;
  std::string wide = testing::random_eagle_head(other);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (std::size_t at = EagleHead::header_bytes; at < wide.size(); at += 4) std::memcpy(wide.data() + at, &nan, 4);
  CHECK_THROWS_WITH(EagleDrafter(dir.write("wide.bin", wide), target),
                    "EAGLE head: its dim is 32 but the target's is 16 (the head was trained for another model)");
  CHECK(EagleHead::read_config(dir.path / "wide.bin").dim == 32);
  CHECK_NOTHROW(EagleDrafter(dir.path / "good.bin", target));
}
