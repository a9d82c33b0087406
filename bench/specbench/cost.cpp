#include "cost.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <limits>
#include <ostream>
#include <sstream>
#include <utility>

#include <fmt/format.h>
#include <specdec/models/llama_layer.hpp>

#include "input_error.hpp"

namespace specbench {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr std::array<specdec::node_t, 1> kRootPath{0};  // a one-node tree's accepted path

namespace {

double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

/// Linear interpolation of ys at x between the xs (increasing); outside, the nearest end.
double interpolate(std::span<const int> xs, std::span<const double> ys, double x) {
  if (x <= xs.front()) return ys.front();
  if (x >= xs.back()) return ys.back();
  const auto i = static_cast<std::size_t>(std::upper_bound(xs.begin(), xs.end(), x) - xs.begin());
  const double t = (x - xs[i - 1]) / (xs[i] - xs[i - 1]);
  return ys[i - 1] + t * (ys[i] - ys[i - 1]);
}

/// `value` of the table's contexts interpolated at `context` as interpolate() does, without
/// building the column (the automatic budget asks this for every candidate size of every step).
template <class Value>
double across_contexts(const std::vector<CostTable::Context>& contexts, int context, Value&& value) {
  if (context <= contexts.front().context) return value(contexts.front());
  if (context >= contexts.back().context) return value(contexts.back());
  const auto above = std::upper_bound(contexts.begin(), contexts.end(), context,
                                      [](int x, const CostTable::Context& c) { return x < c.context; });
  const CostTable::Context& lo = *(above - 1);
  const double low = value(lo), high = value(*above);
  const double t = (static_cast<double>(context) - lo.context) / (above->context - lo.context);
  return low + t * (high - low);
}

}  // namespace

// ---- the table ------------------------------------------------------------------------------

CostTable CostTable::load(const fs::path& file) {
  const std::string name = "cost table " + file.string();
  std::ifstream in(file);
  if (!in) throw input_error(name + " cannot be read");
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw input_error(name + ": malformed JSON (" + std::string(e.what()) + ")");
  }
  if (!j.is_object()) throw input_error(name + ": expected a JSON object");
  const auto positive = [&](const nlohmann::ordered_json& v, const std::string& what) {
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0)
      throw input_error(name + ": " + what + " must be a positive number of microseconds, got " + v.dump());
    return v.get<double>();
  };
  CostTable t;
  if (!j.contains("nodes") || !j["nodes"].is_array() || j["nodes"].empty())
    throw input_error(name + ": \"nodes\" (the measured tree sizes) is missing or empty");
  for (const auto& n : j["nodes"]) {
    if (!n.is_number_integer() || n.get<long long>() < 1 || n.get<long long>() > (1 << 20) ||
        (!t.nodes.empty() && n.get<int>() <= t.nodes.back()))
      throw input_error(name + ": \"nodes\" must be increasing whole numbers >= 1, got " + j["nodes"].dump());
    t.nodes.push_back(n.get<int>());
  }
  if (t.nodes.front() != 1) throw input_error(name + ": \"nodes\" must start at 1 (the plain forward), got " + j["nodes"].dump());
  if (!j.contains("contexts") || !j["contexts"].is_array() || j["contexts"].empty())
    throw input_error(name + ": \"contexts\" is missing or empty");
  for (std::size_t c = 0; c < j["contexts"].size(); ++c) {
    const auto& row = j["contexts"][c];
    const std::string at = fmt::format("contexts[{}]", c);
    if (!row.is_object() || !row.contains("context") || !row["context"].is_number_integer() ||
        row["context"].get<long long>() < 0 || row["context"].get<long long>() > (1 << 24) ||
        (!t.contexts.empty() && row["context"].get<int>() <= t.contexts.back().context))
      throw input_error(name + ": " + at + ".context must be a whole number >= 0, larger than the previous context's");
    Context ctx;
    ctx.context = row["context"].get<int>();
    if (!row.contains("plain_us")) throw input_error(name + ": " + at + ".plain_us is missing");
    ctx.plain_us = positive(row["plain_us"], at + ".plain_us");
    if (!row.contains("forward_us") || !row["forward_us"].is_array() || row["forward_us"].size() != t.nodes.size())
      throw input_error(fmt::format("{}: {}.forward_us must hold one time per entry of \"nodes\" ({})", name, at,
                                    t.nodes.size()));
    for (std::size_t i = 0; i < t.nodes.size(); ++i)
      ctx.forward_us.push_back(positive(row["forward_us"][i], fmt::format("{}.forward_us[{}]", at, i)));
    t.contexts.push_back(std::move(ctx));
  }
  for (const auto& [key, value] : j.items())
    if (key != "nodes" && key != "contexts") t.metadata[key] = value;
  return t;
}

