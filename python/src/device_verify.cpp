// DeviceVerifier (device_verify.hpp): a verifier's verify_on(backend::cuda, VerifyJob) on logits the
// caller holds in device memory. As in a backend step (backend_step.hpp) the tree's arrays and the
// outputs share one packed buffer, outputs first, so that each direction is one copy through
// pinned staging memory and the call waits once; unlike it, there is no forward and no KV
// compaction: the caller's model did the forward and keeps its own cache.
#include <cstring>
#include <string>
#include <type_traits>

#include <cuda_runtime.h>

#include <specdec/backend.hpp>

#include "device_verify.hpp"

namespace specdec::python {

namespace {

using Tag = backend::cuda;

std::string cuda_error(cudaError_t e) { return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e); }

/// Byte offsets of arrays packed one after another, 16-byte aligned (any element type).
class Packing {
 public:
  template <class T>
  std::size_t add(std::size_t count) {
    static_assert(std::is_trivially_copyable_v<T>);
    size_ = (size_ + 15) / 16 * 16;
    const std::size_t at = size_;
    size_ += sizeof(T) * count;
    return at;
  }
  std::size_t size() const { return size_; }

 private:
  std::size_t size_ = 0;
};

/// Makes `device` current for the call and restores the caller's (PyTorch keeps its own notion of
/// the current device on the same thread).
class CurrentDevice {
 public:
  explicit CurrentDevice(int device) {
    if (const cudaError_t e = cudaGetDevice(&previous_); e != cudaSuccess)
      throw error("verify: no CUDA device is usable (" + cuda_error(e) + ")");
    if (previous_ != device)
      if (const cudaError_t e = cudaSetDevice(device); e != cudaSuccess)
        throw error("verify: cannot use CUDA device " + std::to_string(device) + " (" + cuda_error(e) + ")");
  }
  ~CurrentDevice() {
    int now = previous_;
    cudaGetDevice(&now);
    if (now != previous_) cudaSetDevice(previous_);
  }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

 private:
  int previous_ = 0;
};

// Where a tree of n nodes puts its arrays: outputs first (copied back), then the inputs.
struct Places {
  std::size_t length, next_token, verify_status, stochastic_status, row_status, bad_node, path, outputs;
  std::size_t offsets, row_offset, key, view, parent, token, depth, mask, first_child, next_sibling;
  std::size_t first_proposal, next_proposal, proposal_node, draw_begin, draw_token, draw_node, proposal_q;
  std::size_t total;
};

Places places(const TreeView& tree, int vocab) {
  const auto n = static_cast<std::size_t>(tree.size);
  const auto proposals = static_cast<std::size_t>(tree.proposals);
  const auto draws = proposals ? static_cast<std::size_t>(tree.draw_begin[proposals]) : 0;
  Packing p;
  Places at{};
  at.length = p.add<int>(1);
  at.next_token = p.add<token_t>(1);
  at.verify_status = p.add<core::verify_status>(1);
  at.stochastic_status = p.add<core::stochastic_status>(1);
  at.row_status = p.add<core::sampling_status>(1);
  at.bad_node = p.add<node_t>(1);
  at.path = p.add<node_t>(n);
  at.outputs = p.size();
  at.offsets = p.add<int>(2);
  at.row_offset = p.add<int>(1);
  at.key = p.add<core::RandomKey>(1);
  at.view = p.add<TreeView>(1);
  at.parent = p.add<node_t>(n);
  at.token = p.add<token_t>(n);
  at.depth = p.add<int>(n);
  at.mask = p.add<std::uint32_t>(n * static_cast<std::size_t>(tree.words_per_row));
  at.first_child = p.add<node_t>(n);
  at.next_sibling = p.add<node_t>(n);
  if (proposals) {
    at.first_proposal = p.add<node_t>(n);
    at.next_proposal = p.add<int>(proposals);
    at.proposal_node = p.add<node_t>(proposals);
    at.draw_begin = p.add<int>(proposals + 1);
    at.draw_token = p.add<token_t>(draws);
    at.draw_node = p.add<node_t>(draws);
    at.proposal_q = p.add<float>(proposals * static_cast<std::size_t>(vocab));
  }
  at.total = p.size();
  return at;
}

}  // namespace

int device_of(const DeviceRows& rows, const std::string& what) {
  cudaPointerAttributes attributes{};
  const cudaError_t e = cudaPointerGetAttributes(&attributes, rows.data);
  if (e != cudaSuccess) {
    cudaGetLastError();  // not sticky: leave no error for the caller's next CUDA call
    throw error(what + ": cannot tell which CUDA device holds them (" + cuda_error(e) + ")");
  }
  if (attributes.type != cudaMemoryTypeDevice && attributes.type != cudaMemoryTypeManaged)
    throw error(what + ": the data pointer is not CUDA device memory (pass host memory as a NumPy array or a CPU tensor)");
  if (rows.device >= 0 && attributes.device != rows.device)
    throw error(what + ": said to be on CUDA device " + std::to_string(rows.device) + ", but their memory is on device " +
                std::to_string(attributes.device));
  return attributes.device;
}

