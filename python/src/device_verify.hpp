// Verification of logits that lie in CUDA device memory (a PyTorch CUDA tensor, any object with
// __cuda_array_interface__), with the library's CUDA verification kernels on that memory: the tree
// goes to the device, only the verdict comes back. Defined in device_verify.cu, built when the
// module is built with the CUDA backend (SPECDEC_PYTHON_CUDA); this header needs no CUDA headers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "verifiers.hpp"

namespace specdec::python {

/// Rows of float32 logits in device memory, each row contiguous (checked by arrays.hpp).
struct DeviceRows {
  const float* data = nullptr;
  std::int64_t row_stride = 0;  ///< floats from one row to the next
  int rows = 0;
  int cols = 0;
  int device = -1;             ///< the CUDA device holding them (-1: found from the pointer)
  std::uintptr_t stream = 0;   ///< the cudaStream_t their producer wrote them on (0: the default stream)
};

/// The CUDA device whose memory `rows.data` points into; throws specdec::error naming `what` when
/// it is no device memory (host memory, a bad address, no CUDA driver or device).
int device_of(const DeviceRows& rows, const std::string& what);

/// Verifies trees on device logits: the greedy, rejection-sampling or conditional kernels run on
/// the logits' device, on their stream, after the work already queued there; the call waits for
/// the verdict (one copy back). Keeps its device buffers from call to call (grown as trees grow),
/// on one device at a time. Not for two threads at once.
class DeviceVerifier {
 public:
  DeviceVerifier();
  ~DeviceVerifier();
  DeviceVerifier(const DeviceVerifier&) = delete;
  DeviceVerifier& operator=(const DeviceVerifier&) = delete;

  /// Throws specdec::error with the failing CUDA call or the verification's status in words.
  void verify(const AnyVerifier& verifier, const TreeView& tree, const DeviceRows& logits, Verdict& verdict);

 private:
  struct Buffers;
  std::unique_ptr<Buffers> buffers_;
};

}  // namespace specdec::python
