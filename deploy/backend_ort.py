"""ONNX Runtime (CPU) backend: compile step models to sessions and bind them, once, to numpy
views of the arena with I/O binding, so a step is one `run_with_iobinding` and no copy.

Session choices (docs/deploy.md): one session per step model file, shared by every phase
that uses it; weights shared across a layer's variants through `add_initializer` (one copy
per layer); graph optimisations on (ORT_ENABLE_ALL); the CPU memory arena and memory
patterns on, so the few intermediates a step has inside ORT (a gathered window, a
transpose) are reused across runs; their size is reported as scratch bytes.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

NP_DTYPE = {"float32": np.float32, "float16": np.float16}


class OrtBackend:
    """Host arena + ONNX Runtime sessions. `threads`: intra-op threads per session
    (0 = ORT's default, one per core)."""

    name = "onnxruntime"

    def __init__(self, dtype: str = "float32", threads: int = 0, shared_pool: bool = False):
        self.dtype = np.dtype(NP_DTYPE[dtype])
        self.threads = threads
        self.shared_pool = shared_pool
        self._sessions: dict[str, ort.InferenceSession] = {}
        self._weights: dict[str, ort.OrtValue] = {}
        self._weight_arrays: dict[str, np.ndarray] = {}

    # -- memory -------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> np.ndarray:
        return np.zeros(max(int(nbytes), 1), np.uint8)

    def view(self, arena: np.ndarray, offset: int, shape: list[int], dtype=None) -> np.ndarray:
        dt = np.dtype(dtype) if dtype is not None else self.dtype
        count = int(np.prod(shape))
        return arena[offset: offset + count * dt.itemsize].view(dt).reshape(shape)

    # -- compile ------------------------------------------------------------------------
    def _options(self) -> ort.SessionOptions:
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        if self.shared_pool and _shared_pool(self.threads):
            opts.use_per_session_threads = False
        else:
            opts.intra_op_num_threads = self.threads
            opts.inter_op_num_threads = 1
        return opts

    def load(self, path: str | Path) -> ort.InferenceSession:
        key = str(path)
        if key not in self._sessions:
            model = onnx.load(key)
            opts = self._options()
            for init in model.graph.initializer:
                if init.name.startswith("param:"):
                    wkey = f"{Path(key).parent.name}/{init.name}"   # models/<cnn>/...
                    if wkey not in self._weights:
                        arr = np.ascontiguousarray(numpy_helper.to_array(init))
                        self._weight_arrays[wkey] = arr
                        self._weights[wkey] = ort.OrtValue.ortvalue_from_numpy(arr)
                    # overrides the model's copy: every variant of a layer uses one buffer
                    opts.add_initializer(init.name, self._weights[wkey])
            self._sessions[key] = ort.InferenceSession(
                model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        return self._sessions[key]

    def bind(self, session: ort.InferenceSession, inputs: dict[str, np.ndarray],
             outputs: dict[str, np.ndarray]) -> Callable[[], None]:
        """A call that runs `session` reading and writing exactly these arrays."""
        binding = session.io_binding()
        for name, arr in inputs.items():
            binding.bind_input(name, "cpu", 0, arr.dtype, list(arr.shape), arr.ctypes.data)
        for name, arr in outputs.items():
            binding.bind_output(name, "cpu", 0, arr.dtype, list(arr.shape), arr.ctypes.data)
        options = ort.RunOptions()
        # The C++ session's run_with_iobinding, not the Python wrapper: the wrapper adds
        # ~45 us of Python per call (graph-capture bookkeeping) against ~3 us for the call
        # itself, measured on a Relu model; a by-parts frame makes thousands of calls.
        inner = getattr(session, "_sess", None)
        if inner is not None and hasattr(inner, "run_with_iobinding") and hasattr(binding, "_iobinding"):
            run, handle = inner.run_with_iobinding, binding._iobinding
        else:   # pragma: no cover - other onnxruntime versions
            run, handle = session.run_with_iobinding, binding

        def call() -> None:
            run(handle, options)
        return call

    def param_bytes(self) -> int:
        """Bytes of the weights the sessions hold (one copy per layer, shared by variants)."""
        return int(sum(a.nbytes for a in self._weight_arrays.values()))


_POOL: dict[str, int] = {}


def _shared_pool(threads: int) -> bool:
    """One intra-op thread pool for all step sessions of the process (set once). With a
    pool per session, the hundreds of sessions' idle workers spin against each other:
    measured on MobileNetV2 (2 cores) 64 fps with per-session pools, 84 with one pool.
    It changes every later session of the process (they must then use the global pool), so
    only whole-process runners ask for it (`explore run`, the benchmark), never the library
    by default. MEMTRADE_ORT_SHARED_POOL=0 turns it off."""
    if os.environ.get("MEMTRADE_ORT_SHARED_POOL", "1") == "0":
        return False
    size = threads or os.cpu_count() or 1
    if "size" not in _POOL:
        try:
            from onnxruntime.capi import _pybind_state
            _pybind_state.set_global_thread_pool_sizes(size, 1)
        except (ImportError, AttributeError, RuntimeError):
            _POOL["size"] = 0
            return False
        _POOL["size"] = size
    return _POOL["size"] > 0
