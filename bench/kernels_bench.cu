// Per-kernel latency of the CUDA backend (CUDA events, mean over repeated launches after a warm-up)
// on realistic shapes, with the bandwidth each kernel must move and that bandwidth as a fraction of
// the device's peak (2 x memory clock x bus width, read off the device).
//
//   kernels_bench [--repeat N]
//
// Exits 0 with a message when there is no CUDA device (nothing is measured then).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include <specdec/backend.hpp>
#include <specdec/kernels/stochastic_verify.cuh>  // stochastic_launch: which form a batch gets

using namespace specdec;

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "kernels_bench: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

void check(backend::status s, const char* what) {
  if (s != backend::status::ok) {
    std::fprintf(stderr, "kernels_bench: %s: %s\n", what, backend::describe(backend::cuda{}, s).c_str());
    std::exit(1);
  }
}

template <class T>
T* device_alloc(std::size_t count) {
  void* p = nullptr;
  check(cudaMalloc(&p, sizeof(T) * (count ? count : 1)), "cudaMalloc");
  return static_cast<T*>(p);
}

template <class T>
T* upload(const std::vector<T>& host) {
  T* d = device_alloc<T>(host.size());
  if (!host.empty()) check(cudaMemcpy(d, host.data(), sizeof(T) * host.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
  return d;
}

// A deterministic stream of pseudo-random numbers for inputs (no dependence on <random>'s
// distributions, so inputs are the same everywhere).
struct Lcg {
  unsigned long long state;
  unsigned int next() {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<unsigned int>(state >> 33);
  }
};

__global__ void fill_logits(float* logits, long long count, unsigned int seed) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    unsigned int h = static_cast<unsigned int>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    logits[i] = static_cast<float>(h & 0xffffff) * (1.0f / 16777216.0f);
  }
}

__global__ void fill_context(token_t* context, long long count, int alphabet, unsigned int seed) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    unsigned int h = static_cast<unsigned int>(i) * 2246822519u ^ seed;
    h ^= h >> 16;
    h *= 2654435761u;
    h ^= h >> 13;
    context[i] = static_cast<token_t>(h % static_cast<unsigned int>(alphabet));
  }
}

struct Device {
  std::string name;
  double peak_bytes_per_second = 0;
  int sms = 0;
};

Device describe_device() {
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  int clock_khz = 0, bus_bits = 0;
  check(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, device), "memory clock");
  check(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device), "bus width");
  Device d;
  d.name = prop.name;
  d.sms = prop.multiProcessorCount;
  d.peak_bytes_per_second = 2.0 * clock_khz * 1e3 * (bus_bits / 8.0);  // double data rate
  return d;
}

int repeat = 200;

/// Mean microseconds per call of `launch` (which must only enqueue work on `stream`), launched back
/// to back: the device's time per call once launches overlap the previous call's work.
template <class Launch>
double time_us(Launch&& launch, cudaStream_t stream = nullptr) {
  for (int i = 0; i < 10; ++i) launch();
  check(cudaStreamSynchronize(stream), "warm-up");
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  check(cudaEventRecord(start, stream), "cudaEventRecord");
  for (int i = 0; i < repeat; ++i) launch();
  check(cudaEventRecord(stop, stream), "cudaEventRecord");
  check(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  check(cudaEventDestroy(start), "cudaEventDestroy");
  check(cudaEventDestroy(stop), "cudaEventDestroy");
  return 1e3 * ms / repeat;
}

/// Mean wall-clock microseconds per call of `launch` followed by a synchronisation of `stream`:
/// what a decoding step waits for (launch latency included), since a step reads its result.
template <class Launch>
double latency_us(Launch&& launch, cudaStream_t stream) {
  for (int i = 0; i < 10; ++i) launch();
  check(cudaStreamSynchronize(stream), "warm-up");
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < repeat; ++i) {
    launch();
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  }
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / repeat;
}

/// Mean microseconds per call of the host backend (this machine's CPU, one thread): repeated
/// until 0.2 s have passed (at least once, at most 100 times).
template <class Run>
double host_time_us(Run&& run) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  int calls = 0;
  do {
    run();
    ++calls;
  } while (calls < 100 && clock::now() - start < std::chrono::milliseconds(200));
  return std::chrono::duration<double, std::micro>(clock::now() - start).count() / calls;
}

