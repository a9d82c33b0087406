// `--device cuda` (cuda_device.hpp) in a CUDA build: CudaLlamaTarget timed for a cost table,
// decoding the real checkpoints speculatively and plainly, and costing the replay's steps. The
// one CUDA translation unit of specbench: it instantiates only the GPU's few combinations (the
// list below), so that it stays quick to compile.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <iostream>
#include <optional>
#include <sstream>
#include <ostream>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime.h>

#include <specdec/backend.hpp>
#include <specdec/core/tree.hpp>
#include <specdec/decoder.hpp>
#include <specdec/models/synthetic_llama.hpp>
#include <specdec/policies/drafters/casd.hpp>
#include <specdec/policies/drafters/context_tree.hpp>
#include <specdec/policies/drafters/empty.hpp>
#include <specdec/policies/drafters/pld.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/targets/cuda_llama.cuh>
#include <specdec/testing/laid_out_tree.hpp>

#include "cuda_device.hpp"
#include "input_error.hpp"

namespace specbench {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// A CUDA failure in the middle of a run: one sentence (exit 2), not an internal error.
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw input_error(std::string("--device cuda: ") + what + " failed: " + cudaGetErrorString(e));
}
void check(specdec::backend::status s, const char* what) {
  if (s != specdec::backend::status::ok)
    throw input_error(std::string("--device cuda: ") + what + " failed: " + describe(specdec::backend::cuda{}, s));
}

std::string device_name() {
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, 0), "cudaGetDeviceProperties");
  return p.name;
}

specdec::CudaLlamaTarget load_target(const CudaModelChoice& model) {
  try {
    if (!model.shape.empty()) return specdec::CudaLlamaTarget::synthetic(specdec::synthetic_shape(model.shape), 1);
    return specdec::CudaLlamaTarget::load(model.file);
  } catch (const specdec::error& e) {
    throw input_error(e.what());
  }
}

/// A tree's arrays, and a step's compaction inputs, copied to the device through one pinned
/// staging buffer: the copy of a TreeView the forward reads (token, depth, mask), then the
/// accepted path with its base and length.
class DeviceStep {
 public:
  explicit DeviceStep(specdec::backend::cuda tag)
      : tag_(tag), staging_(tag, specdec::backend::memory::staging), device_(tag, specdec::backend::memory::backend) {}

  /// Enqueues the copy of `tree` (host arrays); the view of its device copy.
  specdec::TreeView upload(const specdec::TreeView& tree) {
    const std::size_t n = static_cast<std::size_t>(tree.size);
    const std::size_t words = n * static_cast<std::size_t>(tree.words_per_row);
    const std::size_t depth_at = align(n * sizeof(token_t)), mask_at = depth_at + align(n * sizeof(int));
    tree_bytes_ = mask_at + align(words * sizeof(std::uint32_t));
    reserve(tree_bytes_ + path_room(tree.size));
    unsigned char* h = staging_.data();
    std::memcpy(h, tree.token, n * sizeof(token_t));
    std::memcpy(h + depth_at, tree.depth, n * sizeof(int));
    std::memcpy(h + mask_at, tree.mask, words * sizeof(std::uint32_t));
    check(specdec::backend::copy(tag_, device_.data(), h, tree_bytes_), "copying the tree to the device");
    specdec::TreeView view;
    view.size = tree.size;
    view.words_per_row = tree.words_per_row;
    view.base_position = tree.base_position;
    view.max_depth = tree.max_depth;
    view.token = reinterpret_cast<const token_t*>(device_.data());
    view.depth = reinterpret_cast<const int*>(device_.data() + depth_at);
    view.mask = reinterpret_cast<const std::uint32_t*>(device_.data() + mask_at);
    return view;
  }

