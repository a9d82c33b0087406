// specdec-synth-model: writes a llama2.c checkpoint (include/specdec/models/llama2c_model.hpp) of
// a real model's shape with seeded random weights, and beside it F.json saying so. A forward's
// cost depends on the shape, not on the weights' values, so such a file times a model that cannot
// be downloaded here; its outputs are meaningless. See docs/specbench.md.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <specdec/models/llama2c_model.hpp>
#include <specdec/models/synthetic_llama.hpp>

#include "common/cli_checks.hpp"
#include "common/cli_values.hpp"

namespace {

using specdec::tools::whole_number_at_least;
using specdec::tools::whole_number_in;

class usage_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Approximately N(0, sd): the sum of four uniform 16-bit draws of a splitmix64 stream (the same
/// numbers on every platform for a seed, and fast enough for 7 billion weights).
class Weights {
 public:
  Weights(std::uint64_t seed, float sd) : state_(seed), scale_(sd / 37837.23f) {}  // 37837 = sd of 4 uniforms on [0, 65536)
  float next() {
    std::uint64_t x = (state_ += 0x9e3779b97f4a7c15ull);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    const std::int64_t sum = static_cast<std::int64_t>(x & 0xffff) + ((x >> 16) & 0xffff) + ((x >> 32) & 0xffff) + (x >> 48);
    return static_cast<float>(sum - 2 * 65535) * scale_;
  }

 private:
  std::uint64_t state_;
  float scale_;
};

class Writer {
 public:
  explicit Writer(const std::string& path) : path_(path), out_(path, std::ios::binary) {
    if (!out_) throw usage_error("cannot write " + path);
  }
  void ints(std::initializer_list<std::int32_t> v) {
    for (std::int32_t x : v) out_.write(reinterpret_cast<const char*>(&x), sizeof x);
  }
  template <class Next>
  void floats(std::uint64_t n, Next&& next) {
    std::vector<float> buffer(1 << 18);
    while (n > 0) {
      const std::size_t k = static_cast<std::size_t>(std::min<std::uint64_t>(n, buffer.size()));
      for (std::size_t i = 0; i < k; ++i) buffer[i] = next();
      out_.write(reinterpret_cast<const char*>(buffer.data()), static_cast<std::streamsize>(k * sizeof(float)));
      n -= k;
    }
  }
  void close() {
    out_.close();
    if (!out_) throw usage_error("cannot write " + path_ + " (disk full?)");
  }

 private:
  std::string path_;
  std::ofstream out_;
};

void write_checkpoint(const std::string& path, const specdec::LlamaConfig& c, std::uint64_t seed) {
  Writer w(path);
  w.ints({c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.shared_classifier ? c.vocab_size : -c.vocab_size,
          c.seq_len});
  Weights random(seed, 0.02f);
  const auto gauss = [&] { return random.next(); };
  const auto one = [] { return 1.0f; };
  const std::uint64_t d = c.dim, kv = static_cast<std::uint64_t>(c.kv_dim()), hid = c.hidden_dim, L = c.n_layers,
                      V = c.vocab_size;
  w.floats(V * d, gauss);               // token embedding
  w.floats(L * d, one);                 // rms_att
  w.floats(L * d * d, gauss);           // wq
  w.floats(2 * L * kv * d, gauss);      // wk, wv
  w.floats(L * d * d, gauss);           // wo
  w.floats(L * d, one);                 // rms_ffn
  w.floats(3 * L * hid * d, gauss);     // w1, w2, w3
  w.floats(d, one);                     // rms_final
  w.floats(2ull * c.seq_len * (c.head_size() / 2), [] { return 0.0f; });  // legacy RoPE tables (unused)
  if (!c.shared_classifier) w.floats(V * d, gauss);
  w.close();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"specdec-synth-model: writes a llama2.c checkpoint of a real model's shape with seeded random "
               "weights (SYNTHETIC: for timing forwards only, its outputs are meaningless)"};
  std::string shape_name, out;
  std::uint64_t seed = 1;
  int layers = 0, seq_len = 0;
  bool list = false;
  app.add_flag("--list", list, "List the shapes");
  app.add_option("--shape", shape_name, "Shape name (see --list)");
  app.add_option("--seed", seed, "Seed of the random weights (default 1)")->transform(whole_number_at_least(0, LLONG_MAX));
  app.add_option("--out", out, "Checkpoint to write (and OUT.json beside it)");
  app.add_option("--layers", layers, "Write only this many layers (layer-wise timing of a model too big to load)")
      ->transform(whole_number_in(1, 1 << 16));
  app.add_option("--seq-len", seq_len, "Positions, instead of the shape's (e.g. to replay long turns on a small shape)")
      ->transform(whole_number_in(1, 1 << 20));
  specdec::tools::keep_repeated_values(app);
  try {
    app.parse(argc, argv);
    specdec::tools::check_option_values<CLI::ValidationError>(app);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    std::cerr << "specdec-synth-model: " << e.what() << "\n";
    return 2;
  }
  try {
    if (list) {
      std::cout << "shapes (synthetic weights, for timing only):\n";
      for (const specdec::SyntheticShape& s : specdec::synthetic_shapes()) {
        const double bytes = 4.0 * static_cast<double>(specdec::Llama2cModel::weight_floats(s.config));
        std::cout << fmt::format("  {:<15} {}; {:.2f} GB fp32 ({})\n", s.name, specdec::Llama2cModel::describe(s.config),
                                 bytes / 1e9, s.source);
      }
      return 0;
    }
    if (shape_name.empty()) throw usage_error("--shape is required (see --list)");
    if (out.empty()) throw usage_error("--out is required");
    specdec::tools::check_output_file<usage_error>(out, "--out");
    const specdec::SyntheticShape& shape = specdec::synthetic_shape(shape_name);
    specdec::LlamaConfig c = shape.config;
    const int all_layers = c.n_layers;
    if (layers > all_layers)
      throw usage_error(fmt::format("--layers {}: the shape {} has {} layers", layers, shape.name, all_layers));
    if (layers > 0) c.n_layers = layers;
    if (seq_len > 0) c.seq_len = seq_len;
    write_checkpoint(out, c, seed);
    nlohmann::ordered_json meta{{"synthetic_weights", true},
                                {"note", "random weights for timing only: the model's outputs are meaningless"},
                                {"shape", shape.name},
                                {"seed", seed},
                                {"layers", c.n_layers},
                                {"layers_of", all_layers},
                                {"seq_len", c.seq_len},
                                {"config", specdec::Llama2cModel::describe(c)},
                                {"rope_theta", shape.rope_theta}};
    if (shape.rope_theta != 10000.0f)
      meta["rope_theta_note"] = "a llama2.c checkpoint cannot hold the RoPE base: Llama2cTarget runs it with 10000";
    std::ofstream json(out + ".json");
    json << meta.dump(2) << "\n";
    if (!json.flush()) throw usage_error("cannot write " + out + ".json");
    const double bytes = 4.0 * static_cast<double>(specdec::Llama2cModel::weight_floats(c)) + 28;
    std::cout << fmt::format(
        "specdec-synth-model: wrote {} ({:.1f} MB): shape {}, {} of {} layers, {} positions, seed {}; SYNTHETIC "
        "random weights, for timing only\n",
        out, bytes / 1e6, shape.name, c.n_layers, all_layers, c.seq_len, seed);
  } catch (const usage_error& e) {
    std::cerr << "specdec-synth-model: " << e.what() << "\n";
    return 2;
  } catch (const specdec::error& e) {  // an unknown shape
    std::cerr << "specdec-synth-model: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "specdec-synth-model: internal error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