/// One line per shape; host_us > 0 adds the host backend's time on the same input and the ratio.
void report(const Device& dev, const char* kernel, const std::string& shape, double us, double bytes,
            double host_us = 0) {
  const double gbs = bytes / (us * 1e-6) / 1e9;
  std::printf("%-14s %-44s %10.2f us %12.1f KB %9.1f GB/s %6.1f%% of peak", kernel, shape.c_str(), us, bytes / 1e3,
              gbs, 100.0 * gbs * 1e9 / dev.peak_bytes_per_second);
  if (host_us > 0) std::printf("   host %10.1f us (%.1fx)", host_us, host_us / us);
  std::printf("\n");
}

template <class T>
std::vector<T> download(const T* device, std::size_t count) {
  std::vector<T> host(count);
  if (count) check(cudaMemcpy(host.data(), device, sizeof(T) * count, cudaMemcpyDeviceToHost), "cudaMemcpy");
  return host;
}

// Random trees of exactly `nodes` nodes, back to back, laid out on the device.
struct DeviceTrees {
  int batch = 0, nodes = 0, words = 0;
  std::vector<int> host_offsets;
  std::vector<node_t> host_parent;
  std::vector<token_t> host_token;
  int* offsets = nullptr;
  node_t* parent = nullptr;
  token_t* token = nullptr;
  int* depth = nullptr;
  std::uint32_t* mask = nullptr;
  node_t *first_child = nullptr, *next_sibling = nullptr;
  int* max_depth = nullptr;
  core::tree_status* status = nullptr;

  DeviceTrees(int b, int n, int vocab, Lcg& rng) : batch(b), nodes(n), words(core::mask_words(n)) {
    std::vector<int> off(b + 1);
    std::vector<node_t> par;
    std::vector<token_t> tok;
    for (int t = 0; t < b; ++t) {
      off[t] = t * n;
      for (int i = 0; i < n; ++i) {
        // Mostly chains with some branching (what merged drafts look like).
        par.push_back(i == 0 ? -1 : (rng.next() % 4 == 0 ? static_cast<node_t>(rng.next() % i) : i - 1));
        tok.push_back(static_cast<token_t>(rng.next() % vocab));
      }
    }
    off[b] = b * n;
    offsets = upload(off);
    parent = upload(par);
    token = upload(tok);
    host_offsets = off;
    host_parent = par;
    host_token = tok;
    depth = device_alloc<int>(par.size());
    mask = device_alloc<std::uint32_t>(par.size() * words);
    first_child = device_alloc<node_t>(par.size());
    next_sibling = device_alloc<node_t>(par.size());
    max_depth = device_alloc<int>(b);
    status = device_alloc<core::tree_status>(b);
  }

  DeviceTrees(const DeviceTrees&) = delete;
  DeviceTrees& operator=(const DeviceTrees&) = delete;
  ~DeviceTrees() {
    for (const void* p : {static_cast<const void*>(offsets), static_cast<const void*>(parent),
                          static_cast<const void*>(token), static_cast<const void*>(depth),
                          static_cast<const void*>(mask), static_cast<const void*>(first_child),
                          static_cast<const void*>(next_sibling), static_cast<const void*>(max_depth),
                          static_cast<const void*>(status)})
      cudaFree(const_cast<void*>(p));
  }

  core::TreeBatch batch_desc(int vocab) const {
    core::TreeBatch t;
    t.batch = batch;
    t.words = words;
    t.max_nodes = nodes;
    t.vocab_size = vocab;
    t.offsets = offsets;
    t.parent = parent;
    t.token = token;
    t.depth = depth;
    t.mask = mask;
    t.first_child = first_child;
    t.next_sibling = next_sibling;
    t.max_depth = max_depth;
    t.status = status;
    return t;
  }