  /// Enqueues the compaction of `path` (nodes of the last uploaded tree, of `nodes` nodes) at
  /// `base` in `cache`.
  void compact(std::span<const specdec::node_t> path, int nodes, int base, const specdec::core::KvCacheView& cache) {
    const int length = static_cast<int>(path.size());
    unsigned char* h = staging_.data() + tree_bytes_;
    const std::size_t path_bytes = align(static_cast<std::size_t>(nodes) * sizeof(specdec::node_t));
    std::memcpy(h, path.data(), path.size() * sizeof(specdec::node_t));
    std::memcpy(h + path_bytes, &base, sizeof(int));
    std::memcpy(h + path_bytes + sizeof(int), &length, sizeof(int));
    unsigned char* d = device_.data() + tree_bytes_;
    check(specdec::backend::copy(tag_, d, h, path_bytes + 2 * sizeof(int)), "copying the accepted path");
    specdec::core::KvCompactionBatch b;
    b.batch = 1;
    b.max_nodes = nodes;
    b.layout = cache.layout;
    b.k_cache = cache.k;
    b.v_cache = cache.v;
    b.path = reinterpret_cast<const specdec::node_t*>(d);
    b.base = reinterpret_cast<const int*>(d + path_bytes);
    b.length = reinterpret_cast<const int*>(d + path_bytes + sizeof(int));
    b.status = reinterpret_cast<specdec::core::compaction_status*>(d + path_bytes + 2 * sizeof(int));
    check(specdec::backend::compact_kv(tag_, b), "the KV compaction");
  }

 private:
  static std::size_t align(std::size_t bytes) { return (bytes + 15) / 16 * 16; }
  static std::size_t path_room(int nodes) {
    return align(static_cast<std::size_t>(nodes) * sizeof(specdec::node_t)) + 2 * sizeof(int) +
           sizeof(specdec::core::compaction_status);
  }
  // Growing waits for the device (the old buffers may still be read).
  void reserve(std::size_t bytes) {
    if (bytes <= staging_.size()) return;
    check(specdec::backend::synchronize(tag_), "waiting for the device");
    staging_.grow(bytes * 2);
    device_.grow(bytes * 2);
  }

  specdec::backend::cuda tag_;
  specdec::backend::buffer<specdec::backend::cuda> staging_, device_;
  std::size_t tree_bytes_ = 0;
};

