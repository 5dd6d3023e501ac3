"""The unmodified model: a plain ONNX Runtime session on the original ONNX file, the yardstick
for both the deployed outputs and the deployed fps.

At a plan's precision (`session(..., dtype="float16", weights=...)`) the unmodified network
rounds where an fp16 deployment rounds: computed in fp32 with every tensor the deployment
stores rounded to fp16 and the weights it stores in fp16 or int8 as it holds them
(deploy/checks/rounding.py), so fp16 rounding is not blamed on the plan
(deploy/run/verdict.py). A model stored in fp16 itself (`stored_dtype`) runs as ONNX Runtime
runs it, in fp16, converted by ONNX Runtime's own converter (onnxruntime.transformers.float16,
inputs and outputs kept fp32).
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnxruntime as ort

from deploy.ort.providers import CPU
from sdf3.errors import InputError


def session(path: str | Path, threads: int = 0, dtype: str = "float32",
            weights: str = "float32", plain: bool = False) -> ort.InferenceSession:
    """A session on the model at `path`, computing in `dtype` (float32 or float16), with its
    weights as a deployment storing them as `weights` computes with them (float16, int8:
    deploy/checks/rounding.py `with_held_weights`; a model stored in fp16 keeps its own).
    `plain`: ONNX Runtime's graph optimizations off (ORT_DISABLE_ALL), so every node runs as
    its own NCHW kernel (a Conv through im2col and GEMM, BatchNorm and activations apart)
    instead of the fused NCHWc kernels: the same network with its sums taken in another
    order, the second correct computation the fp32 verdict measures rounding by
    (deploy/run/verdict.py)."""
    if not Path(path).is_file():
        raise InputError(f"{path}: reference model not found")
    from deploy.ort.process import PROCESS
    opts = ort.SessionOptions()
    opts.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_DISABLE_ALL if plain
                                     else ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
    opts.log_severity_level = 3     # errors only: an exported model's unused initializers are
    #                                 a warning line each, which is not the run's business
    if PROCESS.pool_threads:        # the process has ORT's global pool: the same threads, shared
        opts.use_per_session_threads = False
    else:
        opts.intra_op_num_threads = threads
    source = str(path)
    full = (dtype == "float16" or weights != "float32") and stored_dtype(path) == "float32"
    rounds = dtype == "float16" and full
    try:
        if rounds or (full and weights != "float32"):
            import onnx
            from csdf.onnx_import import load_onnx
            from deploy.checks import rounding
            model = onnx.load(source)
            cnn = load_onnx(path, "reference")
            if weights != "float32":
                model, _ = rounding.with_held_weights(model, cnn, weights)
            if rounds:
                model = rounding.rounded(model, rounding.stored_tensors(path, model, cnn))
            source = model.SerializeToString()
        elif dtype == "float16":
            from onnxruntime.transformers.float16 import convert_float_to_float16
            import onnx
            source = convert_float_to_float16(onnx.load(source), keep_io_types=True).SerializeToString()
        return ort.InferenceSession(source, opts, providers=CPU)
    except Exception as err:     # a damaged reference file: onnx's DecodeError, ORT's Fail, ...
        raise refused(path, "ONNX Runtime cannot load it", err) from None


def refused(path: str | Path, what: str, err: BaseException) -> InputError:
    """One line for a reference model that cannot be read or run (a damaged deployment)."""
    reason = " ".join(str(err).split())[:300] or type(err).__name__
    return InputError(f"reference model {path}: {what}: {reason} (the deployment is damaged "
                      f"or was edited; deploy it again)")


def stored_dtype(path: str | Path) -> str:
    """"float16" when the model at `path` computes in fp16, else "float32": its graph
    outputs are fp16 (a model converted whole to half precision, `model.half()` exported),
    or most of its floating weights are (a converter's `keep_io_types`: fp32 input and
    output around an fp16 network, ONNX Runtime then computes the network in fp16)."""
    import onnx
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as err:     # DecodeError, OSError
        raise refused(path, "not a readable ONNX model", err) from None
    half, full = onnx.TensorProto.FLOAT16, onnx.TensorProto.FLOAT
    if half in {o.type.tensor_type.elem_type for o in model.graph.output}:
        return "float16"
    from csdf.onnx_consts import constant_tensors
    tensors = constant_tensors(model.graph).values()
    count = {half: 0, full: 0}
    for t in tensors:          # dims and type only: external data is never read
        if t.data_type in count:
            count[t.data_type] += int(np.prod(list(t.dims), dtype=np.int64))
    return "float16" if count[half] > count[full] else "float32"


def run(sess: ort.InferenceSession, frame: np.ndarray) -> list[np.ndarray]:
    """Outputs for one NCHW frame, each padded to 4-D like the CNN model's shapes."""
    inp = sess.get_inputs()[0]
    dims = [d if isinstance(d, int) and d > 0 else 1 for d in inp.shape]
    feed = frame.reshape(dims) if np.prod(dims) == frame.size else frame
    try:
        outs = sess.run(None, {inp.name: feed.astype(_NP.get(inp.type, np.float32))})
    except Exception as err:     # a reference replaced by another network (another input)
        raise InputError(f"reference model: ONNX Runtime cannot run it on a frame of shape "
                         f"{list(frame.shape)}: {' '.join(str(err).split())[:300]}") from None
    outs = [np.asarray(o).astype(np.float32) for o in outs]
    return [o.reshape(o.shape + (1,) * (4 - o.ndim)) if o.ndim < 4 else o for o in outs]