nlohmann::ordered_json CostTable::to_json() const {
  nlohmann::ordered_json j = metadata;
  j["nodes"] = nodes;
  j["contexts"] = nlohmann::ordered_json::array();
  for (const Context& c : contexts)
    j["contexts"].push_back({{"context", c.context}, {"plain_us", c.plain_us}, {"forward_us", c.forward_us}});
  return j;
}

double CostTable::forward_seconds(int n, int context) const {
  if (n > max_nodes())
    throw input_error(fmt::format("a step of {} tree nodes is larger than the cost table's largest measured forward "
                                  "({} nodes): lower --budget or measure larger trees",
                                  n, max_nodes()));
  return 1e-6 * across_contexts(contexts, context, [&](const Context& c) { return interpolate(nodes, c.forward_us, n); });
}

BatchCostModel::BatchCostModel(CostTable table) : table_(std::move(table)) {
  slope_from_ = table_.nodes.front();
  for (const int n : table_.nodes)
    if (2 * n <= table_.max_nodes()) slope_from_ = n;
}

double BatchCostModel::step_seconds(int nodes, int context) const {
  const int most = table_.max_nodes();
  if (nodes <= most || table_.nodes.size() < 2) return table_.forward_seconds(std::min(nodes, most), context);
  const double at_most = table_.forward_seconds(most, context), at_from = table_.forward_seconds(slope_from_, context);
  const double per_node = std::max(0.0, (at_most - at_from) / (most - slope_from_));
  return at_most + per_node * (nodes - most);
}

double CostTable::plain_seconds(int context) const {
  return 1e-6 * across_contexts(contexts, context, [](const Context& c) { return c.plain_us; });
}

std::string CostTable::describe() const {
  const auto text = [&](const char* key) {
    return metadata.contains(key) && metadata[key].is_string() ? metadata[key].get<std::string>() : std::string("?");
  };
  std::string out = "model " + (metadata.contains("model") && metadata["model"].contains("file")
                                    ? metadata["model"]["file"].get<std::string>()
                                    : std::string("?"));
  if (metadata.contains("model") && metadata["model"].value("synthetic_weights", false)) out += " (synthetic weights)";
  if (metadata.contains("threads")) out += fmt::format(", {} thread(s)", metadata["threads"].dump());
  return out + ", " + text("machine") + ", " + text("date");
}

// ---- the costers ----------------------------------------------------------------------------

void TableCoster::prefill(std::span<const token_t>) {
  seconds_ = 0;
  first_context_ = -1;
}

void TableCoster::forward(const specdec::TreeView& tree) {
  if (first_context_ < 0) first_context_ = tree.base_position;
  seconds_ += table_.forward_seconds(tree.size, tree.base_position);
}

std::pair<double, double> TableCoster::turn_seconds(std::int64_t tokens) {
  double plain = 0;
  for (std::int64_t i = 0; i < tokens; ++i) plain += table_.plain_seconds(first_context_ + static_cast<int>(i));
  return {seconds_, plain};
}

ModelCoster::ModelCoster(specdec::Llama2cTarget target) : target_(std::move(target)) {}