  /// The same trees laid out by the host backend (arrays owned by the returned object).
  struct Host {
    std::vector<int> depth, max_depth;
    std::vector<std::uint32_t> mask;
    std::vector<node_t> first_child, next_sibling;
    std::vector<core::tree_status> status;
    core::TreeBatch desc;
  };
  void host_layout(Host& h, int vocab) const {
    const std::size_t n = host_parent.size();
    h.depth.resize(n);
    h.mask.resize(n * words);
    h.first_child.resize(n);
    h.next_sibling.resize(n);
    h.max_depth.resize(batch);
    h.status.resize(batch);
    h.desc = batch_desc(vocab);
    h.desc.offsets = host_offsets.data();
    h.desc.parent = host_parent.data();
    h.desc.token = host_token.data();
    h.desc.depth = h.depth.data();
    h.desc.mask = h.mask.data();
    h.desc.first_child = h.first_child.data();
    h.desc.next_sibling = h.next_sibling.data();
    h.desc.max_depth = h.max_depth.data();
    h.desc.status = h.status.data();
  }

  double bytes() const {  // read parents, tokens; write depth, mask, child lists, per-tree results
    const double n = static_cast<double>(batch) * nodes;
    return n * (4 + 4 + 4 + 4.0 * words + 4 + 4) + batch * (4.0 + 4 + 4 + 4);
  }
};

void bench_tree_build(const Device& dev) {
  Lcg rng{1};
  for (int batch : {1, 8, 64})
    for (int nodes : {8, 32, 64}) {
      DeviceTrees trees(batch, nodes, 32000, rng);
      const core::TreeBatch desc = trees.batch_desc(32000);
      const double us = time_us([&] { check(backend::build_trees(backend::cuda{}, desc), "build_trees"); });
      DeviceTrees::Host host;
      trees.host_layout(host, 32000);
      const double host_us = host_time_us([&] { check(backend::build_trees(backend::host{}, host.desc), "host build"); });
      report(dev, "tree_build", "batch " + std::to_string(batch) + " x " + std::to_string(nodes) + " nodes", us,
             trees.bytes(), host_us);
    }
}

void bench_greedy_verify(const Device& dev) {
  Lcg rng{2};
  for (int vocab : {32000, 128256})
    for (int batch : {1, 8, 64})
      for (int nodes : {8, 32, 64}) {
        DeviceTrees trees(batch, nodes, vocab, rng);
        check(backend::build_trees(backend::cuda{}, trees.batch_desc(vocab)), "build_trees");
        const long long rows = static_cast<long long>(batch) * nodes;
        float* logits = device_alloc<float>(rows * vocab);
        fill_logits<<<1024, 256>>>(logits, rows * vocab, 7u);
        core::GreedyVerifyBatch g;
        g.batch = batch;
        g.max_nodes = nodes;
        g.vocab_size = vocab;
        g.row_stride = vocab;
        g.offsets = trees.offsets;
        g.token = trees.token;
        g.first_child = trees.first_child;
        g.next_sibling = trees.next_sibling;
        g.build_status = trees.status;
        g.logits = logits;
        g.argmax = device_alloc<token_t>(rows);
        g.path = device_alloc<node_t>(rows);
        g.length = device_alloc<int>(batch);
        g.next_token = device_alloc<token_t>(batch);
        g.status = device_alloc<core::verify_status>(batch);
        backend::cuda tag;
        tag.workspace_bytes = backend::workspace_bytes(tag, g);
        tag.workspace = device_alloc<unsigned char>(tag.workspace_bytes);
        const double us = time_us([&] { check(backend::greedy_verify(tag, g), "greedy_verify"); });
        double host_us = 0;
        if (batch == 1) {  // the host backend on the same trees and logits
          DeviceTrees::Host layout;
          trees.host_layout(layout, vocab);
          check(backend::build_trees(backend::host{}, layout.desc), "host build");
          const std::vector<float> host_logits = download(logits, static_cast<std::size_t>(rows) * vocab);
          std::vector<token_t> argmax(rows), next(batch);
          std::vector<node_t> path(rows);
          std::vector<int> length(batch);
          std::vector<core::verify_status> status(batch);
          core::GreedyVerifyBatch h = g;
          h.offsets = trees.host_offsets.data();
          h.token = trees.host_token.data();
          h.first_child = layout.first_child.data();
          h.next_sibling = layout.next_sibling.data();
          h.build_status = layout.status.data();
          h.logits = host_logits.data();
          h.argmax = argmax.data();
          h.path = path.data();
          h.length = length.data();
          h.next_token = next.data();
          h.status = status.data();
          host_us = host_time_us([&] { check(backend::greedy_verify(backend::host{}, h), "host greedy_verify"); });
        }
        report(dev, "greedy_verify",
               "batch " + std::to_string(batch) + " x " + std::to_string(nodes) + " nodes, vocab " + std::to_string(vocab),
               us, static_cast<double>(rows) * vocab * sizeof(float), host_us);
        for (void* p : {static_cast<void*>(logits), static_cast<void*>(g.argmax), static_cast<void*>(g.path),
                        static_cast<void*>(g.length), static_cast<void*>(g.next_token), static_cast<void*>(g.status),
                        tag.workspace})
          check(cudaFree(p), "cudaFree");
      }
}