/// A chain of n nodes (the calibration's tree, as on the host).
specdec::testing::LaidOutTree chain(int n, int vocab) {
  std::vector<specdec::node_t> parent(static_cast<std::size_t>(n));
  std::vector<token_t> token(parent.size());
  for (int i = 0; i < n; ++i) {
    parent[static_cast<std::size_t>(i)] = i - 1;
    token[static_cast<std::size_t>(i)] = (7 * i + 3) % vocab;
  }
  return specdec::testing::LaidOutTree(std::move(parent), std::move(token));
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

/// The cost table of `target`: see calibrate_cuda.
CostTable time_table(specdec::CudaLlamaTarget& target, const CudaModelChoice& model, const std::vector<int>& nodes,
                     const std::vector<int>& wanted, int repetitions, std::ostream& log) {
  const int largest = nodes.back();
  if (largest > target.max_tree_nodes())
    throw input_error("--max-nodes " + std::to_string(largest) + ": the GPU target's forward takes trees of at most " +
                      std::to_string(target.max_tree_nodes()) + " nodes");
  const std::vector<int> contexts = fitting_contexts(wanted, target.max_positions(), largest);
  const specdec::backend::cuda tag = target.backend();
  CostTable t;
  t.nodes = nodes;
  t.metadata = cuda_table_metadata(
      model, specdec::Llama2cModel::describe(target.config()),
      specdec::Llama2cModel::forward_weight_bytes(target.config(), target.weight_format()),
      specdec::weight_format_name(target.weight_format()), device_name(), repetitions);
  cudaEvent_t start = nullptr, stop = nullptr;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  DeviceStep step(tag);
  // One copy in and forward of `tree`, timed by events on the target's stream: microseconds.
  const auto timed = [&](const specdec::testing::LaidOutTree& tree, int context) {
    check(cudaEventRecord(start, tag.stream), "cudaEventRecord");
    target.forward(step.upload(tree.view(context)));
    check(cudaEventRecord(stop, tag.stream), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "the timed forward");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    return 1000.0 * ms;
  };
  try {
    for (const int context : contexts) {
      log << "specbench calibrate --device cuda: context " << context << " ...\n" << std::flush;
      std::vector<token_t> prompt(static_cast<std::size_t>(context));
      for (int i = 0; i < context; ++i) prompt[static_cast<std::size_t>(i)] = (31 * i + 5) % target.vocab_size();
      target.prefill(prompt);
      CostTable::Context row;
      row.context = context;
      std::vector<double> plain;
      const specdec::testing::LaidOutTree one = chain(1, target.vocab_size());
      timed(one, context);  // warm-up
      for (int r = 0; r < repetitions; ++r) plain.push_back(timed(one, context));
      row.plain_us = median(plain);
      for (const int n : nodes) {
        const specdec::testing::LaidOutTree tree = chain(n, target.vocab_size());
        timed(tree, context);  // warm-up
        std::vector<double> us;
        for (int r = 0; r < repetitions; ++r) us.push_back(timed(tree, context));
        row.forward_us.push_back(median(us));
      }
      t.contexts.push_back(std::move(row));
    }
  } catch (const specdec::error& e) {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    throw input_error(e.what());
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return t;
}

/// Plain greedy decoding on the GPU target, the reference of `model --device cuda`: one
/// one-node forward per token, its logits copied out, argmax on the host (core::argmax_row, the
/// verifier's own rule).
class PlainGreedy {
 public:
  explicit PlainGreedy(specdec::CudaLlamaTarget& target)
      : target_(target), step_(target.backend()), row_(target.backend(), specdec::backend::memory::staging) {
    row_.grow(sizeof(float) * static_cast<std::size_t>(target.vocab_size()));
  }
  /// `n` new tokens after `prompt` (stopping after a token of `stop`, included); adds the
  /// prefill's seconds to `prefill_seconds`.
  std::vector<token_t> generate(std::span<const token_t> prompt, int n, std::span<const token_t> stop,
                                double& prefill_seconds) {
    const auto t0 = Clock::now();
    target_.prefill(prompt.first(prompt.size() - 1));
    check(specdec::backend::synchronize(target_.backend()), "the prefill");
    prefill_seconds += seconds_since(t0);
    std::vector<token_t> out;
    token_t last = prompt.back();
    const int vocab = target_.vocab_size();
    auto* row = reinterpret_cast<float*>(row_.data());
    for (int k = 0; k < n; ++k) {
      root_.token[0] = last;
      const specdec::LogitsRows logits =
          target_.forward(step_.upload(root_.view(static_cast<int>(prompt.size()) - 1 + k)));
      check(specdec::backend::copy(target_.backend(), row, logits.data, sizeof(float) * vocab), "copying the logits");
      check(specdec::backend::synchronize(target_.backend()), "the plain step");
      last = specdec::core::argmax_row(row, vocab);
      out.push_back(last);
      if (std::find(stop.begin(), stop.end(), last) != stop.end()) break;
    }
    return out;
  }

 private:
  specdec::CudaLlamaTarget& target_;
  DeviceStep step_;
  specdec::backend::buffer<specdec::backend::cuda> row_;
  specdec::testing::LaidOutTree root_{{-1}, {0}};
};

template <class... Drafters>
CudaModelRun decode_on_cuda(const ModelBench& bench, const ModelOptions& options, const CudaModelChoice& model,
                            EnergyMeter& meter) {
  using Decoder = specdec::SpeculativeDecoder<specdec::CudaLlamaTarget, Drafters..., specdec::ExactVerifier>;
  const auto start = Clock::now();
  CudaModelRun out;
  out.device = device_name();
  specdec::CudaLlamaTarget target = load_target(model);
  out.target = "CudaLlamaTarget (" + specdec::Llama2cModel::describe(target.config()) + ", " +
               specdec::weight_format_name(target.weight_format()) + " weights)";
  const TargetInfo info{bench.model->config().vocab_size, bench.model};
  const specdec::DecoderOptions decoder_options{.budget = options.budget, .cost = options.cost};
  ModelRun& run = out.run;
  run.drafters = Decoder::names();
  run.turns.resize(bench.prompts.size());
  try {
    PlainGreedy plain(target);
    if (!bench.prompts.empty()) {  // warm-up: the kernels' first launches, outside the timed passes
      const std::vector<token_t>& first = bench.prompts.front().tokens;
      double ignored = 0;
      plain.generate(first, 4, {}, ignored);
      Decoder warm(target, decoder_options, make_drafter<Drafters>(options.resources, info)..., specdec::ExactVerifier{});
      warm.prefill(first);
      warm.generate(4);
    }
    std::vector<std::vector<token_t>> plain_outputs(bench.prompts.size());
    // One round (the GPU check's time is short): plain, then speculative, each timed with and
    // without its prefills.
    std::int64_t plain_tokens = 0;
    double plain_seconds = 0, plain_prefill = 0;
    const std::optional<double> plain_before = meter.joules();
    for (std::size_t p = 0; p < bench.prompts.size(); ++p) {
      const ModelPrompt& prompt = bench.prompts[p];
      const auto t0 = Clock::now();
      plain_outputs[p] = plain.generate(prompt.tokens, prompt.max_new_tokens, bench.stop_tokens, plain_prefill);
      plain_seconds += seconds_since(t0);
      run.turns[p].plain_tokens = static_cast<std::int64_t>(plain_outputs[p].size());
      plain_tokens += run.turns[p].plain_tokens;
    }
    out.plain_energy.add(plain_before, meter.joules(), plain_tokens);

    // One decoder for every prompt, as on the host: drafters live across prompts.
    Decoder decoder(target, decoder_options, make_drafter<Drafters>(options.resources, info)...,
                    specdec::ExactVerifier{});
    std::int64_t speculative_tokens = 0;
    double speculative_seconds = 0, speculative_prefill = 0;
    const std::optional<double> speculative_before = meter.joules();
    for (std::size_t p = 0; p < bench.prompts.size(); ++p) {
      const ModelPrompt& prompt = bench.prompts[p];
      ModelTurn& turn = run.turns[p];
      const auto t0 = Clock::now();
      decoder.prefill(prompt.tokens);
      check(cudaStreamSynchronize(target.backend().stream), "the prefill");
      speculative_prefill += seconds_since(t0);
      turn.output = decoder.generate(prompt.max_new_tokens, bench.stop_tokens);
      speculative_seconds += seconds_since(t0);
      turn.result = {decoder.stats(), static_cast<std::int64_t>(turn.output.size())};
      turn.equals_plain = turn.output == plain_outputs[p];
      speculative_tokens += static_cast<std::int64_t>(turn.output.size());
    }
    out.speculative_energy.add(speculative_before, meter.joules(), speculative_tokens);
    run.calibration = calibration_of(decoder);
    run.rounds.add(round_time(plain_tokens, plain_seconds, speculative_tokens, speculative_seconds));
    run.decode_rounds.add(round_time(plain_tokens, plain_seconds - plain_prefill, speculative_tokens,
                                     speculative_seconds - speculative_prefill));
  } catch (const specdec::error& e) {
    throw input_error(std::string("--device cuda: ") + e.what());
  }
  run.seconds = seconds_since(start);
  return out;
}

/// The combinations `model --device cuda` is compiled with (exact verifier only).
template <class... Drafters>
std::pair<std::vector<std::string>, CudaModelRunner> entry() {
  return {{Drafters::name...}, &decode_on_cuda<Drafters...>};
}
const std::vector<std::pair<std::vector<std::string>, CudaModelRunner>>& gpu_combinations() {
  static const std::vector<std::pair<std::vector<std::string>, CudaModelRunner>> list{
      entry<specdec::PldDrafter>(), entry<specdec::CasdDrafter>(), entry<specdec::ContextTreeDrafter>(),
      entry<specdec::HistoryTreeDrafter>(), entry<specdec::EmptyDrafter>()};
  return list;
}

class CudaCoster final : public CudaStepCoster {
 public:
  CudaCoster(specdec::CudaLlamaTarget target, CudaModelChoice model, EnergyMeter meter)
      : target_(std::move(target)), model_(std::move(model)), meter_(std::move(meter)), step_(target_.backend()) {}

  int positions() const { return target_.max_positions(); }
  int vocab_size() const { return target_.vocab_size(); }
  int max_tree_nodes() const { return target_.max_tree_nodes(); }
  std::string describe() const {
    return model_.name() + " (" + specdec::Llama2cModel::describe(target_.config()) + ", " +
           specdec::weight_format_name(target_.weight_format()) + " weights) on " + device_name();
  }

  void prefill(std::span<const token_t> tokens) override {
    guard([&] { target_.prefill(tokens); });
    sequence_.assign(tokens.begin(), tokens.end());
    seconds_ = 0;
    first_context_ = -1;
    turn_start_ = meter_.joules();
  }
  void forward(const specdec::TreeView& tree) override {
    if (first_context_ < 0) first_context_ = tree.base_position;
    tree_tokens_.assign(tree.token, tree.token + tree.size);
    base_ = tree.base_position;
    step_start_ = Clock::now();
    guard([&] { target_.forward(step_.upload(tree)); });
  }
  void commit(std::span<const specdec::node_t> path) override {
    step_.compact(path, static_cast<int>(tree_tokens_.size()), base_, target_.kv_cache());
    check(cudaStreamSynchronize(target_.backend().stream), "the step");
    seconds_ += seconds_since(step_start_);
    for (const specdec::node_t node : path) sequence_.push_back(tree_tokens_[static_cast<std::size_t>(node)]);
  }
  std::pair<double, double> turn_seconds(std::int64_t tokens) override {
    if (first_context_ < 0) return {0.0, 0.0};  // no step since the prefill
    speculative_energy_.add(turn_start_, meter_.joules(), tokens);
    // The steps committed every root they ran: the sequence holds the tokens plain decoding runs,
    // from the first step's root. Only the positions matter to the time; the cache's rows past
    // them are overwritten by the next turn's prefill.
    const auto first = static_cast<std::size_t>(first_context_);
    const std::int64_t count = std::min<std::int64_t>(tokens, static_cast<std::int64_t>(sequence_.size() - first));
    const std::int64_t samples = std::min<std::int64_t>(count, plain_samples);
    double sampled = 0;
    const std::optional<double> before = meter_.joules();
    for (std::int64_t k = 0; k < samples; ++k) {
      const std::size_t i = first + static_cast<std::size_t>(k * count / samples);
      root_.token[0] = sequence_[i];
      const auto t0 = Clock::now();
      guard([&] { target_.forward(step_.upload(root_.view(static_cast<int>(i)))); });
      check(cudaStreamSynchronize(target_.backend().stream), "the plain step");
      sampled += seconds_since(t0);
    }
    plain_energy_.add(before, meter_.joules(), samples);
    const double plain = samples > 0 ? sampled / static_cast<double>(samples) * static_cast<double>(count) : 0.0;
    // A line per turn, so that a run stopped by a time limit still says what it measured.
    std::cerr << "specbench: GPU turn " << ++turns_ << ": " << tokens << " tokens, steps " << seconds_ * 1e3
              << " ms, plain " << plain * 1e3 << " ms (" << samples << " of " << count << " steps timed)\n";
    return {seconds_, plain};
  }

  CostTable quick_calibration(int largest, std::string& description) override {
    const auto t0 = Clock::now();
    std::ostringstream log;  // one line says what was done
    CostTable table = time_table(target_, model_, doubling_sizes(largest), CalibrateOptions{}.contexts, 2, log);
    std::string contexts;
    for (const auto& c : table.contexts) contexts += (contexts.empty() ? "" : ", ") + std::to_string(c.context);
    description = "calibrated on " + device_name() + " at start-up in " + std::to_string(seconds_since(t0)) +
                  " s (trees of 1 to " + std::to_string(largest) + " nodes at contexts " + contexts + "; median of 2)";
    return table;
  }
  const EnergyMeter& energy_meter() const override { return meter_; }
  const EnergyTotal& speculative_energy() const override { return speculative_energy_; }
  const EnergyTotal& plain_energy() const override { return plain_energy_; }

 private:
  template <class F>
  static void guard(F&& f) {
    try {
      f();
    } catch (const specdec::error& e) {
      throw input_error(std::string("--device cuda: ") + e.what());
    }
  }

  specdec::CudaLlamaTarget target_;
  CudaModelChoice model_;
  EnergyMeter meter_;
  DeviceStep step_;
  std::vector<token_t> sequence_, tree_tokens_;
  specdec::testing::LaidOutTree root_{{-1}, {0}};
  Clock::time_point step_start_{};
  double seconds_ = 0;
  int first_context_ = -1, base_ = 0, turns_ = 0;
  std::optional<double> turn_start_;
  EnergyTotal speculative_energy_, plain_energy_;
};

}  // namespace

bool cuda_built() { return true; }

std::string require_cuda_device() {
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess || devices == 0)
    throw input_error(std::string("--device cuda: no CUDA device is visible (") +
                      (status != cudaSuccess ? cudaGetErrorString(status) : "0 devices") +
                      "); run on a machine with an NVIDIA GPU and its driver");
  return device_name();
}