void ModelCoster::prefill(std::span<const token_t> tokens) {
  target_.prefill(tokens);
  sequence_.assign(tokens.begin(), tokens.end());
  seconds_ = 0;
  first_context_ = -1;
}

void ModelCoster::forward(const specdec::TreeView& tree) {
  if (first_context_ < 0) first_context_ = tree.base_position;
  tree_tokens_.assign(tree.token, tree.token + tree.size);
  const auto t0 = Clock::now();
  target_.forward(tree);
  seconds_ += seconds_between(t0, Clock::now());
}

void ModelCoster::commit(std::span<const specdec::node_t> path) {
  const auto t0 = Clock::now();
  target_.commit(path);
  seconds_ += seconds_between(t0, Clock::now());
  for (const specdec::node_t node : path) sequence_.push_back(tree_tokens_[static_cast<std::size_t>(node)]);
}

std::pair<double, double> ModelCoster::turn_seconds(std::int64_t tokens) {
  if (first_context_ < 0) return {0.0, 0.0};  // no step since the prefill
  // The steps committed every root they ran, so the sequence holds the tokens plain decoding
  // runs: the first step's root and each token produced after it.
  const auto first = static_cast<std::size_t>(first_context_);
  const std::size_t count = std::min(static_cast<std::size_t>(tokens), sequence_.size() - first);
  target_.prefill(std::span(sequence_).first(first));
  double plain = 0;
  for (std::size_t i = 0; i < count; ++i) {
    root_.token[0] = sequence_[first + i];
    const specdec::TreeView view = root_.view(static_cast<int>(first + i));
    const auto t0 = Clock::now();
    target_.forward(view);
    target_.commit(kRootPath);
    plain += seconds_between(t0, Clock::now());
  }
  return {seconds_, plain};
}

specdec::Llama2cTarget make_llama_target(std::shared_ptr<const specdec::Llama2cModel> model, int threads) {
  return specdec::Llama2cTarget(std::move(model), specdec::Llama2cTarget::Options{threads});
}

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

// ---- calibrate ------------------------------------------------------------------------------

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

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buffer;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
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
        if (r > 0) times[i].push_back(1e6 * seconds_between(t0, Clock::now()));
      }
      const auto t0 = Clock::now();
      target.forward(one.view(context));
      target.commit(kRootPath);
      if (r > 0) plain.push_back(1e6 * seconds_between(t0, Clock::now()));
      target.rewind(context);
    }
    std::vector<double>& row = grid.forward_us.emplace_back();
    for (auto& cell : times) row.push_back(median(cell));
    grid.plain_us.push_back(median(plain));
  }
  return grid;
}

}  // namespace

namespace {

// The sum of `n` floats (n a multiple of 64), four 64-byte vectors in flight: on a core with
// AVX-512 one instruction per cache line, so the loop waits on memory, not on additions
// (target_clones: the widest vectors this machine has, whatever the build's -march).
#if defined(__GNUC__) && defined(__x86_64__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
float stream_sum(const float* data, std::size_t n) {
  typedef float v16 __attribute__((vector_size(64)));
  v16 s0{}, s1{}, s2{}, s3{};
  for (std::size_t i = 0; i < n; i += 64) {
    v16 a, b, c, d;
    __builtin_memcpy(&a, data + i, sizeof a);
    __builtin_memcpy(&b, data + i + 16, sizeof b);
    __builtin_memcpy(&c, data + i + 32, sizeof c);
    __builtin_memcpy(&d, data + i + 48, sizeof d);
    s0 += a;
    s1 += b;
    s2 += c;
    s3 += d;
  }
  const v16 s = (s0 + s1) + (s2 + s3);
  float sum = 0;
  for (int k = 0; k < 16; ++k) sum += s[k];
  return sum;
}

}  // namespace

