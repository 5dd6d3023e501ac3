"""The CUDA side of the board runner: the guarded `tensorrt` import (None where it is not
installed), the arena alignment, the TensorRT major version, the few CUDA runtime calls
(libcudart through ctypes) and the TensorRT logger.

Part of the standalone runner (board_runner.py and its trt_*.py modules, copied beside a
deployment): Python 3.6 compatible, imports nothing of memtrade.
"""
import ctypes
import ctypes.util

import numpy as np

try:
    import tensorrt as trt
except ImportError:  # the module stays importable for `explore` on machines without it
    trt = None

ALIGN = 256
H2D, D2H = 1, 2


def trt_major():
    return int(trt.__version__.split(".")[0]) if trt is not None else 0


class Cuda(object):
    """The few CUDA runtime calls needed, through ctypes."""

    def __init__(self):
        names = [ctypes.util.find_library("cudart"), "libcudart.so", "libcudart.so.12",
                 "libcudart.so.11.0", "libcudart.so.10.2"]
        self.lib = None
        for name in names:
            if not name:
                continue
            try:
                self.lib = ctypes.CDLL(name)
                break
            except OSError:
                continue
        if self.lib is None:
            raise RuntimeError("libcudart not found (install the CUDA runtime)")
        lib, vp, sz = self.lib, ctypes.c_void_p, ctypes.c_size_t
        lib.cudaMalloc.argtypes = [ctypes.POINTER(vp), sz]
        lib.cudaFree.argtypes = [vp]
        lib.cudaMemcpy.argtypes = [vp, vp, sz, ctypes.c_int]
        lib.cudaMemset.argtypes = [vp, ctypes.c_int, sz]
        lib.cudaStreamCreate.argtypes = [ctypes.POINTER(vp)]
        lib.cudaStreamSynchronize.argtypes = [vp]
        lib.cudaGetErrorString.restype = ctypes.c_char_p
        lib.cudaGetErrorString.argtypes = [ctypes.c_int]

    def check(self, code, what):
        if code != 0:
            msg = self.lib.cudaGetErrorString(code).decode()
            raise RuntimeError("CUDA %s failed: %s" % (what, msg))

    def malloc(self, nbytes):
        ptr = ctypes.c_void_p()
        self.check(self.lib.cudaMalloc(ctypes.byref(ptr), max(int(nbytes), ALIGN)), "cudaMalloc")
        self.check(self.lib.cudaMemset(ptr, 0, max(int(nbytes), ALIGN)), "cudaMemset")
        return ptr.value

    def free(self, ptr):
        self.lib.cudaFree(ctypes.c_void_p(ptr))

    def h2d(self, dst, arr):
        arr = np.ascontiguousarray(arr)
        self.check(self.lib.cudaMemcpy(ctypes.c_void_p(dst), arr.ctypes.data_as(ctypes.c_void_p),
                                       arr.nbytes, H2D), "cudaMemcpy H2D")

    def d2h(self, arr, src):
        self.check(self.lib.cudaMemcpy(arr.ctypes.data_as(ctypes.c_void_p), ctypes.c_void_p(src),
                                       arr.nbytes, D2H), "cudaMemcpy D2H")

    def stream(self):
        s = ctypes.c_void_p()
        self.check(self.lib.cudaStreamCreate(ctypes.byref(s)), "cudaStreamCreate")
        return s.value

    def sync(self, stream):
        self.check(self.lib.cudaStreamSynchronize(ctypes.c_void_p(stream)), "cudaStreamSynchronize")


def device_capsule(ptr):
    """A PyCapsule around a device pointer, for bindings that take `void*` as a capsule."""
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    return new(ptr, None, None)


def trt_logger():
    """TensorRT's logger, warnings and errors only."""
    return trt.Logger(trt.Logger.WARNING)