void bench_suffix_match(const Device& dev) {
  for (int n : {4096, 128 * 1024, 1024 * 1024})
    for (int batch : {1, 8, 64}) {
      const long long tokens = static_cast<long long>(n) * batch;
      token_t* context = device_alloc<token_t>(tokens);
      fill_context<<<1024, 256>>>(context, tokens, 1000, 11u);  // a token repeats every ~1000 positions
      std::vector<int> off(batch + 1);
      for (int b = 0; b <= batch; ++b) off[b] = b * n;
      core::SuffixMatchBatch s;
      s.batch = batch;
      s.max_context = n;
      s.max_match = 10;
      s.k = 2;
      s.depth = 10;
      s.offsets = upload(off);
      s.context = context;
      s.matches = device_alloc<core::SuffixMatch>(batch * s.k);
      s.match_count = device_alloc<int>(batch);
      s.drafts = device_alloc<token_t>(batch * s.k * s.depth);
      s.draft_length = device_alloc<int>(batch * s.k);
      backend::cuda tag;
      tag.workspace_bytes = backend::workspace_bytes(tag, s);
      tag.workspace = device_alloc<unsigned char>(tag.workspace_bytes);
      const double us = time_us([&] { check(backend::suffix_match(tag, s), "suffix_match"); });
      double host_us = 0;
      if (batch == 1) {  // the host backend (the brute-force CASD reference) on the same context
        const std::vector<token_t> host_context = download(context, static_cast<std::size_t>(tokens));
        std::vector<core::SuffixMatch> matches(s.k);
        std::vector<int> count(1), draft_length(s.k);
        std::vector<token_t> drafts(static_cast<std::size_t>(s.k) * s.depth);
        core::SuffixMatchBatch h = s;
        h.offsets = off.data();
        h.context = host_context.data();
        h.matches = matches.data();
        h.match_count = count.data();
        h.drafts = drafts.data();
        h.draft_length = draft_length.data();
        host_us = host_time_us([&] { check(backend::suffix_match(backend::host{}, h), "host suffix_match"); });
      }
      report(dev, "suffix_match",
             "batch " + std::to_string(batch) + " x " + std::to_string(n) + " tokens, L 10, k 2", us,
             static_cast<double>(tokens) * sizeof(token_t), host_us);
      for (void* p : {static_cast<void*>(context), const_cast<void*>(static_cast<const void*>(s.offsets)),
                      static_cast<void*>(s.matches), static_cast<void*>(s.match_count), static_cast<void*>(s.drafts),
                      static_cast<void*>(s.draft_length), tag.workspace})
        check(cudaFree(p), "cudaFree");
    }
}

__global__ void spike_children(float* logits, const node_t* parent, const token_t* token, int trees, int nodes,
                               int vocab) {
  const int count = trees * nodes;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) {
    const int tree = i / nodes, node = i % nodes;
    if (node == 0) continue;
    const long long row = static_cast<long long>(tree) * nodes + parent[i];
    logits[row * vocab + token[i]] = 12.0f;  // against values in [0, 1): each draft token is likely
  }
}

