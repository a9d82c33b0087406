// DeviceRuns (device.hpp) written once over the backend: DeviceLlamaTarget<Backend> timed for a
// cost table, decoding the real checkpoints speculatively and plainly, and costing the replay's
// steps. `Device` says what differs between devices:
//
//   struct Device {
//     using backend = specdec::backend::cuda;          // the target's backend
//     static constexpr const char* option = "--device cuda", *timer = "CUDA events", *kind = "GPU";
//     static std::string require();                     // the device's name, or input_error
//     static EnergyMeter energy_meter();
//   };
//
// Included by cuda_device.cpp (CUDA) and emulated_device.cpp (the host's emulated grid) only: each
// instantiates the device's few combinations (device_combinations below), so that both stay quick
// to compile.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iostream>
#include <optional>
#include <ostream>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <specdec/backend.hpp>
#include <specdec/batch_decoder.hpp>
#include <specdec/core/tree.hpp>
#include <specdec/decoder.hpp>
#include <specdec/models/synthetic_llama.hpp>
#include <specdec/policies/drafters/casd.hpp>
#include <specdec/policies/drafters/context_tree.hpp>
#include <specdec/policies/drafters/empty.hpp>
#include <specdec/policies/drafters/pld.hpp>
#include <specdec/policies/verifiers/conditional.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/policies/verifiers/rejection_sampling.hpp>
#include <specdec/targets/device_llama.hpp>
#include <specdec/testing/laid_out_tree.hpp>

#include "batch.hpp"
#include "calibrate.hpp"
#include "clock.hpp"
#include "common/values.hpp"
#include "device.hpp"
#include "input_error.hpp"

namespace specbench::device_runs_detail {

using detail::Clock;
using detail::seconds_since;

/// A failure in the middle of a run: one sentence (exit 2), not an internal error.
template <class Device>
void check(specdec::backend::status s, const char* what) {
  if (s != specdec::backend::status::ok)
    throw input_error(std::string(Device::option) + ": " + what +
                      " failed: " + describe(typename Device::backend{}, s));
}

/// Refuses a budget whose trees (budget + 1 nodes) the device target's forward does not take.
template <class Device>
void check_budget_fits(int budget, int max_tree_nodes) {
  if (budget >= max_tree_nodes)
    throw input_error(std::string(Device::option) + ": a budget of " + std::to_string(budget) +
                      " draft nodes makes trees larger than the device target's forward takes (" +
                      std::to_string(max_tree_nodes) + " nodes); lower --budget or --budget-cap");
}

/// Runs `f`, a library error turned into the device's sentence.
template <class Device, class F>
decltype(auto) guard(F&& f) {
  try {
    return f();
  } catch (const specdec::error& e) {
    throw input_error(std::string(Device::option) + ": " + e.what());
  }
}

template <class Device>
using Target = specdec::DeviceLlamaTarget<typename Device::backend>;

/// The target's options of `model`.
inline specdec::DeviceLlamaOptions target_options(const DeviceModelChoice& model) {
  specdec::DeviceLlamaOptions options;
  options.graphs = model.graphs;
  options.tensor_cores = model.tensor_cores;
  return options;
}

template <class Device>
Target<Device> load_target(const DeviceModelChoice& model) {
  try {
    if (!model.shape.empty())
      return Target<Device>::synthetic(specdec::synthetic_shape(model.shape), 1, {}, target_options(model));
    return Target<Device>::load(model.file, {}, target_options(model));
  } catch (const specdec::error& e) {
    throw input_error(e.what());
  }
}

/// "CudaLlamaTarget (dim ..., fp32 weights)".
template <class Device>
std::string describe_target(Target<Device>& target) {
  return std::string(Target<Device>::name()) + " (" + specdec::Llama2cModel::describe(target.config()) + ", " +
         specdec::weight_format_name(target.weight_format()) + " weights" +
         device_options_text(target.tensor_cores(), target.model().graphs()) + ")";
}

/// Trees' arrays, and a step's compaction inputs, copied to the device through one staging
/// buffer: the copies of the TreeViews a forward reads (token, depth, mask), then room for each
/// tree's accepted path with its base, length and layout sequence. The caller waits for the
/// device between a step's last use and the next upload (the staging buffer is reused).
template <class Device>
class DeviceStep {
 public:
  using Backend = typename Device::backend;
  explicit DeviceStep(Backend tag)
      : tag_(tag), staging_(tag, specdec::backend::memory::staging), device_(tag, specdec::backend::memory::backend) {}

