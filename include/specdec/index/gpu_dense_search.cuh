// GpuFlatDenseSearch: the exact search of a DenseDatastore on a CUDA device (DenseSearch's
// backend "gpu-flat"; docs/drafters/dresd.md). Include it from a CUDA translation unit (nvcc);
// link CUDA::cudart and CUDA::cublas.
//
// The keys (keys × key_dim floats) are uploaded once, when the search is constructed. A search of
// Q queries (one, or a batch) then runs on the search's own stream, with no host synchronisation
// until its end:
//  1. scores: cuBLAS SGEMV (one query) or SGEMM (a batch): every key's inner product with each
//     query, Q × keys floats, in FP32 (the handle's math mode is the default one: no TF32);
//  2. select: each block of 256 threads turns a tile of 2048 scores into rank keys
//     (detail::dense_rank_key: score, then the lower key) and sorts them with cub::BlockRadixSort,
//     keeping the tile's k best; the same kernel then reduces those lists, 2048 at a time, until
//     one tile per query is left, whose first k are the answer, in ranks_before's order;
//  3. one copy of Q × k rank keys to pinned host memory and one cudaStreamSynchronize.
// (The queries go up from pinned memory too: a copy from pageable memory would wait for the stream.)
// So a call costs one host synchronisation (it returns the neighbours to the host), one upload of
// the queries, cuBLAS's launch and 1 + ⌈log_{2048/k}(keys / 2048)⌉ selection launches (3 for 1M
// keys and k = 32, 4 for 10M), and memory traffic of one read of the keys plus 8 bytes per key and
// query (the scores, written and read once). The neighbours are those
// of ExactDenseSearch; their scores come from another summation order (cuBLAS's), so they may differ
// in the last bits, and keys whose scores are that close may swap places (tests/index/dense_parity.hpp).
//
// The scratch buffers (scores, rank keys, the pinned copies) grow on the first call with more
// queries or a larger k than before: cudaMalloc/cudaFree there synchronise the device. Calls from
// several threads are serialised by a mutex (they share the stream and the scratch). Limits:
// k <= 1024, keys <= 2^31 - 1 (cuBLAS's int sizes), at most 65535 queries per batch.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cub/block/block_radix_sort.cuh>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <specdec/error.hpp>
#include <specdec/index/dense_datastore.hpp>
#include <specdec/index/dense_search.hpp>

namespace specdec {

namespace detail {

inline constexpr int gpu_flat_threads = 256;
inline constexpr int gpu_flat_items = 8;
inline constexpr int gpu_flat_tile = gpu_flat_threads * gpu_flat_items;
/// The largest k: half a tile, so that every reduction at least halves the candidates.
inline constexpr int gpu_flat_max_k = gpu_flat_tile / 2;

/// One tile (blockIdx.x) of one query's (blockIdx.y) `items` inputs -> its `keep` best rank keys
/// at out[(query · tiles + tile) · keep ...], best first. The inputs are scores (their rank keys
/// are made here; the item's index is its key) or rank keys of a previous round. Missing items
/// (past `items`) are rank key 0, below every real one.
template <class In>
__global__ void __launch_bounds__(gpu_flat_threads)
    gpu_flat_select_kernel(const In* in, std::uint64_t items, int keep, std::uint64_t* out) {
  using Sort = cub::BlockRadixSort<std::uint64_t, gpu_flat_threads, gpu_flat_items>;
  __shared__ typename Sort::TempStorage storage;
  const std::uint64_t query = blockIdx.y;
  const std::uint64_t tile = blockIdx.x;
  const In* row = in + query * items;
  std::uint64_t keys[gpu_flat_items];
#pragma unroll
  for (int j = 0; j < gpu_flat_items; ++j) {  // striped loads (coalesced); the sort needs no order
    const std::uint64_t i = tile * gpu_flat_tile + static_cast<std::uint64_t>(j) * gpu_flat_threads + threadIdx.x;
    if (i >= items) keys[j] = 0;
    else if constexpr (std::is_same_v<In, float>) keys[j] = dense_rank_key(row[i], static_cast<std::uint32_t>(i));
    else keys[j] = row[i];
  }
  Sort(storage).SortDescending(keys);  // blocked result: thread t holds ranks t · items ...
  std::uint64_t* tile_out = out + (query * gridDim.x + tile) * static_cast<std::uint64_t>(keep);
#pragma unroll
  for (int j = 0; j < gpu_flat_items; ++j) {
    const int rank = static_cast<int>(threadIdx.x) * gpu_flat_items + j;
    if (rank < keep) tile_out[rank] = keys[j];
  }
}

inline void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw error(std::string("gpu flat search: ") + what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

inline void check_cublas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw error(std::string("gpu flat search: ") + what + ": " + cublasGetStatusString(s));
}

/// Device memory of `count` T, grown (never shrunk) on request.
template <class T>
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { cudaFree(data_); }
  T* get() const { return data_; }
  void reserve(std::size_t count, const char* what) {
    if (count <= capacity_) return;
    cudaFree(data_);
    data_ = nullptr, capacity_ = 0;
    check_cuda(cudaMalloc(reinterpret_cast<void**>(&data_), count * sizeof(T)), what);
    capacity_ = count;
  }

