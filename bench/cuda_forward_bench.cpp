// CudaLlamaTarget's forward cost c(n) for trees of n nodes, and its weight products against
// cuBLAS, on the synthetic shapes (bf16 weights made on the device; timing only):
//
//   cuda_forward_bench [--shapes A,B,...] [--contexts 128,512,2048] [--reps N] [--nodes 1,16]
//                      [--forward-only]
//
// Part 1, per shape and context: milliseconds per forward (CUDA events around `reps` forwards
// after one warm-up) of a tree of n nodes on a cache of `context` tokens, for n = 1..16, 24, 32,
// 48, 64, 96, 128, and c(n)/c(1), with tensor-core products at every context and with CUDA-core
// products at the middle one. The tree is a binary heap (node i's parent (i - 1) / 2: shallow and
// wide, like merged drafts). c(1) at context 512 is the plain decoding step.
// Part 2, per shape: the attention kernels' share: forwards of n = 1, 2, 4, 8, 16, 32, 64, 128
// nodes with SplitAttention and with TiledAttention forced (the same bits; which is quicker from
// how many rows sets kernels::llama::tiled_attention_rows), at the middle and the longest context;
// and forwards launched against the same replayed as CUDA graphs (DeviceLlamaOptions::graphs: the
// tree padded to its bucket), at the middle context.
// Part 3, per shape: each weight product (qkv, o, w1|w3, w2, classifier) of n = 1, 16, 64, 128
// tokens: ours on CUDA cores (fp32 activations) and on tensor cores (the same bf16 activations as
// cuBLAS), both batch-invariant, against cublasGemmEx (bf16 x bf16, fp32 accumulation and
// output, cuBLAS's own choice of algorithm), and the weight bytes per second ours reach; "other
// ms" is the tensor-core variant the target does not pick at that n (MmaProduct<8, 2> for n <= 8,
// <1, 1> above: the same bits), which tells whether the threshold is right. Exits 0 with a message
// when there is no device.
// --nodes replaces Part 1's tree sizes and --forward-only runs Part 1 alone, with tensor cores:
// under a profiler (the GPU bundle's `nsys profile --stats=true`), the time of each kernel of a
// plain step (--nodes 1) or of a tree's forward.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <specdec/models/synthetic_llama.hpp>
#include <specdec/targets/cuda_llama.hpp>
#include <specdec/testing/device_tree.cuh>

using namespace specdec;
namespace k = specdec::kernels::llama;

namespace {

void must(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "cuda_forward_bench: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}
void must(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "cuda_forward_bench: %s: cuBLAS status %d\n", what, static_cast<int>(s));
    std::exit(1);
  }
}

/// Enqueues grid kernel `kernel` on `gpu`'s stream.
template <class Kernel>
void launch(const specdec::backend::cuda& gpu, const Kernel& kernel) {
  specdec::backend::launch_grid(gpu, kernel.shape(), kernel);
}

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

