"""ONNX Runtime (CPU) backend: compile step models to sessions and bind them, once, to numpy
views of the arena with I/O binding, so a step is one `run_with_iobinding` and no copy.

Session choices (docs/deploy.md): one session per step model file, shared by every phase
that uses it; weights shared across a layer's variants through `add_initializer` (one copy
per layer); graph optimisations on (ORT_ENABLE_ALL); the CPU memory arena and memory
patterns on, so the few intermediates a step has inside ORT (a gathered window, a
transpose, NCHWc reorders) are reused across runs, in one CPU arena shared by every step
session (`_shared_arena`). ONNX Runtime reports no arena statistics, so that arena is not in
`scratch_bytes`; the peak RSS that `explore run` reports includes it.

Layout (`layout="auto"`): ORT_ENABLE_ALL rewrites a Conv or pool into ONNX Runtime's blocked
NCHWc kernels with a reorder in and a reorder out. In one whole-graph session the reorders
happen once; in a step session they happen at every step, and for a 1x1 conv on a large
map they cost more than the blocked kernel saves (measured on MobileNetV2: features_2_expand
0.99 ms NCHWc vs 0.65 ms plain; features_2_dw 0.92 vs 1.25). "auto" builds the step both
ways on its bound arena views, times both and keeps the faster; "nchwc" and "nchw" force one.
Either way the step is the same ONNX model reading and writing the same arena regions.
"""
from __future__ import annotations