 private:
  T* data_ = nullptr;
  std::size_t capacity_ = 0;
};

/// Pinned host memory of `count` T, grown (never shrunk) on request: copies from and to it are
/// asynchronous (from pageable memory, cudaMemcpyAsync waits for the stream first).
template <class T>
class PinnedArray {
 public:
  PinnedArray() = default;
  PinnedArray(const PinnedArray&) = delete;
  PinnedArray& operator=(const PinnedArray&) = delete;
  ~PinnedArray() { cudaFreeHost(data_); }
  T* get() const { return data_; }
  void reserve(std::size_t count, const char* what) {
    if (count <= capacity_) return;
    cudaFreeHost(data_);
    data_ = nullptr, capacity_ = 0;
    check_cuda(cudaMallocHost(reinterpret_cast<void**>(&data_), count * sizeof(T)), what);
    capacity_ = count;
  }

 private:
  T* data_ = nullptr;
  std::size_t capacity_ = 0;
};

struct StreamDeleter {
  void operator()(cudaStream_t s) const { cudaStreamDestroy(s); }
};
struct CublasDeleter {
  void operator()(cublasHandle_t h) const { cublasDestroy(h); }
};

/// Makes `device` current on this thread for the guard's life (the caller's device back after).
class CurrentDevice {
 public:
  explicit CurrentDevice(int device) {
    check_cuda(cudaGetDevice(&previous_), "cudaGetDevice");
    if (previous_ != device) check_cuda(cudaSetDevice(device), "cudaSetDevice");
  }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;
  ~CurrentDevice() { cudaSetDevice(previous_); }

 private:
  int previous_ = 0;
};

}  // namespace detail

