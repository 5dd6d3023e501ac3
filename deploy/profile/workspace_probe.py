"""Measured workspace of step models: the bytes a step allocates while it runs beyond its
bound inputs, outputs and weights (TASO's per-primitive memory, Wen et al. 2020 Sec. 2.3).

How (Linux): a child process with glibc's mmap threshold fixed at 16 KiB
(MALLOC_MMAP_THRESHOLD_, so every larger block is fresh pages and returned at free) builds
each session (weights and their packing belong to the weights, not the workspace), runs it
once on the main thread (code pages), then resets the peak resident set
(`/proc/self/clear_refs` 5) and runs it once on a fresh thread, reporting VmHWM minus the
VmRSS before that run: the least of 3 such runs, less the same figure for a trivial step
(the fresh thread's stack and ONNX Runtime's per-run bookkeeping). A fresh thread because ONNX Runtime's MLAS keeps a convolution's
working buffer thread-local across calls: a warmed thread would hide it. One intra-op
thread (with T threads MLAS keeps one such buffer per thread). Sessions run without ONNX
Runtime's arena and memory patterns, so every intermediate and kernel buffer is a real
allocation; page granularity (4 KiB) and blocks under 16 KiB from the heap make it a lower
bound for tiny steps.

The same child also measures each step's session state: the heap bytes
(glibc's mallinfo2) that building its session and running it once keep, less its weights (the deployment
hands those in once, deploy/ort/backend.py) — the graph, kernels and plans every loaded
step model holds for the whole run, which no buffer or workspace figure counts (with
hundreds of part models, 6.5 MiB of MobileNetV2's least-memory deployment).

The one workspace probe of the project: `explore profile` uses it for every layer's
whole and part step (deploy/profile/layers.py) and for every primitive (deploy/profile/primitives.py).

Usage (internal): python -m deploy.profile.workspace_probe JOBS.json OUT.json
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from deploy.ort.providers import CPU, NCHW_ONLY
from deploy.runtime.child import child_env
from deploy.runtime.footprint import HeapMeter

THRESHOLD = 16384
REPEATS = 3                 # fresh-thread runs per step; the least peak is kept


@dataclass(frozen=True)
class PortSpec:
    """An array the probe binds to a port: int32 `values` passed by value (a part's row
    slots and mask), any other array by its shape and element type (ones in, zeros out)."""
    shape: tuple[int, ...]
    dtype: str = "float32"
    values: tuple[int, ...] | None = None

    @classmethod
    def of(cls, v: np.ndarray) -> PortSpec:
        if v.dtype == np.int32:
            return cls(tuple(v.shape), "int32", tuple(int(x) for x in v.reshape(-1)))
        return cls(tuple(v.shape), str(v.dtype))

    def array(self, fill: int = 1) -> np.ndarray:
        if self.values is not None:
            return np.asarray(self.values, np.int32).reshape(self.shape)
        return np.full(self.shape, fill, self.dtype)


@dataclass(frozen=True)
class ProbeJob:
    """One step model to probe: its path, how its session is built (`mode`, see `job`), the
    arrays bound to its ports, the thread count, and `held`: the heap its session kept in
    the deployment that ran it, where that was measured (deploy/profile/deployed_forms.py),
    which deploy/profile/bands.py counts instead of the probe's session state."""
    model: str
    mode: str
    inputs: dict[str, PortSpec]
    outputs: dict[str, PortSpec]
    threads: int = 1
    held: int | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProbeJob:
        """The job as the probe's child reads it back from JOBS.json."""
        fields = dict(data)
        ports = {side: {k: PortSpec(tuple(v.pop("shape")), **v) for k, v in fields.pop(side).items()}
                 for side in ("inputs", "outputs")}
        return cls(**fields, **ports)