import os
import tempfile
import time
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

    def __init__(self, dtype: str = "float32", threads: int = 0, shared_pool: bool = False,
                 layout: str = "nchwc"):
        if layout not in LAYOUTS:
            raise ValueError(f"layout: expected one of {LAYOUTS}, got {layout!r}")
        self.dtype = np.dtype(NP_DTYPE[dtype])
        self.threads = threads
        self.shared_pool = shared_pool
        self.layout = layout
        self.chosen: dict[str, str] = {}     # model path -> layout kept ("auto")
        self._sessions: dict[str, ort.InferenceSession] = {}
        self._weights: dict[str, ort.OrtValue] = {}
        self._weight_arrays: dict[str, np.ndarray] = {}
        self._blocked: dict[str, frozenset[str]] = {}   # model path -> ports stored blocked
        self._optimized: dict[str, onnx.ModelProto] = {}
        self._blocked_weights: dict[str, int] = {}      # model path -> bytes of its weights
        self.blocked_edges: set[str] = set()

    # -- storage formats ----------------------------------------------------------------
    def prepare(self, manifest: dict, root: str | Path) -> None:
        """layout "blocked": choose the edges held in ONNX Runtime's NCHWc layout
        (deploy/ort_blocked.py); the other steps run as with "auto"."""
        if self.layout != "blocked":
            return
        from deploy import ort_blocked as ob
        root = Path(root)
        block = ob.block_size(self._options())
        models = {s["model"] for part in manifest["partitions"] for s in part["steps"]
                  if s["model"] and any(b["kind"] == "edge" and
                                        manifest["edges"][b["edges"][0]]["layout"] == "nchw"
                                        for b in s["bind"])}
        with tempfile.TemporaryDirectory() as work:
            optimized = {rel: ob.optimized(root / rel, work, self._options()) for rel in sorted(models)}
        forms = {rel: ob.step_form(opt, onnx.load(str(root / rel)))
                 for rel, opt in optimized.items()}
        self.blocked_edges = ob.choose(manifest, forms, block)
        for part in manifest["partitions"]:
            for step in part["steps"]:
                ports = ob.blocked_ports(step, self.blocked_edges) if step["model"] else None
                if ports:
                    self._blocked[str(root / step["model"])] = ports
                    self._optimized[str(root / step["model"])] = optimized[step["model"]]

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
        if _shared_arena():
            opts.add_session_config_entry("session.use_env_allocators", "1")
        if self.shared_pool and _shared_pool(self.threads):
            opts.use_per_session_threads = False
        else:
            opts.intra_op_num_threads = self.threads
            opts.inter_op_num_threads = 1
        return opts

    def load(self, path: str | Path):
        """A compiled step model. With layout "auto" the choice is made at the first bind,
        where the step's real arena views are known (see `bind`)."""
        key = str(path)
        if key in self._blocked:
            return self._blocked_session(key)
        if self.layout in ("auto", "blocked"):
            return _Pending(key) if key not in self.chosen else self._session(key, self.chosen[key])
        return self._session(key, self.layout)

    def _session(self, key: str, layout: str) -> ort.InferenceSession:
        skey = f"{layout}:{key}"
        if skey not in self._sessions:
            model = onnx.load(key)
            opts = self._options()
            shareable = _weight_inputs(model)
            for init in model.graph.initializer:
                if init.name.startswith("param:"):
                    wkey = f"{Path(key).parent.name}/{init.name}"   # models/<cnn>/...
                    if wkey not in self._weight_arrays:
                        arr = np.ascontiguousarray(numpy_helper.to_array(init))
                        self._weight_arrays[wkey] = arr
                    if init.name not in shareable:   # stays in the model (see _weight_inputs)
                        continue
                    if wkey not in self._weights:
                        self._weights[wkey] = ort.OrtValue.ortvalue_from_numpy(self._weight_arrays[wkey])
                    # overrides the model's copy: every variant of a layer uses one buffer
                    opts.add_initializer(init.name, self._weights[wkey])
            disabled = ["NchwcTransformer"] if layout == "nchw" else None
            self._sessions[skey] = ort.InferenceSession(
                model.SerializeToString(), opts, providers=["CPUExecutionProvider"],
                disabled_optimizers=disabled)
        return self._sessions[skey]

    def _blocked_session(self, key: str) -> ort.InferenceSession:
        skey = f"blocked:{key}"
        if skey not in self._sessions:
            from deploy import ort_blocked as ob
            model = ob.strip(self._optimized.pop(key), self._blocked[key])
            self._blocked_weights[key] = sum(numpy_helper.to_array(i).nbytes
                                             for i in model.graph.initializer)
            opts = self._options()
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
            self._sessions[skey] = ort.InferenceSession(
                model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        return self._sessions[skey]

    def _tune(self, key: str, inputs, outputs) -> ort.InferenceSession:
        """Build the step both ways on its own views, keep the faster (best of 5 calls
        after 2 warm-ups each); the slower session is dropped before the next is built."""
        best, best_t = None, float("inf")
        for layout in ("nchwc", "nchw"):
            session = self._session(key, layout)
            call = self._bind(session, inputs, outputs)
            for _ in range(2):
                call()
            t = min(_timed(call) for _ in range(5))
            if t < best_t * (0.95 if layout == "nchw" else 1.0):  # plain only if clearly faster
                if best is not None:
                    self._sessions.pop(f"{best}:{key}", None)
                best, best_t = layout, t
            else:
                self._sessions.pop(f"{layout}:{key}", None)
        self.chosen[key] = best
        return self._sessions[f"{best}:{key}"]

    def bind(self, session, inputs: dict[str, np.ndarray],
             outputs: dict[str, np.ndarray]) -> Callable[[], None]:
        """A call that runs `session` reading and writing exactly these arrays."""
        if isinstance(session, _Pending):
            key = session.path
            session = (self._session(key, self.chosen[key]) if key in self.chosen
                       else self._tune(key, inputs, outputs))
        return self._bind(session, inputs, outputs)

    def _bind(self, session: ort.InferenceSession, inputs: dict[str, np.ndarray],
              outputs: dict[str, np.ndarray]) -> Callable[[], None]:
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
        return int(sum(a.nbytes for a in self._weight_arrays.values())
                   + sum(self._blocked_weights.values()))


LAYOUTS = ("nchwc", "nchw", "auto", "blocked")
WEIGHT_OPS = {"Conv", "Gemm"}


def _weight_inputs(model: onnx.ModelProto) -> set[str]:
    """Initializers read only by Conv and Gemm: the weights shared across a layer's variants
    with `add_initializer`. Constants of elementwise ops stay in their models: ONNX Runtime
    1.x's transpose optimiser, moving a part model's Transpose past an Add or Mul, leaves an
    overridable initializer untransposed, and the step then computes a wrongly broadcast
    tensor (an Add of a [1, C, 1, 1] constant by parts gave [1, C, C, W] instead of
    [1, 1, C, W]; tests/test_deploy_parts_ops.py)."""
    readers: dict[str, set[str]] = {}
    for node in model.graph.node:
        for name in node.input:
            readers.setdefault(name, set()).add(node.op_type)
    return {name for name, ops in readers.items() if ops <= WEIGHT_OPS}


class _Pending:
    """A step model whose layout is chosen when it is first bound ("auto")."""

    def __init__(self, path: str):
        self.path = path


def _timed(call: Callable[[], None]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


_ARENA: dict[str, bool] = {}


def _shared_arena() -> bool:
    """One CPU memory arena for every step session that opts in, registered once per
    process. With an arena per session, each of the hundreds of step sessions keeps the
    peak of its own intermediates (reordered NCHWc copies of its input and output) for
    good; shared, they reuse one region sized by the largest step, which also stays in
    cache. Measured on MobileNetV2 reuse-only (2 cores): peak RSS 250 -> 194 MB, frame
    7.9 -> 6.6 ms. Only sessions that set session.use_env_allocators use it, so this
    changes no other session of the process. MEMTRADE_ORT_SHARED_ARENA=0 turns it off."""
    if os.environ.get("MEMTRADE_ORT_SHARED_ARENA", "1") == "0":
        return False
    if "ok" not in _ARENA:
        try:
            info = ort.OrtMemoryInfo("Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0,
                                     ort.OrtMemType.DEFAULT)
            # max_mem 0: no cap; -1: ORT's defaults (extend by powers of two, chunk sizes)
            ort.create_and_register_allocator(info, ort.OrtArenaCfg(0, -1, -1, -1))
            _ARENA["ok"] = True
        except (AttributeError, RuntimeError, ort.capi.onnxruntime_pybind11_state.Fail):
            _ARENA["ok"] = False
    return _ARENA["ok"]


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