_NP = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64}


def plain_frames(path: str | Path, frames: int) -> list[np.ndarray]:
    """The frames `plain_timings` runs, made before a footprint's baseline (a deployment's
    frames are made before its own): the model's input shape read from the file, no weights."""
    import onnx
    graph = onnx.load(str(path), load_external_data=False).graph
    weights = {t.name for t in graph.initializer}
    port = next(i for i in graph.input if i.name not in weights)
    shape = [d.dim_value or 1 for d in port.type.tensor_type.shape.dim]
    return _frames(shape, frames)


def _frames(shape: list[int], frames: int) -> list[np.ndarray]:
    return [np.random.default_rng(i).standard_normal(shape, dtype=np.float32) for i in range(frames)]


def plain_fps(sess: ort.InferenceSession, frames: int, warmup: int = 3) -> float:
    """Frames per second of a plain session on seeded random frames: the baseline every
    deployment benchmark compares against, measured the same way in each."""
    return plain_timings(sess, frames, warmup)["fps"]


def plain_timings(sess: ort.InferenceSession, frames: int, warmup: int = 3,
                  data: list[np.ndarray] | None = None,
                  after_run: Callable[[], None] | None = None) -> dict[str, float]:
    """`fps` (frames over elapsed time) and the medians per frame of wall and of this
    thread's CPU time (`frame_ms_median`, `frame_cpu_ms_median`), as deploy.run.measure reports
    them for a deployment. `data`: the frames (plain_frames), else made here. `after_run`:
    called once the frames have run, before the medians (a footprint's `ran`, as
    deploy.run.measure reads it: numpy's median is the measurement's memory)."""
    import time
    if data is None:
        data = _frames([d if isinstance(d, int) else 1 for d in sess.get_inputs()[0].shape], frames)
    for f in data[:warmup]:
        run(sess, f)
    walls, cpus = [], []
    start = time.perf_counter()
    for f in data:
        wall, cpu = time.perf_counter(), time.thread_time()
        run(sess, f)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.thread_time() - cpu)
    elapsed = time.perf_counter() - start
    if after_run is not None:
        after_run()
    return {"fps": frames / elapsed, "frame_ms_median": float(np.median(walls)) * 1e3,
            "frame_cpu_ms_median": float(np.median(cpus)) * 1e3}