  /// Enqueues the copy of `trees` (host arrays); their views in device memory.
  const std::vector<specdec::TreeView>& upload(std::span<const specdec::TreeView> trees) {
    entries_.assign(trees.size(), {});
    std::size_t at = 0;
    for (std::size_t i = 0; i < trees.size(); ++i) {
      const std::size_t n = static_cast<std::size_t>(trees[i].size);
      const std::size_t words = n * static_cast<std::size_t>(trees[i].words_per_row);
      Entry& e = entries_[i];
      e.token = at;
      e.depth = e.token + align(n * sizeof(token_t));
      e.mask = e.depth + align(n * sizeof(int));
      at = e.mask + align(words * sizeof(std::uint32_t));
    }
    const std::size_t tree_bytes = at;
    for (std::size_t i = 0; i < trees.size(); ++i) {
      Entry& e = entries_[i];
      e.nodes = trees[i].size;
      e.base = trees[i].base_position;
      e.path = at;
      at += align(static_cast<std::size_t>(e.nodes) * sizeof(specdec::node_t)) + path_tail;
    }
    reserve(at);
    unsigned char* h = staging_.data();
    views_.assign(trees.size(), {});
    for (std::size_t i = 0; i < trees.size(); ++i) {
      const specdec::TreeView& t = trees[i];
      const Entry& e = entries_[i];
      const std::size_t n = static_cast<std::size_t>(t.size);
      std::memcpy(h + e.token, t.token, n * sizeof(token_t));
      std::memcpy(h + e.depth, t.depth, n * sizeof(int));
      std::memcpy(h + e.mask, t.mask, n * static_cast<std::size_t>(t.words_per_row) * sizeof(std::uint32_t));
      specdec::TreeView& v = views_[i];  // what the forward reads
      v.size = t.size;
      v.words_per_row = t.words_per_row;
      v.base_position = t.base_position;
      v.max_depth = t.max_depth;
      v.token = reinterpret_cast<const token_t*>(device_.data() + e.token);
      v.depth = reinterpret_cast<const int*>(device_.data() + e.depth);
      v.mask = reinterpret_cast<const std::uint32_t*>(device_.data() + e.mask);
    }
    check<Device>(specdec::backend::copy(tag_, device_.data(), h, tree_bytes), "copying the trees to the device");
    return views_;
  }
  /// One tree: upload({&tree, 1})'s view.
  specdec::TreeView upload(const specdec::TreeView& tree) { return upload(std::span(&tree, 1))[0]; }

  /// Enqueues the compaction of `path` (nodes of uploaded tree `entry`) at that tree's base
  /// position in layout sequence `sequence` of `cache`.
  void compact(std::size_t entry, std::span<const specdec::node_t> path, int sequence,
               const specdec::core::KvCacheView& cache) {
    const Entry& e = entries_.at(entry);
    const int length = static_cast<int>(path.size());
    const std::size_t path_bytes = align(static_cast<std::size_t>(e.nodes) * sizeof(specdec::node_t));
    unsigned char* h = staging_.data() + e.path;
    std::memcpy(h, path.data(), path.size() * sizeof(specdec::node_t));
    const int tail[3] = {e.base, length, sequence};
    std::memcpy(h + path_bytes, tail, sizeof tail);
    unsigned char* d = device_.data() + e.path;
    check<Device>(specdec::backend::copy(tag_, d, h, path_bytes + sizeof tail), "copying the accepted path");
    const int* ints = reinterpret_cast<const int*>(d + path_bytes);
    specdec::core::KvCompactionBatch b;
    b.batch = 1;
    b.max_nodes = e.nodes;
    b.layout = cache.layout;
    b.k_cache = cache.k;
    b.v_cache = cache.v;
    b.path = reinterpret_cast<const specdec::node_t*>(d);
    b.base = ints;
    b.length = ints + 1;
    b.sequence = ints + 2;
    b.status = reinterpret_cast<specdec::core::compaction_status*>(d + path_bytes + sizeof tail);
    check<Device>(specdec::backend::compact_kv(tag_, b), "the KV compaction");
  }