// Rejection sampling and conditional verification (both launch shapes, per tree and row-parallel) on the
// random trees of DeviceTrees (one-hot drafts), with logits in [0, 1) except each draft token's
// entry in its parent's row (12), so that walks go deep. bytes = what the kernel reads: per tree,
// 2 passes over each visited row (argmax, mass) and 1 more for the final draw (the race), from
// the measured path lengths.
void bench_stochastic_verify(const Device& dev) {
  Lcg rng{4};
  for (int vocab : {32000, 128256})
    for (int batch : {1, 8, 64})
      for (int nodes : {8, 32, 64}) {
        DeviceTrees trees(batch, nodes, vocab, rng);
        check(backend::build_trees(backend::cuda{}, trees.batch_desc(vocab)), "build_trees");
        const long long rows = static_cast<long long>(batch) * nodes;
        float* logits = device_alloc<float>(rows * vocab);
        fill_logits<<<1024, 256>>>(logits, rows * vocab, 9u);
        spike_children<<<64, 256>>>(logits, trees.parent, trees.token, batch, nodes, vocab);
        std::vector<TreeView> views(batch);
        std::vector<int> row_offset(batch);
        std::vector<core::RandomKey> keys(batch);
        for (int t = 0; t < batch; ++t) {
          const long long off = static_cast<long long>(t) * nodes;
          TreeView& v = views[t];
          v.size = nodes;
          v.words_per_row = trees.words;
          v.base_position = 1000;
          v.max_depth = nodes - 1;  // a bound (the walks read depth[])
          v.parent = trees.parent + off;
          v.token = trees.token + off;
          v.depth = trees.depth + off;
          v.mask = trees.mask + off * trees.words;
          v.first_child = trees.first_child + off;
          v.next_sibling = trees.next_sibling + off;
          row_offset[t] = static_cast<int>(off);
          keys[t] = core::RandomKey{42, static_cast<std::uint32_t>(t)};
        }
        core::StochasticVerifyBatch b;
        b.batch = batch;
        b.max_nodes = nodes;
        b.vocab_size = vocab;
        b.row_stride = vocab;
        b.trees = upload(views);
        b.row_offset = upload(row_offset);
        b.logits = logits;
        b.keys = upload(keys);
        b.work = device_alloc<float>(static_cast<std::size_t>(batch) * vocab);
        b.accepted = device_alloc<std::uint8_t>(rows);
        b.path = device_alloc<node_t>(rows);
        b.length = device_alloc<int>(batch);
        b.next_token = device_alloc<token_t>(batch);
        b.status = device_alloc<core::stochastic_status>(batch);
        b.row_status = device_alloc<core::sampling_status>(batch);
        b.bad_node = device_alloc<node_t>(batch);
        const core::SamplingParams sampling{0.8f};
        const core::ConditionalParams conditional{0.1f, 0, core::kNoEos};
        const std::string shape = "batch " + std::to_string(batch) + " x " + std::to_string(nodes) + " nodes, vocab " +
                                  std::to_string(vocab);
        const std::size_t workspace_bytes =
            kernels::stochastic_verify_workspace_bytes(b, kernels::StochasticLaunch::row_parallel);
        void* workspace = device_alloc<unsigned char>(workspace_bytes);
        const bool automatic_row_parallel =
            kernels::stochastic_launch(b, kernels::StochasticLaunch::automatic) == kernels::StochasticLaunch::row_parallel;
        for (int which = 0; which < 2; ++which) {
          for (const kernels::StochasticLaunch launch :
               {kernels::StochasticLaunch::per_tree, kernels::StochasticLaunch::row_parallel}) {
            const auto run = [&] {
              if (which == 0)
                check(kernels::rejection_verify(b, sampling, workspace, workspace_bytes, nullptr, launch),
                      "rejection_verify");
              else
                check(kernels::conditional_verify(b, conditional, sampling, workspace, workspace_bytes, nullptr, launch),
                      "conditional_verify");
            };
            const double us = time_us(run);
            const std::vector<int> length = download(b.length, static_cast<std::size_t>(batch));
            // Bytes of logits read. Per tree: argmax and mass passes per visited row (conditional: per
            // accepted parent), then the draw's. Row-parallel: every row twice (argmax keys, lane masses).
            double passes = 0;
            if (launch == kernels::StochasticLaunch::per_tree)
              for (int l : length) passes += 2.0 * l + 1;
            else
              passes = 2.0 * static_cast<double>(rows);
            const bool chosen = automatic_row_parallel == (launch == kernels::StochasticLaunch::row_parallel);
            report(dev, which == 0 ? "rejection" : "conditional",
                   shape + ", T 0.8, " + (launch == kernels::StochasticLaunch::per_tree ? "per tree" : "row-parallel") +
                       (chosen ? " (auto)" : ""),
                   us, passes * vocab * sizeof(float));
          }
        }
        check(cudaFree(workspace), "cudaFree");
        for (const void* p : {static_cast<const void*>(logits), static_cast<const void*>(b.trees),
                              static_cast<const void*>(b.row_offset), static_cast<const void*>(b.keys),
                              static_cast<const void*>(b.work), static_cast<const void*>(b.accepted),
                              static_cast<const void*>(b.path), static_cast<const void*>(b.length),
                              static_cast<const void*>(b.next_token), static_cast<const void*>(b.status),
                              static_cast<const void*>(b.row_status), static_cast<const void*>(b.bad_node)})
          check(cudaFree(const_cast<void*>(p)), "cudaFree");
      }
}