double read_bandwidth_gbs() {
  constexpr std::size_t floats = (std::size_t{1} << 30) / sizeof(float);
  std::vector<float> data(floats, 1.0f);  // sums of ones stay exact in float: 2^28 = 268435456
  double best = 0;
  for (int pass = 0; pass < 3; ++pass) {
    const auto t0 = Clock::now();
    const float sum = stream_sum(data.data(), floats);
    const double seconds = seconds_between(t0, Clock::now());
    // Checked, so that the loop cannot be optimised away.
    if (sum != static_cast<float>(floats)) throw std::logic_error("bandwidth sum is wrong");
    best = std::max(best, static_cast<double>(floats * sizeof(float)) / seconds / 1e9);
  }
  return best;
}

MatrixProductGflops matrix_product_gflops(int threads, specdec::WeightFormat weights) {
  constexpr int in = 256, out = 256, tokens = 32, rounds = 256, products = 4;
  std::vector<float> w(static_cast<std::size_t>(in) * out), x(static_cast<std::size_t>(tokens) * in);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 17) / 64 - 0.125f;
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 13) / 16 - 0.375f;
  const specdec::llama::Matrix m = specdec::llama::Matrix::pack(in, {{w.data(), out}}, weights);
  // Outputs of their own: lines that the other threads wrote would move between caches.
  std::vector<float> y_one(static_cast<std::size_t>(tokens) * m.stride), y_all(y_one.size());
  specdec::llama::ThreadPool pool(threads);
  auto fastest = [&](specdec::llama::ThreadPool* on, double& best) {
    for (int p = 0; p < products; ++p) {
      const auto t0 = Clock::now();
      specdec::llama::detail::matmul(on, m, x.data(), in, tokens, (on ? y_all : y_one).data(), m.stride);
      best = std::min(best, seconds_between(t0, Clock::now()));
    }
  };
  double one = std::numeric_limits<double>::infinity(), all = one;
  for (int r = 0; r < rounds; ++r) {
    fastest(nullptr, one);
    fastest(&pool, all);
  }
  const double operations = 2.0 * in * out * tokens;
  return {operations / one / 1e9, operations / all / 1e9};
}

CostTable calibrate(const CalibrateOptions& o, const fs::path& scratch, std::ostream& log) {
  auto loaded = load_model(o.model, o.weights);
  const specdec::LlamaConfig config = loaded->config();
  // The contexts that leave room for the largest tree; when some do not, the largest that does
  // takes their place, so the table reaches the model's last positions.
  std::vector<int> contexts;
  for (const int c : o.contexts)
    if (o.nodes.back() <= config.seq_len - c) contexts.push_back(c);
  const int last = config.seq_len - o.nodes.back();
  if (contexts.size() < o.contexts.size() && last >= 0 && (contexts.empty() || contexts.back() < last))
    contexts.push_back(last);
  if (contexts.empty())
    throw input_error(fmt::format("the model has {} positions: no context of --contexts leaves room for a tree of {} "
                                  "nodes",
                                  config.seq_len, o.nodes.back()));
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
                            seconds_between(t0, Clock::now()), threads, specdec::weight_format_name(weights), largest,
                            contexts, o.repetitions);
  return table;
}

// ---- text and picture -----------------------------------------------------------------------

namespace {

// The table's matrix_product_gflops, if any: one thread's figure against all threads'. Threads that
// add less than half of one thread's arithmetic each share cores: a tree's extra nodes, which are
// arithmetic, then gain little from them.
void print_matrix_product_line(std::ostream& out, const nlohmann::ordered_json& metadata) {
  if (!metadata.contains("matrix_product_gflops")) return;
  const auto& gflops = metadata["matrix_product_gflops"];
  if (!gflops.is_object() || gflops.size() != 2 || !gflops.contains("1")) return;
  const auto all = std::find_if(gflops.items().begin(), gflops.items().end(), [](const auto& item) { return item.key() != "1"; });
  const double threads = std::atof(all.key().c_str());
  if (!gflops["1"].is_number() || !all.value().is_number() || !(threads > 1)) return;
  const double one = gflops["1"].get<double>(), many = all.value().get<double>();
  out << fmt::format("  matrix product (the forward's kernel, 32 tokens, weights from cache): {:.1f} GFLOP/s on 1 thread, "
                     "{:.1f} on {} ({:.2f} x)\n",
                     one, many, all.key(), many / one);
  if (many - one < 0.5 * (threads - 1) * one)
    out << fmt::format("  {} threads add {:.0f} % to one thread's arithmetic where separate cores would add about {:.0f} %: "
                       "they share cores (SMT siblings, or virtual CPUs backed by one core), and a tree's extra nodes gain "
                       "little from them\n",
                       all.key(), 100 * (many / one - 1), 100 * (threads - 1));
}

}  // namespace