class GpuFlatDenseSearch final : public DenseSearch {
 public:
  /// Uploads the keys of `datastore` to the current CUDA device. Throws specdec::error for a null
  /// datastore, more than 2^31 - 1 keys, no CUDA device, or a CUDA/cuBLAS call that fails (the
  /// keys not fitting in device memory included).
  explicit GpuFlatDenseSearch(std::shared_ptr<const DenseDatastore> datastore) : datastore_(std::move(datastore)) {
    if (!datastore_) throw error("gpu flat search: no datastore (null pointer)");
    if (datastore_->keys() > static_cast<std::uint64_t>(INT_MAX))
      throw error("gpu flat search: " + std::to_string(datastore_->keys()) + " keys, at most " + std::to_string(INT_MAX));
    int devices = 0;
    const cudaError_t e = cudaGetDeviceCount(&devices);
    if (e != cudaSuccess || devices == 0)
      throw error(std::string("gpu flat search: no CUDA device (") +
                  (e != cudaSuccess ? cudaGetErrorString(e) : "0 devices") + ")");
    detail::check_cuda(cudaGetDevice(&device_), "cudaGetDevice");
    cudaStream_t stream = nullptr;
    detail::check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    stream_.reset(stream);
    cublasHandle_t cublas = nullptr;
    detail::check_cublas(cublasCreate(&cublas), "cublasCreate");
    cublas_.reset(cublas);
    detail::check_cublas(cublasSetStream(cublas_.get(), stream_.get()), "cublasSetStream");
    detail::check_cublas(cublasSetMathMode(cublas_.get(), CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    const auto floats = datastore_->key_matrix().size();
    keys_.reserve(floats, "cudaMalloc of the keys");
    // On the search's stream, which does not wait for the legacy default stream's copies.
    detail::check_cuda(cudaMemcpyAsync(keys_.get(), datastore_->key_matrix().data(), floats * sizeof(float),
                                       cudaMemcpyHostToDevice, stream_.get()),
                       "upload of the keys");
    detail::check_cuda(cudaStreamSynchronize(stream_.get()), "upload of the keys");
  }
  GpuFlatDenseSearch(const GpuFlatDenseSearch&) = delete;
  GpuFlatDenseSearch& operator=(const GpuFlatDenseSearch&) = delete;

  const char* name() const override { return "gpu-flat"; }

  void search(std::span<const float> query, int k, std::vector<DenseNeighbour>& out) const override {
    search_batch(query, 1, k, out);
  }

  /// The (at most) k nearest keys of each of `count` queries (`queries`: count × key_dim floats, a
  /// query per row), in one pass over the keys (SGEMM). Query q's neighbours, best first, are
  /// out[q · n ...] (out resized to count · n); returns n = min(k, keys). Their scores may differ
  /// in the last bits from one query's search (SGEMV sums in another order).
  std::size_t search_batch(std::span<const float> queries, int count, int k, std::vector<DenseNeighbour>& out) const {
    const int l = datastore_->key_dim();
    if (count < 1 || count > 65535)
      throw error("gpu flat search: " + std::to_string(count) + " queries in a batch, must be 1 to 65535");
    if (queries.size() != static_cast<std::size_t>(count) * static_cast<std::size_t>(l))
      throw error("gpu flat search: " + std::to_string(count) + " queries of " + std::to_string(queries.size()) +
                  " floats in all, keys have " + std::to_string(l));
    if (k > detail::gpu_flat_max_k)
      throw error("gpu flat search: k = " + std::to_string(k) + ", at most " + std::to_string(detail::gpu_flat_max_k));
    out.clear();
    const std::uint64_t n = datastore_->keys();
    if (k <= 0 || n == 0) return 0;
    const std::size_t keep = static_cast<std::size_t>(std::min<std::uint64_t>(static_cast<std::uint64_t>(k), n));
    const auto queries_u = static_cast<std::uint64_t>(count);
    const std::uint64_t tiles0 = (n + detail::gpu_flat_tile - 1) / detail::gpu_flat_tile;

    const std::lock_guard lock(mutex_);
    const detail::CurrentDevice current(device_);
    queries_.reserve(queries.size(), "cudaMalloc of the queries");
    scores_.reserve(queries_u * n, "cudaMalloc of the scores");
    candidates_[0].reserve(queries_u * tiles0 * keep, "cudaMalloc of the candidates");
    candidates_[1].reserve(queries_u * ((tiles0 * keep + detail::gpu_flat_tile - 1) / detail::gpu_flat_tile) * keep,
                           "cudaMalloc of the candidates");
    host_queries_.reserve(queries.size(), "cudaMallocHost of the queries");
    host_results_.reserve(queries_u * keep, "cudaMallocHost of the results");

    std::copy(queries.begin(), queries.end(), host_queries_.get());
    detail::check_cuda(cudaMemcpyAsync(queries_.get(), host_queries_.get(), queries.size() * sizeof(float),
                                       cudaMemcpyHostToDevice, stream_.get()),
                       "upload of the queries");
    const float one = 1.0f, zero = 0.0f;
    const int rows = static_cast<int>(n);
    if (count == 1)
      detail::check_cublas(cublasSgemv(cublas_.get(), CUBLAS_OP_T, l, rows, &one, keys_.get(), l, queries_.get(), 1,
                                       &zero, scores_.get(), 1),
                           "cublasSgemv");
    else
      detail::check_cublas(cublasSgemm(cublas_.get(), CUBLAS_OP_T, CUBLAS_OP_N, rows, count, l, &one, keys_.get(), l,
                                       queries_.get(), l, &zero, scores_.get(), rows),
                           "cublasSgemm");

    // Round 0 selects from the scores; each later round from the previous round's survivors.
    const auto k_keep = static_cast<int>(keep);
    std::uint64_t items = n, tiles = tiles0;
    int round = 0;
    const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(count));
    detail::gpu_flat_select_kernel<float><<<grid, detail::gpu_flat_threads, 0, stream_.get()>>>(
        scores_.get(), items, k_keep, candidates_[0].get());
    detail::check_cuda(cudaGetLastError(), "launch of the selection");
    while (tiles > 1) {
      items = tiles * keep;
      tiles = (items + detail::gpu_flat_tile - 1) / detail::gpu_flat_tile;
      const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(count));
      detail::gpu_flat_select_kernel<std::uint64_t><<<grid, detail::gpu_flat_threads, 0, stream_.get()>>>(
          candidates_[round].get(), items, k_keep, candidates_[1 - round].get());
      detail::check_cuda(cudaGetLastError(), "launch of the selection");
      round = 1 - round;
    }
    detail::check_cuda(cudaMemcpyAsync(host_results_.get(), candidates_[round].get(),
                                       queries_u * keep * sizeof(std::uint64_t), cudaMemcpyDeviceToHost, stream_.get()),
                       "copy of the neighbours");
    detail::check_cuda(cudaStreamSynchronize(stream_.get()), "search");
    out.resize(queries_u * keep);
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = detail::dense_rank_neighbour(host_results_.get()[i]);
    return keep;
  }

 private:
  std::shared_ptr<const DenseDatastore> datastore_;
  int device_ = 0;
  std::unique_ptr<CUstream_st, detail::StreamDeleter> stream_;
  std::unique_ptr<cublasContext, detail::CublasDeleter> cublas_;
  detail::DeviceArray<float> keys_;
  mutable std::mutex mutex_;  // guards everything below
  mutable detail::DeviceArray<float> queries_;
  mutable detail::DeviceArray<float> scores_;
  mutable detail::DeviceArray<std::uint64_t> candidates_[2];
  mutable detail::PinnedArray<float> host_queries_;
  mutable detail::PinnedArray<std::uint64_t> host_results_;
};

}  // namespace specdec