def _status(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/self/status has no {key}")


def _in_use(meter: HeapMeter) -> int:
    heap = meter.in_use()
    return heap if heap is not None else _status("VmRSS")


def _weights(path: str) -> int:
    """Bytes of a model's weights: initializers of more than one element of a weight type
    (deploy/ort/weights.py is_weight: floats, and int8 weights behind a DequantizeLinear)."""
    import onnx
    from onnx import helper
    from deploy.ort.weights import is_weight
    model = onnx.load(path, load_external_data=False)
    types = [np.dtype(helper.tensor_dtype_to_np_dtype(t.data_type)) for t in model.graph.initializer]
    return sum(int(np.prod(t.dims)) * d.itemsize for t, d in zip(model.graph.initializer, types)
               if is_weight(d) and int(np.prod(t.dims)) > 1)


def _probe(job: ProbeJob) -> tuple[int, int]:
    """(workspace, session state) of one job, bytes."""
    import onnxruntime as ort
    weights = _weights(job.model)
    opts = ort.SessionOptions()
    opts.add_session_config_entry("session.disable_prepacking", "1")   # as deployed
    opts.enable_cpu_mem_arena = False
    opts.enable_mem_pattern = False
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    disabled = None
    source, values = job.model, {}
    if job.mode == "deployed":      # as OrtBackend loads its sessions' final forms,
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        source, values = handed_in(job.model, opts)     # weights handed in: not the session's
        weights = 0
    elif job.mode == "stripped":
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    else:
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        disabled = NCHW_ONLY if job.mode == "nchw" else None
        source = kept_casts_source(source)
    meter = HeapMeter()
    loaded = _in_use(meter)
    sess = ort.InferenceSession(source, opts, providers=CPU, disabled_optimizers=disabled)
    binding = sess.io_binding()
    keep = []
    for name, spec in job.inputs.items():
        arr = spec.array()
        keep.append(arr)
        binding.bind_input(name, "cpu", 0, arr.dtype, list(arr.shape), arr.ctypes.data)
    for name, spec in job.outputs.items():
        arr = spec.array(0)
        keep.append(arr)
        binding.bind_output(name, "cpu", 0, arr.dtype, list(arr.shape), arr.ctypes.data)
    sess.run_with_iobinding(binding)
    state = max(0, _in_use(meter) - loaded - weights - sum(a.nbytes for a in keep))
    peaks = []
    for _ in range(REPEATS):
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        before = _status("VmRSS")
        worker = threading.Thread(target=sess.run_with_iobinding, args=(binding,))
        worker.start()
        worker.join()
        peaks.append(max(0, _status("VmHWM") - before))
    return min(peaks), state


def kept_casts_source(path: str) -> str | bytes:
    """The model at `path` with its fp16 and int8 weights kept behind their Casts, as a
    deployment runs them (deploy/ort/optimize.py stored_low): each fp32 copy made in the step
    (its workspace), not folded by ONNX Runtime into an fp32 weight. Each such weight is listed
    as a graph input as well (an initializer that is also a graph input can be overridden
    at run time, so ONNX Runtime does not treat it as constant). The path itself when it
    has none."""
    import onnx
    from onnx import TensorProto, helper
    model = onnx.load(path)
    low = {t.name: t for t in model.graph.initializer
           if t.data_type in (TensorProto.FLOAT16, TensorProto.INT8)}
    declared = {v.name for v in model.graph.input}
    names = sorted({n.input[0] for n in model.graph.node
                    if n.op_type == "Cast" and n.input and n.input[0] in low} - declared)
    for name in names:
        model.graph.input.append(helper.make_tensor_value_info(name, low[name].data_type,
                                                               list(low[name].dims)))
    return model.SerializeToString() if names else path


def handed_in(path: str, opts) -> tuple[str, dict]:
    """A kept step form (deploy/profile/deployed_forms.py) made ready to load as OrtBackend
    loads a session: its weights read into arrays and handed to `opts` (add_initializer),
    the graph saved beside it. Returns (the graph's path, the OrtValues to keep alive)."""
    import onnx
    import onnxruntime as ort
    from deploy.ort.weights import external_arrays
    model = onnx.load(path, load_external_data=False)
    arrays = external_arrays(model, Path(path).parent)
    values = {n: ort.OrtValue.ortvalue_from_numpy(a) for n, a in arrays.items()}
    for name, value in values.items():
        opts.add_initializer(name, value)
    source = str(Path(path).with_suffix(".run.onnx"))
    onnx.save(model, source)
    return source, values


def _overhead() -> int:
    """What a fresh thread running a trivial step adds (its stack, ONNX Runtime's per-run
    bookkeeping): subtracted from every measurement."""
    import onnx
    from onnx import TensorProto, helper
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 1, 1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 1, 1])
    model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "t", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.onnx"
        onnx.save(model, str(path))
        one = PortSpec((1, 1, 1, 1))
        job = ProbeJob(str(path), "nchw", {"x": one}, {"y": one})
        return min(_probe(job)[0] for _ in range(3))


def available() -> bool:
    """Whether this system lets the probe reset a process's peak RSS (Linux >= 4.0)."""
    return os.path.exists("/proc/self/clear_refs") and os.path.exists("/proc/self/status")


def job(path: str | Path, mode: str, feeds: dict, fetches: dict, threads: int = 1) -> ProbeJob:
    """The probe job of step model `path` bound to arrays shaped like `feeds`/`fetches`
    (int32 feeds, such as a part's row slots and mask, are passed by value; an int8 step's
    uint8/int8 data by shape and type). `mode`:
    "nchw" (ONNX Runtime's NCHWc rewrite off), "nchwc" (on), "stripped" (an optimised,
    blocked model, run as it is), "deployed" (a session's final form as the backend loads it,
    deploy/profile/deployed_forms.py)."""
    return ProbeJob(str(path), mode, {k: PortSpec.of(v) for k, v in feeds.items()},
                    {k: PortSpec.of(v) for k, v in fetches.items()}, threads)


def measure(jobs: list[ProbeJob], sessions: bool = False) -> list:
    """Workspace bytes of each job, measured in one child process; `sessions`: (workspace,
    session state) pairs."""
    if not jobs:
        return []
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "jobs.json", Path(tmp) / "out.json"
        src.write_text(json.dumps([j.to_json() for j in jobs]))
        env = dict(os.environ, MALLOC_MMAP_THRESHOLD_=str(THRESHOLD), MALLOC_TRIM_THRESHOLD_="0")
        env = child_env(env)
        subprocess.run([sys.executable, "-m", "deploy.profile.workspace_probe", str(src), str(dst)],
                       env=env, check=True)
        pairs = json.loads(dst.read_text())
        return [tuple(p) for p in pairs] if sessions else [p[0] for p in pairs]


def main(argv: list[str]) -> int:
    jobs = [ProbeJob.from_json(j) for j in json.loads(Path(argv[0]).read_text())]
    if hasattr(os, "sched_setaffinity"):     # one CPU: the kernel's per-CPU RSS deltas in one place
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    base = _overhead()
    out = []
    for job in jobs:
        ws, state = _probe(job)
        out.append([max(0, ws - base), state])
    Path(argv[1]).write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    from sdf3.parent_death import die_with_parent
    die_with_parent()          # ends with the explore that started it (child_env)
    sys.exit(main(sys.argv[1:]))
