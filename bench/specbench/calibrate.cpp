#include "calibrate.hpp"

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <cstdint>
#include <ctime>
#include <fstream>
#include <sstream>
#include <utility>

#include <fmt/format.h>

#include "clock.hpp"
#include "costers.hpp"
#include "input_error.hpp"
#include "machine_probes.hpp"

namespace specbench {

namespace fs = std::filesystem;
using detail::Clock;
using detail::seconds_since;

std::optional<nlohmann::ordered_json> synthetic_model_note(const fs::path& model) {
  std::ifstream in(model.string() + ".json");
  if (!in) return std::nullopt;
  try {
    auto j = nlohmann::ordered_json::parse(in);
    if (j.is_object() && j.value("synthetic_weights", false)) return j;
  } catch (const nlohmann::json::exception&) {
  }
  return std::nullopt;
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buffer;
}

std::vector<int> fitting_contexts(const std::vector<int>& wanted, int positions, int largest) {
  std::vector<int> contexts;
  for (const int c : wanted)
    if (largest <= positions - c) contexts.push_back(c);
  const int last = positions - largest;
  if (contexts.size() < wanted.size() && last >= 0 && (contexts.empty() || contexts.back() < last))
    contexts.push_back(last);
  if (contexts.empty())
    throw input_error(fmt::format("the model has {} positions: no context of --contexts leaves room for a tree of {} "
                                  "nodes",
                                  positions, largest));
  return contexts;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

namespace {

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown";
}

/// Writes the first layer of the llama2.c checkpoint `from` (K layers) to `to`, everything else as is.
void write_first_layer(const fs::path& from, const fs::path& to, const specdec::LlamaConfig& c) {
  std::ifstream in(from, std::ios::binary);
  std::ofstream out(to, std::ios::binary);
  if (!in || !out) throw input_error("cannot write the one-layer copy " + to.string() + " of " + from.string());
  std::int32_t header[7];
  in.read(reinterpret_cast<char*>(header), sizeof header);
  header[2] = 1;
  out.write(reinterpret_cast<const char*>(header), sizeof header);
  std::vector<char> buffer(1 << 20);
  const auto copy = [&](std::uint64_t floats) {
    for (std::uint64_t bytes = floats * sizeof(float); bytes > 0;) {
      const auto k = static_cast<std::streamsize>(std::min<std::uint64_t>(bytes, buffer.size()));
      in.read(buffer.data(), k);
      out.write(buffer.data(), k);
      bytes -= static_cast<std::uint64_t>(k);
    }
  };
  const std::uint64_t d = c.dim, kv = static_cast<std::uint64_t>(c.kv_dim()), hid = c.hidden_dim, V = c.vocab_size,
                      K = c.n_layers;
  copy(V * d);
  for (const std::uint64_t per_layer : {d, d * d, kv * d, kv * d, d * d, d, hid * d, d * hid, hid * d}) {
    copy(per_layer);
    in.seekg(static_cast<std::streamoff>((K - 1) * per_layer * sizeof(float)), std::ios::cur);
  }
  copy(d + 2ull * c.seq_len * (c.head_size() / 2) + (c.shared_classifier ? 0 : V * d));
  if (!in || !out.flush()) throw input_error("cannot write the one-layer copy " + to.string() + " of " + from.string());
}

/// The grid of one model: [context][n] forward µs, and [context] plain µs.
struct Grid {
  std::vector<std::vector<double>> forward_us;
  std::vector<double> plain_us;
};

std::shared_ptr<const specdec::Llama2cModel> load_model(const fs::path& file, specdec::WeightFormat weights) {
  try {
    return std::make_shared<const specdec::Llama2cModel>(specdec::Llama2cModel::load(file, weights));
  } catch (const specdec::error& e) {
    throw input_error(e.what());
  }
}

Grid measure(std::shared_ptr<const specdec::Llama2cModel> model, const fs::path& file, const CalibrateOptions& o,
             std::span<const int> contexts, std::ostream& log) {
  specdec::Llama2cTarget target = make_llama_target(model, o.threads);
  const int vocab = model->config().vocab_size;
  std::vector<token_t> tokens(static_cast<std::size_t>(contexts.back() + o.nodes.back()));
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<token_t>((i * 7919 + 13) % static_cast<std::size_t>(vocab));
  Grid grid;
  const specdec::testing::LaidOutTree one({-1}, {tokens[0]});
  for (const int context : contexts) {
    log << fmt::format("specbench calibrate: {}: context {} ...\n", file.filename().string(), context) << std::flush;
    target.prefill(std::span(tokens).first(static_cast<std::size_t>(context)));
    std::vector<specdec::testing::LaidOutTree> chains;
    for (const int n : o.nodes) {
      std::vector<specdec::node_t> parent(static_cast<std::size_t>(n));
      for (int i = 0; i < n; ++i) parent[static_cast<std::size_t>(i)] = i - 1;  // a chain
      chains.emplace_back(parent, std::vector<token_t>(tokens.begin() + context, tokens.begin() + context + n));
    }
    // Round-robin over the sizes and the plain step, so that a burst of load on the machine hits
    // every cell alike instead of a few; r = 0 warms up.
    std::vector<std::vector<double>> times(o.nodes.size());
    std::vector<double> plain;
    for (int r = 0; r <= o.repetitions; ++r) {
      for (std::size_t i = 0; i < chains.size(); ++i) {
        const auto t0 = Clock::now();
        target.forward(chains[i].view(context));
        if (r > 0) times[i].push_back(1e6 * seconds_since(t0));
      }
      const auto t0 = Clock::now();
      target.forward(one.view(context));
      target.commit(kRootPath);
      if (r > 0) plain.push_back(1e6 * seconds_since(t0));
      target.rewind(context);
    }
    std::vector<double>& row = grid.forward_us.emplace_back();
    for (auto& cell : times) row.push_back(median(cell));
    grid.plain_us.push_back(median(plain));
  }
  return grid;
}

}  // namespace

CostTable calibrate(const CalibrateOptions& o, const fs::path& scratch, std::ostream& log) {
  auto loaded = load_model(o.model, o.weights);
  const specdec::LlamaConfig config = loaded->config();
  const std::vector<int> contexts = fitting_contexts(o.contexts, config.seq_len, o.nodes.back());
  const int K = config.n_layers;
  if (o.layers_of > 0 && o.layers_of < K)
    throw input_error(fmt::format("--layers-of {}: the checkpoint already has {} layers", o.layers_of, K));
  const bool scaled = o.layers_of > K;
  if (scaled && K < 2)
    throw input_error(fmt::format("--layers-of {}: scaling needs a checkpoint of at least 2 layers (it has 1)", o.layers_of));

  CostTable t;
  t.nodes = o.nodes;
  nlohmann::ordered_json model{{"file", o.model.string()}, {"config", specdec::Llama2cModel::describe(config)},
                               {"weights", specdec::weight_format_name(o.weights)},
                               {"weight_bytes", specdec::Llama2cModel::forward_weight_bytes(config, o.weights)}};
  if (const auto note = synthetic_model_note(o.model)) {
    model["shape"] = (*note).value("shape", "?");
    model["synthetic_weights"] = true;
    model["note"] = "random weights: the forward's cost depends on the shape, not on the values";
  }
  if (scaled) {
    specdec::LlamaConfig full = config;
    full.n_layers = o.layers_of;
    model["layers_measured"] = K;
    model["layers"] = o.layers_of;
    model["scaling"] = fmt::format("measured with {} and with 1 of {} layers; T = T1 + ({} - 1) (T{} - T1) / ({} - 1)",
                                   K, o.layers_of, o.layers_of, K, K);
    model["weight_bytes"] = specdec::Llama2cModel::forward_weight_bytes(full, o.weights);
  }
  t.metadata["format"] = "specdec-cost-table-1";
  t.metadata["model"] = model;
  t.metadata["threads"] = o.threads;
  t.metadata["machine"] = cpu_model_name();
  t.metadata["date"] = utc_now();
  t.metadata["tree"] = "chain";
  t.metadata["repetitions"] = o.repetitions;

  const Grid grid = measure(std::move(loaded), o.model, o, contexts, log);
  Grid one_layer;
  if (scaled) {
    const fs::path copy = scratch.string() + ".first-layer.bin";
    write_first_layer(o.model, copy, config);
    try {
      one_layer = measure(load_model(copy, o.weights), copy, o, contexts, log);
    } catch (...) {
      fs::remove(copy);
      throw;
    }
    fs::remove(copy);
  }
  if (o.machine_probes) {
    log << "specbench calibrate: measuring one core's read bandwidth (sum of a 1 GiB array) ...\n" << std::flush;
    t.metadata["read_bandwidth_gbs"] = std::round(read_bandwidth_gbs() * 100) / 100;
    if (o.threads > 1) {
      log << "specbench calibrate: measuring the matrix product's arithmetic on 1 and " << o.threads << " threads ...\n"
          << std::flush;
      const auto rounded = [](double gflops) { return std::round(gflops * 10) / 10; };
      const MatrixProductGflops gflops = matrix_product_gflops(o.threads, o.weights);
      t.metadata["matrix_product_gflops"] = {{"1", rounded(gflops.one_thread)},
                                             {std::to_string(o.threads), rounded(gflops.all_threads)}};
    }
  }
  const auto scale = [&](double tk, double t1) {
    return scaled ? t1 + static_cast<double>(o.layers_of - 1) * std::max(0.0, tk - t1) / static_cast<double>(K - 1) : tk;
  };
  for (std::size_t c = 0; c < contexts.size(); ++c) {
    CostTable::Context row;
    row.context = contexts[c];
    row.plain_us = scale(grid.plain_us[c], scaled ? one_layer.plain_us[c] : 0);
    for (std::size_t i = 0; i < o.nodes.size(); ++i)
      row.forward_us.push_back(scale(grid.forward_us[c][i], scaled ? one_layer.forward_us[c][i] : 0));
    t.contexts.push_back(std::move(row));
  }
  return t;
}

std::vector<int> doubling_sizes(int largest) {
  std::vector<int> sizes;
  for (int n = 1; n < largest; n = n > INT_MAX / 2 ? largest : 2 * n) sizes.push_back(n);
  sizes.push_back(largest);
  return sizes;
}

CostTable quick_calibration(const fs::path& model, int threads, specdec::WeightFormat weights, int largest,
                            std::string& description) {
  CalibrateOptions o;
  o.model = model;
  o.threads = threads;
  o.weights = weights;
  const int positions = specdec::Llama2cModel::read_config(model).seq_len;
  if (largest > positions)
    throw input_error(fmt::format("--budget auto: the start-up calibration would time trees of {} nodes, but the model "
                                  "has {} positions; lower --budget-cap",
                                  largest, positions));
  o.nodes = doubling_sizes(largest);
  o.repetitions = 5;
  o.machine_probes = false;
  std::ostringstream log;  // the per-context progress is not shown: one line says what was done
  const auto t0 = Clock::now();
  CostTable table = calibrate(o, fs::temp_directory_path() / "specbench-quick-calibration", log);
  std::string contexts;
  for (const auto& c : table.contexts) contexts += (contexts.empty() ? "" : ", ") + std::to_string(c.context);
  description = fmt::format("calibrated at start-up in {:.2f} s ({} thread(s), {} weights; trees of 1 to {} nodes at "
                            "contexts {}; median of {})",
                            seconds_since(t0), threads, specdec::weight_format_name(weights), largest,
                            contexts, o.repetitions);
  return table;
}
}  // namespace specbench
