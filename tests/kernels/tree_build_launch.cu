#include "kernels/tree_build_launch.hpp"

#include <stdexcept>
#include <string>

#include <specdec/kernels/tree_build.cuh>

namespace specdec::testing {
namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

template <class T>
T* upload(const std::vector<T>& host) {
  T* device = nullptr;
  check(cudaMalloc(&device, sizeof(T) * (host.size() ? host.size() : 1)), "cudaMalloc");
  if (!host.empty()) check(cudaMemcpy(device, host.data(), sizeof(T) * host.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
  return device;
}

template <class T>
void download(std::vector<T>& host, const T* device) {
  if (!host.empty()) check(cudaMemcpy(host.data(), device, sizeof(T) * host.size(), cudaMemcpyDeviceToHost), "cudaMemcpy");
  check(cudaFree(const_cast<T*>(device)), "cudaFree");
}

}  // namespace

TreeBuildResult build_trees_on_device(const std::vector<int>& offsets, const std::vector<node_t>& parent,
                                      const std::vector<token_t>& token, int words, int max_nodes,
                                      int vocab_size) {
  const std::size_t nodes = parent.size();
  const int batch = static_cast<int>(offsets.size()) - 1;
  TreeBuildResult r;
  r.depth.assign(nodes, -1);
  r.mask.assign(nodes * static_cast<std::size_t>(words), 0u);
  r.first_child.assign(nodes, -1);
  r.next_sibling.assign(nodes, -1);
  r.max_depth.assign(batch, -1);
  r.status.assign(batch, core::tree_status::ok);

  kernels::TreeBatch b;
  b.batch = batch;
  b.words = words;
  b.max_nodes = max_nodes;
  b.vocab_size = vocab_size;
  b.offsets = upload(offsets);
  b.parent = upload(parent);
  b.token = upload(token);
  b.depth = upload(r.depth);
  b.mask = upload(r.mask);
  b.first_child = upload(r.first_child);
  b.next_sibling = upload(r.next_sibling);
  b.max_depth = upload(r.max_depth);
  b.status = upload(r.status);
  check(kernels::build_trees(b), "build_trees");
  check(cudaDeviceSynchronize(), "build_trees (sync)");
  download(r.depth, b.depth);
  download(r.mask, b.mask);
  download(r.first_child, b.first_child);
  download(r.next_sibling, b.next_sibling);
  download(r.max_depth, b.max_depth);
  download(r.status, b.status);
  check(cudaFree(const_cast<int*>(b.offsets)), "cudaFree");
  check(cudaFree(const_cast<node_t*>(b.parent)), "cudaFree");
  check(cudaFree(const_cast<token_t*>(b.token)), "cudaFree");
  return r;
}

}  // namespace specdec::testing