 private:
  struct Entry {
    std::size_t token = 0, depth = 0, mask = 0, path = 0;  // offsets in the buffers
    int nodes = 0, base = 0;
  };
  // After a path: base, length, sequence, then the compaction's status.
  static constexpr std::size_t path_tail = 16 + sizeof(specdec::core::compaction_status);
  static std::size_t align(std::size_t bytes) { return (bytes + 15) / 16 * 16; }
  // Growing waits for the device (the old buffers may still be read).
  void reserve(std::size_t bytes) {
    if (bytes <= staging_.size()) return;
    check<Device>(specdec::backend::synchronize(tag_), "waiting for the device");
    staging_.grow(bytes * 2);
    device_.grow(bytes * 2);
  }

  Backend tag_;
  specdec::backend::buffer<Backend> staging_, device_;
  std::vector<Entry> entries_;
  std::vector<specdec::TreeView> views_;
};

/// A chain of n nodes (the calibration's tree, as on the host).
inline specdec::testing::LaidOutTree chain(int n, int vocab) {
  std::vector<specdec::node_t> parent(static_cast<std::size_t>(n));
  std::vector<token_t> token(parent.size());
  for (int i = 0; i < n; ++i) {
    parent[static_cast<std::size_t>(i)] = i - 1;
    token[static_cast<std::size_t>(i)] = (7 * i + 3) % vocab;
  }
  return specdec::testing::LaidOutTree(std::move(parent), std::move(token));
}

/// The cost table of `target`: see DeviceRuns::calibrate.
template <class Device>
CostTable time_table(Target<Device>& target, const DeviceModelChoice& model, const std::vector<int>& nodes,
                     const std::vector<int>& wanted, int repetitions, std::ostream& log) {
  const int largest = nodes.back();
  if (largest > target.max_tree_nodes())
    throw input_error("--max-nodes " + std::to_string(largest) + ": the device target's forward takes trees of at most " +
                      std::to_string(target.max_tree_nodes()) + " nodes");
  const std::vector<int> contexts = fitting_contexts(wanted, target.max_positions(), largest);
  const auto tag = target.backend();
  CostTable t;
  t.nodes = nodes;
  t.metadata = device_table_metadata(
      model, specdec::Llama2cModel::describe(target.config()),
      specdec::Llama2cModel::forward_weight_bytes(target.config(), target.weight_format()),
      specdec::weight_format_name(target.weight_format()), Device::kind, Device::require(),
      Device::timer, repetitions);
  if (model.graphs) t.metadata["graphs"] = true;  // DeviceLlamaOptions::graphs
  if (model.tensor_cores) t.metadata["tensor_cores"] = true;
  DeviceStep<Device> step(tag);
  specdec::backend::marks<typename Device::backend, 2> marks;
  // One copy in and forward of `tree`, timed by the device's marks around them: microseconds.
  const auto timed = [&](const specdec::testing::LaidOutTree& tree, int context) {
    marks.record(tag, 0);
    guard<Device>([&] { target.forward(step.upload(tree.view(context))); });
    marks.record(tag, 1);
    check<Device>(specdec::backend::synchronize(tag), "the timed forward");
    return 1e6 * marks.seconds(tag, 0, 1);
  };
  for (const int context : contexts) {
    log << "specbench calibrate " << Device::option << ": context " << context << " ...\n" << std::flush;
    std::vector<token_t> prompt(static_cast<std::size_t>(context));
    for (int i = 0; i < context; ++i) prompt[static_cast<std::size_t>(i)] = (31 * i + 5) % target.vocab_size();
    guard<Device>([&] { target.prefill(prompt); });
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
  return t;
}

/// Plain greedy decoding on the device target, the exact verifier's reference: one one-node
/// forward per token, its logits copied out, argmax on the host (core::argmax_row, the
/// verifier's own rule), so that the reference does not go through the step it checks.
template <class Device>
class PlainGreedy {
 public:
  explicit PlainGreedy(Target<Device>& target)
      : target_(target), step_(target.backend()), row_(target.backend(), specdec::backend::memory::staging) {
    row_.grow(sizeof(float) * static_cast<std::size_t>(target.vocab_size()));
  }
  /// `n` new tokens after `prompt` (stopping after a token of `stop`, included); adds the
  /// prefill's seconds to `prefill_seconds`.
  std::vector<token_t> generate(std::span<const token_t> prompt, int n, std::span<const token_t> stop,
                                double& prefill_seconds) {
    const auto t0 = Clock::now();
    guard<Device>([&] { target_.prefill(prompt.first(prompt.size() - 1)); });
    check<Device>(specdec::backend::synchronize(target_.backend()), "the prefill");
    prefill_seconds += seconds_since(t0);
    std::vector<token_t> out;
    token_t last = prompt.back();
    const int vocab = target_.vocab_size();
    auto* row = reinterpret_cast<float*>(row_.data());
    for (int k = 0; k < n; ++k) {
      root_.token[0] = last;
      const specdec::LogitsRows logits = guard<Device>(
          [&] { return target_.forward(step_.upload(root_.view(static_cast<int>(prompt.size()) - 1 + k))); });
      check<Device>(specdec::backend::copy(target_.backend(), row, logits.data, sizeof(float) * vocab),
                    "copying the logits");
      check<Device>(specdec::backend::synchronize(target_.backend()), "the plain step");
      last = specdec::core::argmax_row(row, vocab);
      out.push_back(last);
      if (std::find(stop.begin(), stop.end(), last) != stop.end()) break;
    }
    return out;
  }

 private:
  Target<Device>& target_;
  DeviceStep<Device> step_;
  specdec::backend::buffer<typename Device::backend> row_;
  specdec::testing::LaidOutTree root_{{-1}, {0}};
};

/// DeviceRuns::find_combination's runners: see DeviceModelRun.
template <class Device, class Verifier, class... Drafters>
DeviceModelRun decode_on_device(const ModelBench& bench, const ModelOptions& options, const DeviceModelChoice& model,
                                EnergyMeter& meter) {
  using Decoder = specdec::SpeculativeDecoder<Target<Device>, Drafters..., Verifier>;
  using PlainDecoder = specdec::SpeculativeDecoder<Target<Device>, Verifier>;
  constexpr bool greedy = std::is_same_v<Verifier, specdec::ExactVerifier>;
  const auto start = Clock::now();
  const token_t eos = bench.stop_tokens.empty() ? specdec::core::kNoEos : bench.stop_tokens.back();
  const auto verifier = [&](std::size_t prompt) {
    return detail::make_verifier<Verifier>(options, static_cast<std::uint32_t>(prompt), eos);
  };
  DeviceModelRun out;
  out.device = Device::require();
  Target<Device> target = load_target<Device>(model);
  out.target = describe_target<Device>(target);
  const TargetInfo info{bench.model->config().vocab_size, bench.model};
  const specdec::DecoderOptions decoder_options{.budget = options.budget, .cost = options.cost};
  ModelRun& run = out.run;
  run.drafters = Decoder::names();
  run.turns.resize(bench.prompts.size());
  guard<Device>([&] {
    PlainGreedy<Device> greedy_plain(target);
    // The plain pass of one prompt: its tokens; its prefill's seconds added to `prefill`.
    const auto plain = [&](std::size_t p, double& prefill) {
      const ModelPrompt& prompt = bench.prompts[p];
      if constexpr (greedy) {
        return greedy_plain.generate(prompt.tokens, prompt.max_new_tokens, bench.stop_tokens, prefill);
      } else {
        PlainDecoder decoder(target, specdec::DecoderOptions{.budget = 0}, verifier(p));
        const auto t0 = Clock::now();
        decoder.prefill(prompt.tokens);
        check<Device>(specdec::backend::synchronize(target.backend()), "the prefill");
        prefill += seconds_since(t0);
        return decoder.generate(prompt.max_new_tokens, bench.stop_tokens);
      }
    };
    if (!bench.prompts.empty()) {  // warm-up: the kernels' first launches, outside the timed passes
      const std::vector<token_t>& first = bench.prompts.front().tokens;
      double ignored = 0;
      greedy_plain.generate(first, 4, {}, ignored);
      Decoder warm(target, decoder_options, make_drafter<Drafters>(options.resources, info)..., verifier(0));
      warm.prefill(first);
      warm.generate(4);
    }
    std::vector<std::vector<token_t>> plain_outputs(bench.prompts.size());
    // One round (a GPU check's time is short): plain, then speculative, each timed with and
    // without its prefills.
    std::int64_t plain_tokens = 0;
    double plain_seconds = 0, plain_prefill = 0;
    const std::optional<double> plain_before = meter.joules();
    for (std::size_t p = 0; p < bench.prompts.size(); ++p) {
      const auto t0 = Clock::now();
      plain_outputs[p] = plain(p, plain_prefill);
      plain_seconds += seconds_since(t0);
      run.turns[p].plain_tokens = static_cast<std::int64_t>(plain_outputs[p].size());
      plain_tokens += run.turns[p].plain_tokens;
    }
    out.plain_energy.add(plain_before, meter.joules(), plain_tokens);

    // One decoder for every prompt, as on the host: drafters live across prompts.
    Decoder decoder(target, decoder_options, make_drafter<Drafters>(options.resources, info)..., verifier(0));
    std::int64_t speculative_tokens = 0;
    double speculative_seconds = 0, speculative_prefill = 0;
    const std::optional<double> speculative_before = meter.joules();
    for (std::size_t p = 0; p < bench.prompts.size(); ++p) {
      const ModelPrompt& prompt = bench.prompts[p];
      ModelTurn& turn = run.turns[p];
      decoder.verifier() = verifier(p);
      const auto t0 = Clock::now();
      decoder.prefill(prompt.tokens);
      check<Device>(specdec::backend::synchronize(target.backend()), "the prefill");
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
  });
  run.seconds = seconds_since(start);
  return out;
}

/// A batch target of `model` on the device for `slots` requests of up to `budget` + 1 nodes each
/// in one forward (DeviceLlamaOptions::max_rows; the prefill's chunk stays the largest tree), each
/// slot's cache of `max_positions` positions (0: the model's seq_len). Throws batch_does_not_fit
/// when the device cannot hold that many slots (its memory, or the forward's rows).
template <class Device>
specdec::DeviceLlamaBatchTarget<typename Device::backend> load_batch_target(const DeviceModelChoice& model, int slots,
                                                                            int budget, int max_positions = 0) {
  using BatchTarget = specdec::DeviceLlamaBatchTarget<typename Device::backend>;
  specdec::DeviceLlamaOptions options = target_options(model);
  options.max_positions = max_positions;
  const long rows = static_cast<long>(slots) * (static_cast<long>(budget) + 1);
  if (rows > 65535)
    throw batch_does_not_fit(std::string(Device::option) + ": --batch " + std::to_string(slots) + " with a budget of " +
                      std::to_string(budget) + " makes forwards of " + std::to_string(rows) +
                      " nodes, more than the device target's 65535; lower --budget or --budget-cap");
  options.max_rows = static_cast<int>(std::max<long>(rows, options.max_tree_nodes));
  try {
    if (!model.shape.empty())
      return BatchTarget::synthetic(specdec::synthetic_shape(model.shape), 1, slots, {}, options);
    return BatchTarget::load(model.file, slots, {}, options);
  } catch (const specdec::device_memory_error& e) {
    throw batch_does_not_fit(e.what());
  } catch (const specdec::error& e) {
    throw input_error(e.what());
  }
}

/// DeviceRuns::find_batch_combination's runners.
template <class Device, class... Drafters>
BatchRun decode_batch_on_device(const ModelBench& bench, const BatchOptions& options, const DeviceModelChoice& model) {
  Device::require();
  return guard<Device>([&] {
    return decode_batch<Drafters...>(
        bench, options, [&](int slots) { return load_batch_target<Device>(model, slots, options.budget); });
  });
}

/// One combination a device decodes, with each verifier (in VerifierKind's order), and batched.
struct DeviceCombination {
  std::vector<std::string> drafters;
  DeviceModelRunner runners[3];
  DeviceBatchRunner batch;
};
template <class Device, class... Drafters>
DeviceCombination combination() {
  DeviceCombination c;
  c.drafters = {Drafters::name...};
  c.runners[0] = &decode_on_device<Device, specdec::ExactVerifier, Drafters...>;
  c.runners[1] = &decode_on_device<Device, specdec::RejectionSampling, Drafters...>;
  c.runners[2] = &decode_on_device<Device, specdec::ConditionalVerifier, Drafters...>;
  c.batch = &decode_batch_on_device<Device, Drafters...>;
  return c;
}
/// The combinations `model --device D` is compiled with.
template <class Device>
const std::vector<DeviceCombination>& device_combinations() {
  static const std::vector<DeviceCombination> list{
      combination<Device, specdec::PldDrafter>(), combination<Device, specdec::CasdDrafter>(),
      combination<Device, specdec::ContextTreeDrafter>(), combination<Device, specdec::HistoryTreeDrafter>(),
      combination<Device, specdec::EmptyDrafter>()};
  return list;
}

template <class Device>
class Coster final : public DeviceStepCoster {
 public:
  Coster(Target<Device> target, DeviceModelChoice model, EnergyMeter meter)
      : target_(std::move(target)), model_(std::move(model)), meter_(std::move(meter)), step_(target_.backend()) {}

  int positions() const { return target_.max_positions(); }
  int vocab_size() const { return target_.vocab_size(); }
  int max_tree_nodes() const { return target_.max_tree_nodes(); }
  std::string describe() const {
    return model_.name() + " (" + specdec::Llama2cModel::describe(target_.config()) + ", " +
           specdec::weight_format_name(target_.weight_format()) + " weights" + model_.options_text() +
           ") on " + Device::require();
  }

  void prefill(std::span<const token_t> tokens) override {
    guard<Device>([&] { target_.prefill(tokens); });
    sequence_.assign(tokens.begin(), tokens.end());
    seconds_ = 0;
    first_context_ = -1;
    turn_start_ = meter_.joules();
  }
  void forward(const specdec::TreeView& tree) override {
    if (first_context_ < 0) first_context_ = tree.base_position;
    tree_tokens_.assign(tree.token, tree.token + tree.size);
    step_start_ = Clock::now();
    guard<Device>([&] { target_.forward(step_.upload(tree)); });
  }
  void commit(std::span<const specdec::node_t> path) override {
    step_.compact(0, path, 0, target_.kv_cache());
    check<Device>(specdec::backend::synchronize(target_.backend()), "the step");
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
      guard<Device>([&] { target_.forward(step_.upload(root_.view(static_cast<int>(i)))); });
      check<Device>(specdec::backend::synchronize(target_.backend()), "the plain step");
      sampled += seconds_since(t0);
    }
    plain_energy_.add(before, meter_.joules(), samples);
    const double plain = samples > 0 ? sampled / static_cast<double>(samples) * static_cast<double>(count) : 0.0;
    // A line per turn, so that a run stopped by a time limit still says what it measured.
    std::cerr << "specbench: " << Device::kind << " turn " << ++turns_ << ": " << tokens << " tokens, steps "
              << seconds_ * 1e3 << " ms, plain " << plain * 1e3 << " ms (" << samples << " of " << count
              << " steps timed)\n";
    return {seconds_, plain};
  }

  CostTable quick_calibration(int largest, std::string& description) override {
    const auto t0 = Clock::now();
    std::ostringstream log;  // one line says what was done
    CostTable table = time_table<Device>(target_, model_, doubling_sizes(largest), CalibrateOptions{}.contexts, 2, log);
    std::string contexts;
    for (const auto& c : table.contexts) contexts += (contexts.empty() ? "" : ", ") + std::to_string(c.context);
    description = "calibrated on " + Device::require() + " at start-up in " + std::to_string(seconds_since(t0)) +
                  " s (trees of 1 to " + std::to_string(largest) + " nodes at contexts " + contexts + "; median of 2)";
    return table;
  }
  const EnergyMeter& energy_meter() const override { return meter_; }
  const EnergyTotal& speculative_energy() const override { return speculative_energy_; }
  const EnergyTotal& plain_energy() const override { return plain_energy_; }

 private:
  Target<Device> target_;
  DeviceModelChoice model_;
  EnergyMeter meter_;
  DeviceStep<Device> step_;
  std::vector<token_t> sequence_, tree_tokens_;
  specdec::testing::LaidOutTree root_{{-1}, {0}};
  Clock::time_point step_start_{};
  double seconds_ = 0;
  int first_context_ = -1, turns_ = 0;
  std::optional<double> turn_start_;
  EnergyTotal speculative_energy_, plain_energy_;
};

/// TimedBatch on the device: every call of the batched replay also runs on a DeviceLlamaBatchTarget
/// (the trees copied in, the forward, the KV compaction of each request's accepted path), with one
/// wait per step after its forward, so that a pass's wall time holds the device's work.
template <class Device>
class DeviceTimedBatch final : public TimedBatch {
 public:
  explicit DeviceTimedBatch(specdec::DeviceLlamaBatchTarget<typename Device::backend> target)
      : target_(std::move(target)), step_(target_.backend()), entry_(static_cast<std::size_t>(target_.slots()), 0) {}

  void prefill(int slot, std::span<const token_t> tokens) override {
    guard<Device>([&] { target_.prefill(slot, tokens); });
  }
  void forward(const specdec::TreeBatchView& batch) override {
    // The last step's compactions are done, and with them its use of the staging buffer.
    check<Device>(specdec::backend::synchronize(target_.backend()), "the last step");
    const std::vector<specdec::TreeView>& trees = step_.upload(batch.trees);
    guard<Device>([&] { target_.forward(specdec::TreeBatchView{batch.slots, trees}); });
    for (std::size_t b = 0; b < batch.slots.size(); ++b) entry_.at(static_cast<std::size_t>(batch.slots[b])) = b;
    check<Device>(specdec::backend::synchronize(target_.backend()), "the batched forward");
  }
  void commit(int slot, std::span<const specdec::node_t> path) override {
    step_.compact(entry_.at(static_cast<std::size_t>(slot)), path, slot, target_.kv_cache());
  }
  void release(int slot) override {
    guard<Device>([&] { target_.release(slot); });
  }

 private:
  specdec::DeviceLlamaBatchTarget<typename Device::backend> target_;
  DeviceStep<Device> step_;
  std::vector<std::size_t> entry_;  // per slot: its tree's entry in the last forward
};

/// DeviceRuns on `Device`.
template <class Device>
class BackendRuns final : public DeviceRuns {
 public:
  const char* option() const override { return Device::option; }
  const char* timer() const override { return Device::timer; }
  std::string require() const override { return Device::require(); }

  CostTable calibrate(const DeviceModelChoice& model, const CalibrateOptions& options, std::ostream& log) const override {
    Device::require();
    Target<Device> target = load_target<Device>(model);
    return time_table<Device>(target, model, options.nodes, options.contexts, options.repetitions, log);
  }

  DeviceModelRunner find_combination(const std::vector<std::string>& drafters, VerifierKind verifier) const override {
    return lookup(drafters).runners[static_cast<int>(verifier)];
  }
  DeviceBatchRunner find_batch_combination(const std::vector<std::string>& drafters) const override {
    return lookup(drafters).batch;
  }
  const char* batch_target() const override { return specdec::DeviceLlamaBatchTarget<typename Device::backend>::name(); }
  int max_tree_nodes() const override { return specdec::kernels::llama::max_tree_nodes; }

  std::vector<std::string> combination_names() const override {
    std::vector<std::string> out;
    for (const DeviceCombination& c : device_combinations<Device>()) {
      std::string joined;
      for (const std::string& name : c.drafters) joined += (joined.empty() ? "" : ",") + name;
      out.push_back(joined);
    }
    return out;
  }

  EnergyMeter energy_meter() const override { return Device::energy_meter(); }

  std::unique_ptr<DeviceStepCoster> make_coster(const DeviceModelChoice& model, Corpus& corpus, int budget,
                                                std::string& source) const override {
    Device::require();
    auto coster = std::make_unique<Coster<Device>>(load_target<Device>(model), model, Device::energy_meter());
    check_budget_fits<Device>(budget, coster->max_tree_nodes());
    fit_to_timed_model(corpus, model.name(), coster->vocab_size(), coster->positions(), budget);
    source = std::string("measured on the ") + Device::kind + " device: every step also run through " +
             coster->describe() +
             " (tree copied in, forward, KV compaction, one synchronisation; no verification kernel); plain decoding "
             "timed on up to " +
             std::to_string(DeviceStepCoster::plain_samples) + " steps per turn" +
             (model.shape.empty() ? "" : "; SYNTHETIC weights, timing only");
    return coster;
  }

  TimedBatchMaker timed_batch(const DeviceModelChoice& model, Corpus& corpus, int budget, std::string& source,
                              specdec::LlamaConfig& config) const override {
    const std::string device = Device::require();
    try {
      config = model.shape.empty() ? specdec::Llama2cModel::read_config(model.file)
                                   : specdec::synthetic_shape(model.shape).config;
    } catch (const specdec::error& e) {
      throw input_error(e.what());
    }
    check_budget_fits<Device>(budget, specdec::kernels::llama::max_tree_nodes);
    fit_to_timed_model(corpus, model.name(), config.vocab_size,
                       std::min(config.seq_len, specdec::kernels::llama::max_attended), budget);
    // Each slot's cache holds the longest turn, not the model's whole context: 64 slots of
    // Llama-2-7B at its 4096 positions would take 137 GB of bf16 cache.
    const int positions = static_cast<int>(positions_needed(corpus, budget));
    source = "measured on " + device + ": every step also run through " +
             specdec::DeviceLlamaBatchTarget<typename Device::backend>::name() + " of " + model.name() + " (" +
             specdec::Llama2cModel::describe(config) + model.options_text() + "; each slot's cache " +
             std::to_string(positions) +
             " positions, the longest turn's; the trees copied in, the batched forward, each request's KV "
             "compaction, one synchronisation)" +
             (model.shape.empty() ? "" : "; SYNTHETIC weights, timing only");
    return [model, budget, positions](int slots) -> std::unique_ptr<TimedBatch> {
      return std::make_unique<DeviceTimedBatch<Device>>(load_batch_target<Device>(model, slots, budget, positions));
    };
  }

 private:
  /// The combination of these drafters (any order), or input_error naming those compiled.
  const DeviceCombination& lookup(const std::vector<std::string>& drafters) const {
    std::vector<std::string> wanted = drafters;
    std::sort(wanted.begin(), wanted.end());
    for (const DeviceCombination& c : device_combinations<Device>()) {
      std::vector<std::string> sorted = c.drafters;
      std::sort(sorted.begin(), sorted.end());
      if (sorted == wanted) return c;
    }
    const std::string known = specdec::tools::joined_names(combination_names());
    std::string given;
    for (const std::string& name : wanted) given += (given.empty() ? "" : ",") + name;
    throw input_error(std::string(Device::option) + ": the combination '" + given + "' is not compiled for the " +
                      Device::kind + " device; it decodes " + known);
  }
};

}  // namespace specbench::device_runs_detail