// Llama-3-8B's cache: 32 layers, 8 KV heads of 128 bf16 values. Path: the root, then every other
// node (so every entry after the root moves).
void bench_kv_compaction(const Device& dev) {
  const int layers = 32, heads = 8, head_dim = 128, element = 2, positions = 4096;
  for (int batch : {1, 8, 64})
    for (int nodes : {8, 32, 64}) {
      core::KvCompactionBatch c;
      c.batch = batch;
      c.max_nodes = nodes;
      c.layout = core::kv_layout(layers, positions, heads, head_dim, element);
      const std::size_t cache_bytes = static_cast<std::size_t>(batch) * c.layout.sequence_stride;
      c.k_cache = device_alloc<unsigned char>(cache_bytes);
      c.v_cache = device_alloc<unsigned char>(cache_bytes);
      std::vector<node_t> path(static_cast<std::size_t>(batch) * nodes, 0);
      std::vector<int> length(batch), base(batch, 1000);
      for (int b = 0; b < batch; ++b) {
        int k = 1;
        for (int i = 2; i < nodes; i += 2) path[static_cast<std::size_t>(b) * nodes + k++] = i;
        length[b] = k;
      }
      c.base = upload(base);
      c.path = upload(path);
      c.length = upload(length);
      c.status = device_alloc<core::compaction_status>(batch);
      // Moving the path again and again is idempotent in cost (same rows every time).
      const double us = time_us([&] { check(backend::compact_kv(backend::cuda{}, c), "compact_kv"); });
      const double moved = static_cast<double>(batch) * (length[0] - 1) * layers * heads * head_dim * element;
      report(dev, "kv_compaction",
             "batch " + std::to_string(batch) + " x " + std::to_string(length[0] - 1) + " moved, 32L 8H 128D bf16",
             us, 2.0 * 2.0 * moved);  // K and V, read and write
      for (void* p : {static_cast<void*>(c.k_cache), static_cast<void*>(c.v_cache),
                      const_cast<void*>(static_cast<const void*>(c.base)), const_cast<void*>(static_cast<const void*>(c.path)),
                      const_cast<void*>(static_cast<const void*>(c.length)), static_cast<void*>(c.status)})
        check(cudaFree(p), "cudaFree");
    }
}