struct DeviceVerifier::Buffers {
  int device = -1;
  backend::buffer<Tag> staging{Tag{}, backend::memory::staging};  // pinned: asynchronous copies
  backend::buffer<Tag> packed{Tag{}, backend::memory::backend};   // the tree and the outputs
  backend::buffer<Tag> scratch{Tag{}, backend::memory::backend};  // argmax, accepted, work, workspace
};

DeviceVerifier::DeviceVerifier() = default;
DeviceVerifier::~DeviceVerifier() = default;

void DeviceVerifier::verify(const AnyVerifier& verifier, const TreeView& tree, const DeviceRows& logits,
                            Verdict& verdict) {
  const CurrentDevice current(logits.device);
  if (!buffers_ || buffers_->device != logits.device) {
    buffers_.reset();  // another device's memory is freed first
    buffers_ = std::make_unique<Buffers>();
    buffers_->device = logits.device;
  }
  Buffers& b = *buffers_;
  Tag tag{reinterpret_cast<CUstream_st*>(logits.stream)};
  const int vocab = logits.cols;
  const Places at = places(tree, vocab);
  b.staging.grow(at.total);
  b.packed.grow(at.total);

  // The job's shapes first: they size the scratch memory.
  backend::VerifyJob job;
  core::GreedyVerifyBatch& g = job.greedy;
  core::StochasticVerifyBatch& s = job.stochastic;
  g.batch = s.batch = 1;
  g.max_nodes = s.max_nodes = tree.size;
  g.vocab_size = s.vocab_size = vocab;
  g.row_stride = s.row_stride = logits.row_stride;
  Packing scratch;
  const std::size_t argmax_at = scratch.add<token_t>(static_cast<std::size_t>(tree.size));
  const std::size_t accepted_at = scratch.add<std::uint8_t>(static_cast<std::size_t>(tree.size));
  const std::size_t work_at = scratch.add<float>(static_cast<std::size_t>(vocab));
  const std::size_t workspace_bytes = std::max(backend::workspace_bytes(tag, g), backend::workspace_bytes(tag, s));
  const std::size_t workspace_at = scratch.add<unsigned char>(workspace_bytes);
  b.scratch.grow(scratch.size());
  tag.workspace = b.scratch.data() + workspace_at;
  tag.workspace_bytes = workspace_bytes;

  unsigned char* const host = b.staging.data();
  unsigned char* const device = b.packed.data();
  const auto stage = [&](std::size_t offset, const auto* from, std::size_t count) {
    if (count) std::memcpy(host + offset, from, sizeof(*from) * count);
  };
  const auto put = [&](std::size_t offset, const auto& value) { std::memcpy(host + offset, &value, sizeof(value)); };
  const auto there = [&](std::size_t offset) { return device + offset; };
  const auto n = static_cast<std::size_t>(tree.size);

  put(at.length, 0);
  put(at.next_token, token_t{-1});
  put(at.verify_status, core::verify_status::ok);
  put(at.stochastic_status, core::stochastic_status::ok);
  put(at.row_status, core::sampling_status::ok);
  put(at.bad_node, node_t{-1});
  const int offsets[2] = {0, tree.size};
  stage(at.offsets, offsets, 2);
  put(at.row_offset, 0);
  core::RandomKey key{};
  std::visit([&](const auto& v) {
    if constexpr (requires { { v.random_key() } -> std::convertible_to<core::RandomKey>; }) key = v.random_key();
  }, verifier);
  put(at.key, key);
  stage(at.parent, tree.parent, n);
  stage(at.token, tree.token, n);
  stage(at.depth, tree.depth, n);
  stage(at.mask, tree.mask, n * static_cast<std::size_t>(tree.words_per_row));
  stage(at.first_child, tree.first_child, n);
  stage(at.next_sibling, tree.next_sibling, n);
  TreeView on_device = tree;  // the same sizes and base position, its arrays on the device
  on_device.parent = reinterpret_cast<const node_t*>(there(at.parent));
  on_device.token = reinterpret_cast<const token_t*>(there(at.token));
  on_device.depth = reinterpret_cast<const int*>(there(at.depth));
  on_device.mask = reinterpret_cast<const std::uint32_t*>(there(at.mask));
  on_device.first_child = reinterpret_cast<const node_t*>(there(at.first_child));
  on_device.next_sibling = reinterpret_cast<const node_t*>(there(at.next_sibling));
  if (tree.proposals) {
    const auto proposals = static_cast<std::size_t>(tree.proposals);
    const auto draws = static_cast<std::size_t>(tree.draw_begin[proposals]);
    stage(at.first_proposal, tree.first_proposal, n);
    stage(at.next_proposal, tree.next_proposal, proposals);
    stage(at.proposal_node, tree.proposal_node, proposals);
    stage(at.draw_begin, tree.draw_begin, proposals + 1);
    stage(at.draw_token, tree.draw_token, draws);
    stage(at.draw_node, tree.draw_node, draws);
    stage(at.proposal_q, tree.proposal_q, proposals * static_cast<std::size_t>(vocab));
    on_device.first_proposal = reinterpret_cast<const node_t*>(there(at.first_proposal));
    on_device.next_proposal = reinterpret_cast<const int*>(there(at.next_proposal));
    on_device.proposal_node = reinterpret_cast<const node_t*>(there(at.proposal_node));
    on_device.draw_begin = reinterpret_cast<const int*>(there(at.draw_begin));
    on_device.draw_token = reinterpret_cast<const token_t*>(there(at.draw_token));
    on_device.draw_node = reinterpret_cast<const node_t*>(there(at.draw_node));
    on_device.proposal_q = reinterpret_cast<const float*>(there(at.proposal_q));
  }
  put(at.view, on_device);

  g.offsets = reinterpret_cast<const int*>(there(at.offsets));
  g.token = on_device.token;
  g.first_child = on_device.first_child;
  g.next_sibling = on_device.next_sibling;
  g.logits = logits.data;
  g.argmax = reinterpret_cast<token_t*>(b.scratch.data() + argmax_at);
  g.path = reinterpret_cast<node_t*>(there(at.path));
  g.length = reinterpret_cast<int*>(there(at.length));
  g.next_token = reinterpret_cast<token_t*>(there(at.next_token));
  g.status = reinterpret_cast<core::verify_status*>(there(at.verify_status));
  s.trees = reinterpret_cast<const TreeView*>(there(at.view));
  s.row_offset = reinterpret_cast<const int*>(there(at.row_offset));
  s.logits = logits.data;
  s.keys = reinterpret_cast<const core::RandomKey*>(there(at.key));
  s.work = reinterpret_cast<float*>(b.scratch.data() + work_at);
  s.accepted = b.scratch.data() + accepted_at;
  s.path = g.path;
  s.length = g.length;
  s.next_token = g.next_token;
  s.status = reinterpret_cast<core::stochastic_status*>(there(at.stochastic_status));
  s.row_status = reinterpret_cast<core::sampling_status*>(there(at.row_status));
  s.bad_node = reinterpret_cast<node_t*>(there(at.bad_node));

  const auto check = [&](backend::status status, const char* what) {
    if (status != backend::status::ok)
      throw error(std::string("verify on CUDA device ") + std::to_string(logits.device) + ": " + what +
                  " failed: " + backend::describe(tag, status));
  };
  try {
    check(backend::copy(tag, device, host, at.total), "copying the tree to the device");
    check(std::visit([&](const auto& v) { return v.verify_on(tag, job); }, verifier), "the verification");
    check(backend::copy(tag, host, device, at.outputs), "copying the verdict back");
    check(backend::synchronize(tag), "the verification on the stream");
  } catch (...) {
    // Work enqueued before the failure may still read the buffers: let it finish first.
    static_cast<void>(backend::synchronize(tag));
    throw;
  }

  const auto read = [&](std::size_t offset, auto& value) { std::memcpy(&value, host + offset, sizeof(value)); };
  core::verify_status greedy{};
  core::stochastic_status stochastic{};
  read(at.verify_status, greedy);
  read(at.stochastic_status, stochastic);
  if (greedy != core::verify_status::ok)
    throw error(std::string("verify on the GPU: ") + core::to_string(greedy));
  if (stochastic == core::stochastic_status::bad_row) {
    node_t bad = -1;
    core::sampling_status why{};
    read(at.bad_node, bad);
    read(at.row_status, why);
    throw error("verify on the GPU: the logits row after node " + std::to_string(bad) + " is unusable: " +
                core::to_string(why));
  }
  if (stochastic != core::stochastic_status::ok)
    throw error(std::string("verify on the GPU: ") + core::to_string(stochastic));
  int length = 0;
  read(at.length, length);
  if (length < 1 || length > tree.size)
    throw error("verify on the GPU: the kernel returned a path of length " + std::to_string(length));
  verdict.path.resize(static_cast<std::size_t>(length));
  std::memcpy(verdict.path.data(), host + at.path, sizeof(node_t) * static_cast<std::size_t>(length));
  read(at.next_token, verdict.next_token);
}

}  // namespace specdec::python
