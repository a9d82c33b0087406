"""Device memory for the gpu tests: a PyTorch CUDA tensor where PyTorch has CUDA, else rows copied
to the GPU with the CUDA driver API (ctypes) behind __cuda_array_interface__, so that the tests run
on a GPU machine whose PyTorch is a CPU build (Debian's). None of it is needed without a device."""
import ctypes

import numpy as np
import torch


class DriverRows:
    """float32 rows in device memory (cuMemAlloc), freed with the object; `row_floats` > the
    width gives rows further apart than the vocabulary."""
    _cuda = None

    @classmethod
    def driver(cls):
        """The CUDA driver with device 0's primary context current (the one the CUDA runtime, and
        so the module, uses), or None when there is no driver or device."""
        if cls._cuda is None:
            try:
                cuda = ctypes.CDLL("libcuda.so.1")
            except OSError:
                return None
            count = ctypes.c_int(0)
            if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value == 0:
                return None
            device, context = ctypes.c_int(0), ctypes.c_void_p()
            assert cuda.cuDeviceGet(ctypes.byref(device), 0) == 0
            assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), device) == 0
            assert cuda.cuCtxSetCurrent(context) == 0
            cls._cuda = cuda
        return cls._cuda

    def __init__(self, rows, row_floats=None):
        rows = np.ascontiguousarray(rows, np.float32)
        n, width = rows.shape
        row_floats = row_floats or width
        wide = np.zeros((n, row_floats), np.float32)
        wide[:, :width] = rows
        cuda = self.driver()
        self.pointer = ctypes.c_uint64(0)
        assert cuda.cuMemAlloc_v2(ctypes.byref(self.pointer), ctypes.c_size_t(max(wide.nbytes, 4))) == 0
        assert cuda.cuMemcpyHtoD_v2(self.pointer, wide.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(wide.nbytes)) == 0
        self.__cuda_array_interface__ = {
            "shape": (n, width), "typestr": "<f4", "data": (self.pointer.value, False),
            "strides": (row_floats * 4, 4), "version": 3, "stream": 1,  # ready on the legacy default stream
        }

    def __del__(self):
        if self.pointer.value:
            self._cuda.cuMemFree_v2(self.pointer)


def source():
    """'torch', 'driver' or None: where the tests' device memory comes from."""
    if torch.cuda.is_available():
        return "torch"
    return "driver" if DriverRows.driver() is not None else None


def on_device(rows, row_floats=None):
    """`rows` (a float32 NumPy array) copied to device memory, as verify() takes it."""
    if source() == "torch":
        rows = torch.from_numpy(np.ascontiguousarray(rows, np.float32))
        if row_floats:
            wide = torch.zeros(rows.shape[0], row_floats)
            wide[:, :rows.shape[1]] = rows
            return wide.cuda()[:, :rows.shape[1]]
        return rows.cuda()
    return DriverRows(rows, row_floats)
