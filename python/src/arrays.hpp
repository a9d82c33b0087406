// Conversions between the module's Python inputs/outputs and the library's spans: token lists,
// logits (NumPy arrays or PyTorch tensors, read in place) and the tree's NumPy arrays. Every
// refusal is one sentence naming the bad value (a specdec::error, Python's specdec.Error).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <specdec/config.hpp>
#include <specdec/error.hpp>

#include "device_verify.hpp"

namespace specdec::python {

namespace py = pybind11;

/// Whether `obj` is a torch.Tensor (checked by type name: the module does not link PyTorch).
inline bool is_torch_tensor(py::handle obj) {
  const py::handle type = py::type::handle_of(obj);
  return py::str(type.attr("__module__")).cast<std::string>() == "torch" &&
         py::str(type.attr("__name__")).cast<std::string>() == "Tensor";
}

inline std::string type_name(py::handle obj) { return py::str(py::type::handle_of(obj).attr("__name__")); }

/// A CPU tensor as a NumPy array over the same memory; refuses a tensor on another device.
inline py::array cpu_tensor_as_array(py::handle tensor, const std::string& what) {
  const std::string device = py::str(tensor.attr("device"));
  if (device != "cpu")
    throw error(what + ": a tensor on " + device + ", but " + what + " are read from host memory: pass them with .cpu()");
  return tensor.attr("detach")().attr("numpy")();
}

/// Integers of at least `least` from a list of ints, an integer NumPy array or an integer CPU
/// tensor (1-D).
inline std::vector<std::int32_t> ints_from(py::handle obj, const std::string& what, std::int64_t least) {
  if (is_torch_tensor(obj)) return ints_from(cpu_tensor_as_array(obj, what), what, least);
  if (py::isinstance<py::array>(obj)) {
    const auto array = py::reinterpret_borrow<py::array>(obj);
    const char kind = array.dtype().kind();
    if (kind != 'i' && kind != 'u')
      throw error(what + " has dtype " + std::string(py::str(array.dtype())) + ", need integers");
    if (array.ndim() != 1) throw error(what + " has " + std::to_string(array.ndim()) + " dimensions, need 1");
    const auto ids = py::array_t<std::int64_t, py::array::forcecast>::ensure(array);
    std::vector<std::int32_t> values(static_cast<std::size_t>(ids.size()));
    for (py::ssize_t i = 0; i < ids.size(); ++i) {
      const std::int64_t v = ids.at(i);
      if (v < least || v > INT32_MAX)
        throw error(what + "[" + std::to_string(i) + "] is " + std::to_string(v) + ", outside [" +
                    std::to_string(least) + ", 2^31)");
      values[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(v);
    }
    return values;
  }
  if (!py::isinstance<py::sequence>(obj) || py::isinstance<py::str>(obj))
    throw error(what + " must be a list of ints, a NumPy array or a tensor, got " + type_name(obj));
  std::vector<std::int32_t> values;
  for (py::handle item : py::reinterpret_borrow<py::sequence>(obj)) {
    if (!py::isinstance<py::int_>(item)) throw error(what + " holds a " + type_name(item) + ", need ints");
    const long long v = item.cast<long long>();
    if (v < least || v > INT32_MAX)
      throw error(what + " holds " + std::to_string(v) + ", outside [" + std::to_string(least) + ", 2^31)");
    values.push_back(static_cast<std::int32_t>(v));
  }
  return values;
}

/// Token ids (see ints_from); the caller checks them against its vocabulary.
inline std::vector<token_t> tokens_from(py::handle obj, const std::string& what) { return ints_from(obj, what, 0); }

/// Rows of float32 read in place (logits, features): each row contiguous, any row stride.
struct HostRows {
  py::array owner;  // keeps the memory alive
  const float* data = nullptr;
  std::int64_t row_stride = 0;
  int cols = 0;
};

/// Checks `obj` holds `rows` rows of `cols` float32 values in host memory (cols < 0: any width,
/// at least 1) and returns them. `what` names them in a refusal ("logits").
inline HostRows host_rows(py::handle obj, const std::string& what, int rows, int cols) {
  py::array array;
  if (is_torch_tensor(obj)) {
    const std::string dtype = py::str(obj.attr("dtype"));
    if (dtype != "torch.float32") throw error(what + " have dtype " + dtype + ", need torch.float32");
    array = cpu_tensor_as_array(obj, what);
  } else if (py::isinstance<py::array>(obj)) {
    array = py::reinterpret_borrow<py::array>(obj);
    if (!array.dtype().is(py::dtype::of<float>()))
      throw error(what + " have dtype " + std::string(py::str(array.dtype())) + ", need float32");
  } else {
    throw error(what + " must be a NumPy array or a torch.Tensor, got " + type_name(obj));
  }
  if (array.ndim() != 2)
    throw error(what + " have " + std::to_string(array.ndim()) + " dimensions, need 2 (one row per tree node)");
  if (cols < 0 && array.shape(1) >= 1) cols = static_cast<int>(array.shape(1));
  if (array.shape(0) != rows || array.shape(1) != cols)
    throw error(what + " have shape (" + std::to_string(array.shape(0)) + ", " + std::to_string(array.shape(1)) +
                "), need (" + std::to_string(rows) + ", " + std::to_string(cols) + ")");
  if (array.strides(1) != static_cast<py::ssize_t>(sizeof(float)) || array.strides(0) % sizeof(float) != 0 ||
      (rows > 1 && array.strides(0) < cols * static_cast<py::ssize_t>(sizeof(float))))
    throw error(what + " have strides (" + std::to_string(array.strides(0)) + ", " + std::to_string(array.strides(1)) +
                ") bytes: each row must be contiguous (use .contiguous() or np.ascontiguousarray)");
  HostRows out;
  out.cols = cols;
  out.data = static_cast<const float*>(array.data());
  out.row_stride = array.strides(0) / static_cast<py::ssize_t>(sizeof(float));
  out.owner = std::move(array);
  return out;
}

/// Logits as verify() takes them: in host memory (read in place), or in CUDA device memory (a
/// CUDA tensor, or any object with __cuda_array_interface__: verified there by the CUDA kernels).
struct LogitsInput {
  HostRows host;
  bool on_device = false;
  DeviceRows device;  // when on_device; its device is -1 until device_of() found it
};

namespace device_input {

// Shape and strides (in floats) of device rows, checked as host_rows checks an array's.
// cols < 0: any width (at least 1), set to the rows' own.
inline void check_device_rows(const std::string& what, std::int64_t rows_given, std::int64_t cols_given,
                              std::int64_t row_stride, std::int64_t col_stride, int rows, int& cols) {
  if (cols < 0 && cols_given >= 1 && cols_given <= INT32_MAX) cols = static_cast<int>(cols_given);
  if (rows_given != rows || cols_given != cols)
    throw error(what + " have shape (" + std::to_string(rows_given) + ", " + std::to_string(cols_given) + "), need (" +
                std::to_string(rows) + ", " + std::to_string(cols) + ")");
  if (col_stride != 1 || (rows > 1 && row_stride < cols))
    throw error(what + " have strides (" + std::to_string(row_stride) + ", " + std::to_string(col_stride) +
                ") floats: each row must be contiguous (use .contiguous())");
}

// A torch tensor on a CUDA device: its memory, strides and the stream PyTorch queues work on.
inline DeviceRows torch_cuda_rows(py::handle tensor, const std::string& what, int rows, int cols) {
  const std::string dtype = py::str(tensor.attr("dtype"));
  if (dtype != "torch.float32") throw error(what + " have dtype " + dtype + ", need torch.float32");
  const auto shape = tensor.attr("shape").cast<std::vector<std::int64_t>>();
  if (shape.size() != 2)
    throw error(what + " have " + std::to_string(shape.size()) + " dimensions, need 2 (one row per tree node)");
  const auto strides = tensor.attr("stride")().cast<std::vector<std::int64_t>>();
  check_device_rows(what, shape[0], shape[1], strides[0], strides[1], rows, cols);
  DeviceRows out;
  out.rows = rows;
  out.cols = cols;
  out.row_stride = strides[0];
  out.data = reinterpret_cast<const float*>(tensor.attr("data_ptr")().cast<std::uintptr_t>());
  const py::object device = tensor.attr("device");
  out.device = device.attr("index").cast<int>();
  // The tensor is ready on PyTorch's current stream of its device: verify on that stream, after it.
  out.stream = py::module_::import("torch").attr("cuda").attr("current_stream")(device).attr("cuda_stream").cast<std::uintptr_t>();
  return out;
}

// An object with __cuda_array_interface__ (version 2 or 3: CuPy, Numba, ...): its "stream" (v3)
// is the stream its data is ready on; none given, the default stream.
inline DeviceRows interface_rows(py::handle obj, const std::string& what, int rows, int cols) {
  const py::object face = obj.attr("__cuda_array_interface__");
  if (!py::isinstance<py::dict>(face)) throw error(what + ": __cuda_array_interface__ is not a dict");
  const auto d = py::reinterpret_borrow<py::dict>(face);
  for (const char* key : {"typestr", "shape", "data"})
    if (!d.contains(key)) throw error(what + ": __cuda_array_interface__ has no '" + key + "'");
  const std::string typestr = py::str(d["typestr"]);
  if (typestr != "<f4" && typestr != "=f4") throw error(what + " have typestr " + typestr + ", need <f4 (float32)");
  const auto shape = d["shape"].cast<std::vector<std::int64_t>>();
  if (shape.size() != 2)
    throw error(what + " have " + std::to_string(shape.size()) + " dimensions, need 2 (one row per tree node)");
  if (d.contains("mask") && !d["mask"].is_none()) throw error(what + " have a mask: masked logits are not supported");
  std::int64_t row_bytes = shape[1] * 4, col_bytes = 4;  // strides None: C-contiguous
  if (d.contains("strides") && !d["strides"].is_none()) {
    const auto strides = d["strides"].cast<std::vector<std::int64_t>>();
    if (strides.size() != 2) throw error(what + ": __cuda_array_interface__ strides have " + std::to_string(strides.size()) + " entries, need 2");
    row_bytes = strides[0];
    col_bytes = strides[1];
  }
  if (row_bytes % 4 != 0 || col_bytes % 4 != 0)
    throw error(what + " have strides (" + std::to_string(row_bytes) + ", " + std::to_string(col_bytes) +
                ") bytes: each row must be contiguous (use .contiguous())");
  check_device_rows(what, shape[0], shape[1], row_bytes / 4, col_bytes / 4, rows, cols);
  const auto data = d["data"].cast<py::tuple>();
  const auto pointer = data[0].cast<std::uintptr_t>();
  if (pointer == 0 && rows > 0) throw error(what + ": __cuda_array_interface__ gives a null data pointer");
  DeviceRows out;
  out.rows = rows;
  out.cols = cols;
  out.row_stride = row_bytes / 4;
  out.data = reinterpret_cast<const float*>(pointer);
  if (d.contains("stream") && !d["stream"].is_none()) out.stream = d["stream"].cast<std::uintptr_t>();
  return out;
}

}  // namespace device_input

/// Checks `obj` holds `rows` rows of `cols` float32 logits (cols < 0: any width) in host memory or
/// in CUDA device memory and returns them. Refuses a tensor on another device (e.g. meta).
inline LogitsInput logits_rows(py::handle obj, int rows, int cols) {
  const std::string what = "logits";
  LogitsInput out;
  if (py::isinstance<py::array>(obj)) {  // the common case first: no attribute look-ups
    out.host = host_rows(obj, what, rows, cols);
    return out;
  }
  const bool torch = is_torch_tensor(obj);
  const bool torch_cuda = torch && py::str(obj.attr("device").attr("type")).cast<std::string>() == "cuda";
  const bool interface = !torch && py::hasattr(obj, "__cuda_array_interface__");
  if (!torch_cuda && !interface) {
    out.host = host_rows(obj, what, rows, cols);
    return out;
  }
  out.on_device = true;
  out.device = torch_cuda ? device_input::torch_cuda_rows(obj, what, rows, cols) : device_input::interface_rows(obj, what, rows, cols);
#if defined(SPECDEC_PYTHON_CUDA)
  out.device.device = device_of(out.device, what);
#else
  throw error(what + " are in CUDA device memory, but this build of specdec has no CUDA backend (configure with "
              "SPECDEC_CUDA=ON, or pass them with .cpu())");
#endif
  return out;
}

/// A NumPy copy of `n` values.
template <class T>
py::array_t<T> numpy_copy(const T* data, std::size_t n) {
  py::array_t<T> out(static_cast<py::ssize_t>(n));
  if (n) std::copy(data, data + n, out.mutable_data());
  return out;
}

}  // namespace specdec::python
