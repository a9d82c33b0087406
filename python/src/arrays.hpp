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
    throw error(what + ": a tensor on " + device +
                ", but this module reads host memory only: pass it with .cpu() (docs/python.md, CUDA tensors)");
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

/// A NumPy copy of `n` values.
template <class T>
py::array_t<T> numpy_copy(const T* data, std::size_t n) {
  py::array_t<T> out(static_cast<py::ssize_t>(n));
  if (n) std::copy(data, data + n, out.mutable_data());
  return out;
}

}  // namespace specdec::python