CostTable calibrate_cuda(const CudaModelChoice& model, const CalibrateOptions& options, std::ostream& log) {
  require_cuda_device();
  specdec::CudaLlamaTarget target = load_target(model);
  return time_table(target, model, options.nodes, options.contexts, options.repetitions, log);
}

CudaModelRunner find_cuda_combination(const std::vector<std::string>& drafters) {
  std::vector<std::string> wanted = drafters;
  std::sort(wanted.begin(), wanted.end());
  for (const auto& [names, runner] : gpu_combinations()) {
    std::vector<std::string> sorted = names;
    std::sort(sorted.begin(), sorted.end());
    if (sorted == wanted) return runner;
  }
  std::string known;
  for (const std::string& name : cuda_combination_names()) known += (known.empty() ? "" : ", ") + name;
  std::string given;
  for (const std::string& name : wanted) given += (given.empty() ? "" : ",") + name;
  throw input_error("--device cuda: the combination '" + given + "' is not compiled for the GPU; it decodes " + known);
}

std::vector<std::string> cuda_combination_names() {
  std::vector<std::string> out;
  for (const auto& [names, runner] : gpu_combinations()) {
    std::string joined;
    for (const std::string& name : names) joined += (joined.empty() ? "" : ",") + name;
    out.push_back(joined);
  }
  return out;
}