// Times `reps` calls of f on `stream` after one warm-up: milliseconds per call.
template <class F>
double time_ms(cudaStream_t stream, int reps, F&& f) {
  cudaEvent_t start, stop;
  must(cudaEventCreate(&start), "cudaEventCreate");
  must(cudaEventCreate(&stop), "cudaEventCreate");
  f();
  must(cudaEventRecord(start, stream), "cudaEventRecord");
  for (int r = 0; r < reps; ++r) f();
  must(cudaEventRecord(stop, stream), "cudaEventRecord");
  must(cudaEventSynchronize(stop), "the timed work");
  float ms = 0;
  must(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return static_cast<double>(ms) / reps;
}

// A binary-heap tree of n nodes, laid out on the host.
testing::LaidOutTree heap_tree(int n, int vocab) {
  std::vector<node_t> parent(static_cast<std::size_t>(n));
  std::vector<token_t> token(parent.size());
  for (int i = 0; i < n; ++i) {
    parent[static_cast<std::size_t>(i)] = i == 0 ? -1 : (i - 1) / 2;
    token[static_cast<std::size_t>(i)] = (7 * i + 3) % vocab;
  }
  return testing::LaidOutTree(std::move(parent), std::move(token));
}

void forward_costs(const SyntheticShape& shape, const std::vector<int>& contexts, const std::vector<int>& sizes,
                   int reps, cudaStream_t stream, bool tensor_cores) {
  const int longest = *std::max_element(contexts.begin(), contexts.end());
  CudaLlamaTarget target = CudaLlamaTarget::synthetic(
      shape, 1, backend::cuda{stream},
      {.max_positions = longest + 128, .max_tree_nodes = 128, .max_rows = 0, .tensor_cores = tensor_cores});
  std::printf("\n%s (bf16, %s products, %.2f GB of device memory)\n", shape.name,
              tensor_cores ? "tensor-core" : "CUDA-core", static_cast<double>(target.device_bytes()) / 1e9);
  std::printf("%8s %5s %10s %9s\n", "context", "n", "ms", "c(n)/c(1)");
  for (int context : contexts) {
    std::vector<token_t> prompt(static_cast<std::size_t>(context));
    for (int i = 0; i < context; ++i) prompt[static_cast<std::size_t>(i)] = (31 * i + 5) % target.vocab_size();
    target.prefill(prompt);
    double c1 = 0;  // c(1), or the first size's
    for (int n : sizes) {
      const testing::DeviceTree tree(heap_tree(n, target.vocab_size()), context);
      const double ms = time_ms(stream, reps, [&] { target.forward(tree.view()); });
      if (c1 == 0) c1 = ms;
      std::printf("%8d %5d %10.3f %9.3f\n", context, n, ms, ms / c1);
    }
  }
  must(cudaStreamSynchronize(stream), "the forwards");
}

// Forward ms of trees of n = 1, 2, 4, ... 128 nodes (and 5: a padded bucket) with two options of
// the same shape (tensor-core products), side by side at each context.
void compare_costs(const SyntheticShape& shape, const std::vector<int>& contexts, int reps, cudaStream_t stream,
                   const char* what, const char* label_a, DeviceLlamaOptions a, const char* label_b,
                   DeviceLlamaOptions b) {
  const int longest = *std::max_element(contexts.begin(), contexts.end());
  std::printf("\n%s: forward ms %s (tensor-core products)\n", shape.name, what);
  std::printf("%8s %5s %10s %10s %7s\n", "context", "n", label_a, label_b, "ratio");
  std::vector<std::vector<double>> ms(2);
  const int sizes[] = {1, 2, 4, 5, 8, 16, 32, 64, 128};
  for (int which = 0; which < 2; ++which) {
    DeviceLlamaOptions options = which == 0 ? a : b;
    options.max_positions = longest + 128;
    options.max_tree_nodes = 128;
    options.tensor_cores = true;
    CudaLlamaTarget target = CudaLlamaTarget::synthetic(shape, 1, backend::cuda{stream}, options);
    for (int context : contexts) {
      std::vector<token_t> prompt(static_cast<std::size_t>(context));
      for (int i = 0; i < context; ++i) prompt[static_cast<std::size_t>(i)] = (31 * i + 5) % target.vocab_size();
      target.prefill(prompt);
      for (int n : sizes) {
        const testing::DeviceTree tree(heap_tree(n, target.vocab_size()), context);
        ms[static_cast<std::size_t>(which)].push_back(time_ms(stream, reps, [&] { target.forward(tree.view()); }));
      }
    }
  }
  std::size_t i = 0;
  for (int context : contexts)
    for (int n : sizes) {
      std::printf("%8d %5d %10.3f %10.3f %7.3f\n", context, n, ms[0][i], ms[1][i], ms[1][i] / ms[0][i]);
      ++i;
    }
}

void attention_costs(const SyntheticShape& shape, const std::vector<int>& contexts, int reps, cudaStream_t stream) {
  using Kind = DeviceLlamaOptions::Attention;
  compare_costs(shape, contexts, reps, stream, "with each attention kernel", "per-node", {.attention = Kind::per_node},
                "tiled", {.attention = Kind::tiled});
}

void graph_costs(const SyntheticShape& shape, const std::vector<int>& contexts, int reps, cudaStream_t stream) {
  compare_costs(shape, contexts, reps, stream, "launched, and replayed as CUDA graphs (a tree padded to its bucket)",
                "launched", {}, "graphs", {.graphs = true});
}

void products_against_cublas(const SyntheticShape& shape, int reps, cudaStream_t stream, cublasHandle_t blas) {
  const LlamaConfig& c = shape.config;
  struct Product {
    const char* name;
    int in, out;
  };
  const Product products[] = {{"qkv", c.dim, c.dim + 2 * c.kv_dim()},
                              {"o", c.dim, c.dim},
                              {"w1|w3", c.dim, 2 * c.hidden_dim},
                              {"w2", c.hidden_dim, c.dim},
                              {"classifier", c.dim, c.vocab_size}};
  constexpr int max_n = 128;
  std::printf("\n%s: weight products, ours (batch-invariant) on CUDA cores and on tensor cores, against cuBLAS\n",
              shape.name);
  std::printf("%-10s %6s %6s %4s %9s %9s %9s %7s %7s %8s %8s %9s\n", "product", "in", "out", "n", "cuda ms", "tc ms",
              "cublas ms", "cuda/cb", "tc/cb", "cuda GB/s", "tc GB/s", "other ms");
  for (const Product& p : products) {
    const std::size_t weights = static_cast<std::size_t>(p.in) * p.out;
    k::bf16* w = nullptr;
    __nv_bfloat16* x16 = nullptr;
    float *x = nullptr, *y = nullptr;
    must(cudaMalloc(&w, weights * 2), "cudaMalloc");
    must(cudaMalloc(&x, sizeof(float) * max_n * p.in), "cudaMalloc");
    must(cudaMalloc(&x16, 2ull * max_n * p.in), "cudaMalloc");
    must(cudaMalloc(&y, sizeof(float) * max_n * p.out), "cudaMalloc");
    const auto fill = [&](auto kernel) { launch(specdec::backend::cuda{stream}, kernel); };
    const auto activations = static_cast<unsigned long long>(max_n) * p.in;
    fill(k::FillSynthetic<k::bf16>{w, weights, 1, synthetic::tensor::wq, 0});
    fill(k::FillSynthetic<float>{x, activations, 2, synthetic::tensor::rms_att, 0});
    fill(k::FillSynthetic<k::bf16>{reinterpret_cast<k::bf16*>(x16), activations, 2, synthetic::tensor::rms_att, 0});
    must(cudaGetLastError(), "filling the operands");
    for (int n : {1, 16, 64, 128}) {
      k::ProductArgs a;
      a.w = w;
      a.in = p.in;
      a.out = p.out;
      a.n = n;
      a.x = x;
      a.ldx = p.in;
      a.y = y;
      a.ldy = p.out;
      const specdec::backend::cuda gpu{stream};
      const double ours = time_ms(stream, reps, [&] { launch(gpu, k::Product<k::bf16>{a}); });
      must(cudaGetLastError(), "our product");
      // On cuBLAS's bf16 operands: the target's kernels write the activations in bf16 as they
      // make them.
      const auto* x16_ours = reinterpret_cast<const k::bf16*>(x16);
      const double ours_tc = time_ms(stream, reps, [&] {
        k::launch_mma_product(a, x16_ours, [&](const auto& kernel) { launch(gpu, kernel); });
      });
      // The variant the target does not run at this n (the same bits): whether its threshold is right.
      const double other_tc = time_ms(stream, reps, [&] {
        k::launch_mma_variant(n <= k::mma_tokens, a, x16_ours, [&](const auto& kernel) { launch(gpu, kernel); });
      });
      must(cudaGetLastError(), "our tensor-core product");
      // Y^T [out][n] = W [out][in] · X^T: column-major, W is a transposed (in x out) matrix.
      const float one = 1.0f, zero = 0.0f;
      const double theirs = time_ms(stream, reps, [&] {
        must(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, p.out, n, p.in, &one, w, CUDA_R_16BF, p.in, x16, CUDA_R_16BF,
                          p.in, &zero, y, CUDA_R_32F, p.out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
             "cublasGemmEx");
      });
      const double bytes = static_cast<double>(weights) * 2;
      std::printf("%-10s %6d %6d %4d %9.4f %9.4f %9.4f %7.2f %7.2f %8.0f %8.0f %9.4f\n", p.name, p.in, p.out, n, ours,
                  ours_tc, theirs, ours / theirs, ours_tc / theirs, bytes / (ours * 1e-3) / 1e9,
                  bytes / (ours_tc * 1e-3) / 1e9, other_tc);
    }
    must(cudaStreamSynchronize(stream), "the products");
    cudaFree(w);
    cudaFree(x);
    cudaFree(x16);
    cudaFree(y);
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Line-buffered: a run cut short by a time limit keeps every line it printed.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  // The main target first (Llama-2-7B's plain step at context 512).
  std::vector<std::string> shapes{"Llama-2-7B", "Llama-3-8B", "TinyLlama-1.1B", "stories110M"};
  std::vector<int> contexts{128, 512, 2048};
  int reps = 3;
  std::vector<int> sizes{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 24, 32, 48, 64, 96, 128};
  bool forward_only = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--shapes" && has_value) shapes = split(argv[++i]);
    else if (arg == "--contexts" && has_value) {
      contexts.clear();
      for (const std::string& s : split(argv[++i])) contexts.push_back(std::atoi(s.c_str()));
    } else if (arg == "--nodes" && has_value) {
      sizes.clear();
      for (const std::string& s : split(argv[++i])) sizes.push_back(std::clamp(std::atoi(s.c_str()), 1, 128));
    } else if (arg == "--reps" && has_value) reps = std::max(1, std::atoi(argv[++i]));
    else if (arg == "--forward-only") forward_only = true;
    else {
      std::fprintf(stderr,
                   "usage: cuda_forward_bench [--shapes A,B] [--contexts 128,512,2048] [--reps N] [--nodes 1,16] "
                   "[--forward-only]\n");
      return 2;
    }
  }
  if (contexts.empty() || sizes.empty() || shapes.empty()) {
    std::fprintf(stderr, "cuda_forward_bench: --shapes, --contexts and --nodes each need at least one value\n");
    return 2;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("cuda_forward_bench: no CUDA device; nothing measured.\n");
    return 0;
  }
  cudaDeviceProp prop{};
  must(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("cuda_forward_bench on %s: CudaLlamaTarget forwards (synthetic bf16 weights, timing only)\n", prop.name);
  cudaStream_t stream;
  must(cudaStreamCreate(&stream), "cudaStreamCreate");
  cublasHandle_t blas;
  must(cublasCreate(&blas), "cublasCreate");
  must(cublasSetStream(blas, stream), "cublasSetStream");
  try {
    for (const std::string& name : shapes) {
      const SyntheticShape& shape = synthetic_shape(name);
      forward_costs(shape, contexts, sizes, reps, stream, /*tensor_cores=*/true);
      if (forward_only) continue;
      forward_costs(shape, {contexts[contexts.size() / 2]}, sizes, reps, stream, /*tensor_cores=*/false);
      attention_costs(shape, {contexts[contexts.size() / 2], contexts.back()}, reps, stream);
      graph_costs(shape, {contexts[contexts.size() / 2]}, reps, stream);
      products_against_cublas(shape, reps, stream, blas);
    }
  } catch (const std::exception& e) {  // specdec::error, and a failed CUDA call of DeviceTree
    std::fprintf(stderr, "cuda_forward_bench: %s\n", e.what());
    return 1;
  }
  cublasDestroy(blas);
  cudaStreamDestroy(stream);
  return 0;
}