// The GPU part of one step as the decoder would enqueue it: tree build, greedy verification on
// the build's outputs, KV compaction on the verifier's path, no synchronisation in between.
void bench_step(const Device& dev) {
  Lcg rng{3};
  const int vocab = 128256, nodes = 64;
  for (int batch : {1, 8, 64}) {
    DeviceTrees trees(batch, nodes, vocab, rng);
    const core::TreeBatch t = trees.batch_desc(vocab);
    const long long rows = static_cast<long long>(batch) * nodes;
    float* logits = device_alloc<float>(rows * vocab);
    fill_logits<<<1024, 256>>>(logits, rows * vocab, 5u);
    core::GreedyVerifyBatch g;
    g.batch = batch;
    g.max_nodes = nodes;
    g.vocab_size = vocab;
    g.row_stride = vocab;
    g.offsets = trees.offsets;
    g.token = trees.token;
    g.first_child = trees.first_child;
    g.next_sibling = trees.next_sibling;
    g.build_status = trees.status;
    g.logits = logits;
    g.argmax = device_alloc<token_t>(rows);
    g.path = device_alloc<node_t>(rows);
    g.length = device_alloc<int>(batch);
    g.next_token = device_alloc<token_t>(batch);
    g.status = device_alloc<core::verify_status>(batch);
    backend::cuda tag;
    tag.workspace_bytes = backend::workspace_bytes(tag, g);
    tag.workspace = device_alloc<unsigned char>(tag.workspace_bytes);
    core::KvCompactionBatch c;
    c.batch = batch;
    c.max_nodes = nodes;
    c.layout = core::kv_layout(32, 4096, 8, 128, 2);
    const std::size_t cache_bytes = static_cast<std::size_t>(batch) * c.layout.sequence_stride;
    c.k_cache = device_alloc<unsigned char>(cache_bytes);
    c.v_cache = device_alloc<unsigned char>(cache_bytes);
    c.base = upload(std::vector<int>(batch, 1000));
    c.path = g.path;
    c.length = g.length;
    c.status = device_alloc<core::compaction_status>(batch);
    // The step's three launches on one stream, as the decoder's device step issues them, then the
    // same launches captured once into a CUDA graph and replayed (one launch for the three).
    cudaStream_t stream = nullptr;
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    backend::cuda on_stream{};
    on_stream.stream = stream;
    tag.stream = stream;
    const auto step = [&] {
      check(backend::build_trees(on_stream, t), "build_trees");
      check(backend::greedy_verify(tag, g), "greedy_verify");
      check(backend::compact_kv(on_stream, c), "compact_kv");
    };
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    step();
    check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
    check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
    const auto replay = [&] { check(cudaGraphLaunch(exec, stream), "cudaGraphLaunch"); };
    const std::string shape = "batch " + std::to_string(batch) + " x 64 nodes, vocab 128256, 32L 8H 128D";
    const double bytes = static_cast<double>(rows) * vocab * sizeof(float);
    report(dev, "step", shape, time_us(step, stream), bytes);
    report(dev, "step (graph)", shape, time_us(replay, stream), bytes);
    report(dev, "step +sync", shape, latency_us(step, stream), bytes);
    report(dev, "graph +sync", shape, latency_us(replay, stream), bytes);
    check(cudaGraphExecDestroy(exec), "cudaGraphExecDestroy");
    check(cudaGraphDestroy(graph), "cudaGraphDestroy");
    check(cudaStreamDestroy(stream), "cudaStreamDestroy");
    for (void* p : {static_cast<void*>(logits), static_cast<void*>(g.argmax), static_cast<void*>(g.path),
                    static_cast<void*>(g.length), static_cast<void*>(g.next_token), static_cast<void*>(g.status),
                    tag.workspace, static_cast<void*>(c.k_cache), static_cast<void*>(c.v_cache),
                    const_cast<void*>(static_cast<const void*>(c.base)), static_cast<void*>(c.status)})
      check(cudaFree(p), "cudaFree");
  }
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) {
      repeat = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: kernels_bench [--repeat N]\n");
      return 2;
    }
  }
  if (repeat < 1) {
    std::fprintf(stderr, "kernels_bench: --repeat must be >= 1\n");
    return 2;
  }
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0) {
    std::printf("kernels_bench: no CUDA device (%s); nothing measured.\n",
                e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return 0;
  }
  const Device dev = describe_device();
  std::printf("device: %s, %d SMs, peak memory bandwidth %.0f GB/s (2 x memory clock x bus width)\n",
              dev.name.c_str(), dev.sms, dev.peak_bytes_per_second / 1e9);
  std::printf("mean over %d launches after 10 warm-ups; bytes = what the kernel must read/write at least;\n"
              "host = the host backend on the same input (batch 1 for verify and suffix match), and its ratio;\n"
              "step: tree build, greedy verification and KV compaction on one stream, (graph) the same captured\n"
              "in a CUDA graph; +sync: wall clock of one step launched and waited for (a decoding step's latency)\n\n",
              repeat);
  bench_tree_build(dev);
  bench_greedy_verify(dev);
  bench_stochastic_verify(dev);
  bench_suffix_match(dev);
  bench_kv_compaction(dev);
  bench_step(dev);
  return 0;
}