EnergyMeter cuda_energy_meter() {
  char bus[32] = {};
  check(cudaDeviceGetPCIBusId(bus, sizeof bus, 0), "cudaDeviceGetPCIBusId");
  return EnergyMeter(bus);
}

std::unique_ptr<CudaStepCoster> make_cuda_coster(const CudaModelChoice& model, Corpus& corpus, int budget,
                                                 std::string& source) {
  const std::string device = require_cuda_device();
  auto coster = std::make_unique<CudaCoster>(load_target(model), model, cuda_energy_meter());
  if (coster->vocab_size() < corpus.vocab_size)
    throw input_error("--timed-model " + model.name() + ": its vocabulary has " + std::to_string(coster->vocab_size()) +
                      " tokens, fewer than the replay's " + std::to_string(corpus.vocab_size));
  if (budget >= coster->max_tree_nodes())
    throw input_error("--device cuda: a budget of " + std::to_string(budget) + " draft nodes makes trees larger than " +
                      "the GPU target's forward takes (" + std::to_string(coster->max_tree_nodes()) +
                      " nodes); lower --budget or --budget-cap");
  const std::size_t turns = corpus.turns.size();
  if (const int dropped = drop_turns_longer_than(corpus, coster->positions(), budget); dropped > 0)
    std::cerr << "specbench: " << dropped << " of " << turns << " turns do not fit the timed model's "
              << coster->positions() << " positions (prompt + answer + stop + budget) and are left out\n";
  if (corpus.turns.empty()) throw input_error("--timed-model " + model.name() + ": no turn fits its positions");
  source = "measured on the GPU: every step also run through " + coster->describe() +
           " (tree copied in, forward, KV compaction, one synchronisation; no verification kernel); plain decoding "
           "timed on up to " + std::to_string(CudaStepCoster::plain_samples) + " steps per turn" +
           (model.shape.empty() ? "" : "; SYNTHETIC weights, timing only");
  return coster;
}

}  // namespace specbench