void print_cost_table(std::ostream& out, const CostTable& t) {
  out << "cost table: " << t.describe() << "\n";
  if (t.metadata.contains("model")) {
    const auto& m = t.metadata["model"];
    if (m.contains("config")) out << "  " << m["config"].get<std::string>() << "\n";
    if (m.value("synthetic_weights", false))
      out << "  SYNTHETIC weights (shape " << m.value("shape", "?") << "): timing only, the outputs are meaningless\n";
    if (m.contains("scaling")) out << "  layer-wise: " << m["scaling"].get<std::string>() << "\n";
  }
  if (t.metadata.contains("read_bandwidth_gbs"))
    out << fmt::format("  read bandwidth (one core, sum of a 1 GiB array): {} GB/s\n", t.metadata["read_bandwidth_gbs"].dump());
  print_matrix_product_line(out, t.metadata);
  out << fmt::format("forward time in us (median of {}); tree: a chain of n nodes, the root included\n\n",
                     t.metadata.contains("repetitions") ? t.metadata["repetitions"].dump() : "?");
  out << fmt::format("{:>8} {:>10}", "context", "plain");
  for (const int n : t.nodes) out << fmt::format(" {:>10}", fmt::format("n={}", n));
  out << "\n";
  for (const auto& c : t.contexts) {
    out << fmt::format("{:>8} {:>10.1f}", c.context, c.plain_us);
    for (const double us : c.forward_us) out << fmt::format(" {:>10.1f}", us);
    out << "\n";
  }
  out << "\nc(n) / c(1): a forward of n nodes in units of a one-node forward (n when it costs n forwards)\n";
  out << fmt::format("{:>8} {:>10}", "context", "");
  for (const int n : t.nodes) out << fmt::format(" {:>10}", fmt::format("n={}", n));
  out << "\n";
  for (const auto& c : t.contexts) {
    out << fmt::format("{:>8} {:>10}", c.context, "");
    for (const double us : c.forward_us) out << fmt::format(" {:>10.2f}", us / c.forward_us.front());
    out << "\n";
  }
}

