"""ONNX Runtime's process-wide state for step sessions: one CPU arena and one intra-op
thread pool that every step session of a process shares (deploy/ort/backend.py opts its
sessions in). Set once per process, before the first session that uses them."""
from __future__ import annotations

import os

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper


# The shared arena's first chunk (`arena_chunk`): four times the plan's measured workspace,
# at least 8 MiB. Address space more than memory: pages a step never touches are never
# resident and best fit keeps reusing the chunk's low addresses, so the resident workspace
# is what the largest step needs. Grown by powers of two from a small first chunk, it was
# the sum of the chunks the growth made. Measured on a MobileNetV2 plan whose largest step
# needs 3.3 MiB (`explore run --threads 1`): workspace 7.6 MiB with ORT's 1 MiB first
# chunk, 5.1 MiB with a first chunk of 4, 6 or 128 MiB alike; YOLOv2-16's least-memory
# plan 16.6 MiB (28.0 with ORT's chunks). Not much larger: ORT's arena keeps 1/32 of a
# chunk as bookkeeping (a 128 MiB chunk: 4 MiB more resident at init).
ARENA_CHUNK_MIN = 8 << 20


def arena_chunk(workspace_bytes: int) -> int:
    """First chunk of the shared arena for a plan whose steps need `workspace_bytes`."""
    need = -(-4 * int(workspace_bytes or 0) // (1 << 20)) << 20
    return max(ARENA_CHUNK_MIN, need)


class OrtProcess:
    """ONNX Runtime's process-wide state for step sessions: whether the shared CPU arena is
    registered (and its first chunk) and the size of the global intra-op thread pool. ORT
    registers both once per process and cannot take them back, so the process has exactly
    one of these, `PROCESS` below; it records what was set so that nothing sets it twice
    and later sessions (step and reference sessions) know whether to use it."""

    def __init__(self):
        self.arena_first_chunk = ARENA_CHUNK_MIN
        self.arena: bool | None = None         # None: not asked yet; False: ORT refused it
        self.pool_threads: int | None = None   # None: not asked yet; 0: ORT refused it

    def plan_arena(self, workspace_bytes: int) -> None:
        """Size the shared arena's first chunk for a plan whose steps need `workspace_bytes`;
        effective only before the arena is registered (the process's first step session)."""
        if self.arena is None:
            self.arena_first_chunk = arena_chunk(workspace_bytes)

    def shared_arena(self) -> bool:
        """One CPU memory arena for every step session that opts in, registered once per
        process. With an arena per session, each of the hundreds of step sessions keeps the
        peak of its own intermediates (reordered NCHWc copies of its input and output) for
        good; shared, they reuse one region sized by the largest step, which also stays in
        cache. Measured on MobileNetV2 reuse-only (2 cores): peak RSS 250 -> 194 MB, frame
        7.9 -> 6.6 ms. Only sessions that set session.use_env_allocators use it, so this
        changes no other session of the process. MEMTRADE_ORT_SHARED_ARENA=0 turns it off."""
        if os.environ.get("MEMTRADE_ORT_SHARED_ARENA", "1") == "0":
            return False
        if self.arena is None:
            try:
                info = ort.OrtMemoryInfo("Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0,
                                         ort.OrtMemType.DEFAULT)
                # max_mem 0: no cap; extend by powers of two (-1: ORT's default) from one first
                # chunk (arena_chunk); -1: ORT's default dead bytes per chunk
                ort.create_and_register_allocator(
                    info, ort.OrtArenaCfg(0, -1, self.arena_first_chunk, -1))
                self.arena = True
            except (AttributeError, RuntimeError, ort.capi.onnxruntime_pybind11_state.Fail):
                self.arena = False
        return self.arena

    def shared_pool(self, threads: int) -> bool:
        """One intra-op thread pool for all step sessions of the process (set once). With a
        pool per session, the hundreds of sessions' idle workers spin against each other:
        measured on MobileNetV2 (2 cores) 64 fps with per-session pools, 84 with one pool.
        It changes every later session of the process (they must then use the global pool),
        so only whole-process runners ask for it (`explore run`, the benchmark), never the
        library by default. MEMTRADE_ORT_SHARED_POOL=0 turns it off."""
        if os.environ.get("MEMTRADE_ORT_SHARED_POOL", "1") == "0":
            return False
        if self.pool_threads is None:
            size = threads or os.cpu_count() or 1
            try:
                from onnxruntime.capi import _pybind_state
                _pybind_state.set_global_thread_pool_sizes(size, 1)
                self.pool_threads = size
            except (ImportError, AttributeError, RuntimeError):
                self.pool_threads = 0
        return self.pool_threads > 0


PROCESS = OrtProcess()      # this process's ONNX Runtime state (see OrtProcess)


def session_options(threads: int, shared_pool: bool, arena: bool = True) -> ort.SessionOptions:
    """A step session's options: optimised, sequential, in the shared arena and thread pool
    when the process has them (`arena` False: no ORT memory arena, as the workspace probe
    needs), else with `threads` intra-op threads of its own."""
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    if not arena:
        opts.enable_cpu_mem_arena = False
    elif PROCESS.shared_arena():
        opts.add_session_config_entry("session.use_env_allocators", "1")
    if shared_pool and PROCESS.shared_pool(threads):
        opts.use_per_session_threads = False
    else:
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
    return opts


def form_options(threads: int, shared_pool: bool, arena: bool = True,
                 prepack: bool = False) -> ort.SessionOptions:
    """The options of a session running a step's final form (ONNX Runtime's graph already
    optimised on this machine): no further optimisation, and no pre-packing unless `prepack`,
    since a pre-packed copy is a second copy of the weights (deploy/ort/backend.py says when
    a step pre-packs)."""
    opts = session_options(threads, shared_pool, arena)
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.add_session_config_entry("session.disable_prepacking", "0" if prepack else "1")
    return opts


def init_runtime(threads: int = 0, shared_pool: bool = False, workspace_bytes: int = 0) -> None:
    """ONNX Runtime's one-time initialisation in this process (environment, CPU kernel
    registry, the shared arena and thread pool when asked): a one-node session built, run
    and dropped. Measured here at 8.0 MiB of RSS whatever the model, so footprints are read
    after it (deploy/runtime/footprint.py reports it apart as runtime_init_bytes).
    `workspace_bytes`: the plan's measured workspace, which sizes the shared arena's first
    chunk (arena_chunk) when this registers it."""
    PROCESS.plan_arena(workspace_bytes)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "init",
                                                [x], [y]), opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    sess = ort.InferenceSession(model.SerializeToString(), session_options(threads, shared_pool),
                                providers=["CPUExecutionProvider"])
    sess.run(None, {"x": np.zeros([1], np.float32)})