std::string cost_svg(const CostTable& t) {
  constexpr double width = 760, height = 480, left = 70, right = 150, top = 50, bottom = 60;
  constexpr const char* colors[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f"};
  const double plot_w = width - left - right, plot_h = height - top - bottom;
  const double lx0 = std::log2(static_cast<double>(t.nodes.front())), lx1 = std::log2(static_cast<double>(t.max_nodes()));
  // Both axes in log2: n separate forwards are the diagonal, a free extra token a flat line.
  double y_top = 1;
  for (const auto& c : t.contexts)
    for (const double us : c.forward_us) y_top = std::max(y_top, us / c.forward_us.front());
  const double ly_max = std::max(1.0, std::ceil(std::log2(std::max(y_top, static_cast<double>(t.max_nodes())))));
  const auto x_of = [&](double n) {
    return left + (lx1 > lx0 ? plot_w * (std::log2(n) - lx0) / (lx1 - lx0) : 0.0);
  };
  const auto y_of = [&](double r) { return top + plot_h * (1.0 - std::clamp(std::log2(r), 0.0, ly_max) / ly_max); };
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      width, height);
  std::string model = "?";
  if (t.metadata.contains("model")) {
    const auto& m = t.metadata["model"];
    model = m.value("shape", m.value("file", std::string("?")));
    if (m.value("synthetic_weights", false)) model += " shape, synthetic weights";
  }
  svg += fmt::format("<text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">Forward of n tree nodes / "
                     "forward of 1 node: {}</text>\n",
                     left + plot_w / 2, model);
  svg += fmt::format("<text x=\"{}\" y=\"40\" text-anchor=\"middle\" fill=\"#555\">{}</text>\n", left + plot_w / 2,
                     fmt::format("{}, {} thread(s), chain trees", t.metadata.value("machine", std::string("?")),
                                 t.metadata.contains("threads") ? t.metadata["threads"].dump() : "?"));
  for (int tick = 0; tick <= static_cast<int>(ly_max); ++tick) {
    const double r = std::exp2(tick);
    svg += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>\n", left, left + plot_w,
                       y_of(r), y_of(r));
    svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:g}</text>\n", left - 6, y_of(r) + 4, r);
  }
  for (const int n : t.nodes) {
    svg += fmt::format("<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#eee\"/>\n", x_of(n), top,
                       top + plot_h);
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", x_of(n), top + plot_h + 16, n);
  }
  // c(n) = n c(1): what n separate forwards would cost (cut at the top of the plot).
  const std::string ideal = fmt::format("{:.1f},{:.1f} {:.1f},{:.1f}", x_of(t.nodes.front()), y_of(t.nodes.front()),
                                        x_of(t.max_nodes()), y_of(t.max_nodes()));
  svg += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"#999\" stroke-dasharray=\"5 4\"/>\n", ideal);
  for (std::size_t c = 0; c < t.contexts.size(); ++c) {
    const auto& row = t.contexts[c];
    std::string points;
    for (std::size_t i = 0; i < t.nodes.size(); ++i)
      points += fmt::format("{:.1f},{:.1f} ", x_of(t.nodes[i]), y_of(row.forward_us[i] / row.forward_us.front()));
    svg += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n", points,
                       colors[c % 8]);
    for (std::size_t i = 0; i < t.nodes.size(); ++i)
      svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"><title>context {}, n = {}: {:.1f} us, "
                         "{:.2f} x c(1)</title></circle>\n",
                         x_of(t.nodes[i]), y_of(row.forward_us[i] / row.forward_us.front()), colors[c % 8], row.context,
                         t.nodes[i], row.forward_us[i], row.forward_us[i] / row.forward_us.front());
    const double ly = top + 10 + 20 * static_cast<double>(c);
    svg += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" stroke=\"{3}\" stroke-width=\"2\"/>\n",
                       left + plot_w + 15, left + plot_w + 35, ly, colors[c % 8]);
    svg += fmt::format("<text x=\"{}\" y=\"{}\">context {}</text>\n", left + plot_w + 40, ly + 4, row.context);
  }
  const double ly = top + 10 + 20 * static_cast<double>(t.contexts.size());
  svg += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" stroke=\"#999\" stroke-dasharray=\"5 4\"/>\n",
                     left + plot_w + 15, left + plot_w + 35, ly);
  svg += fmt::format("<text x=\"{}\" y=\"{}\">n forwards</text>\n", left + plot_w + 40, ly + 4);
  svg += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" stroke=\"black\"/>\n", left, left + plot_w,
                     top + plot_h);
  svg += fmt::format("<line x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\" stroke=\"black\"/>\n", left, top, top + plot_h);
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">n: tree nodes in one forward (a chain, the root "
                     "included; log scale)</text>\n",
                     left + plot_w / 2, height - 18);
  svg += fmt::format("<text transform=\"translate(20 {}) rotate(-90)\" text-anchor=\"middle\">c(n) / c(1) (log scale)</text>\n",
                     top + plot_h / 2);
  svg += "</svg>\n";
  return svg;
}

}  // namespace specbench
