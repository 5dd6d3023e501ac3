"""Measure a CNN's per-layer sensitivity table (explorer/plan/sensitivity.py) with ONNX Runtime,
and keep it in a cache on disk, as measured profiles are kept (docs/precision.md "Per layer").

For every tensor a deployment stores (the CNN's input and each layer's output,
deploy/quant/calibration.py `stored`) and each precision below fp32, one model is the fp32
network with that tensor alone rounded as a deployment at that precision stores it, and its
layer's weights as such a deployment holds them:
- fp16: a Cast to fp16 and back after the tensor (deploy/checks/rounding.py `rounded`), the
  layer's weights rounded to fp16 (`with_held_weights(..., only=[layer])`);
- int8: QuantizeLinear -> DequantizeLinear after the tensor with the uint8 scale and zero
  point ONNX Runtime's calibrator gives it on the same frames (deploy/quant/calibration.py
  `activation_scales`, the method `explore deploy --calibration-method` takes), the layer's
  weights as int8 per output channel (deploy/checks/quantized.py `held_weights(..., only=)`):
  what the int8 reference, and so the deployment, computes for that layer.
Each model runs on every calibration frame in one ONNX Runtime session; the row is the SQNR
of its output against the fp32 model's over all frames, 10 log10(sum x^2 / sum (y - x)^2) in
float64 sums as `explore run`'s vs_fp32 computes it (deploy/run/vs_fp32.py), the lowest over
the CNN's outputs.

ONNX Runtime's `quantize_static(nodes_to_quantize=...)` is not used for the int8 rows: it
quantizes a node's inputs, with its own weight and activation choices, where the deployment
rounds each layer's output and holds per-channel weights; the table measures the latter.

`SensitivityCache` keeps one JSON file per key: the model file's SHA-256, the frames' SHA-256
(shapes and bytes), the calibration method and the ONNX Runtime version. Another model,
other frames or another method is another key and is measured again.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import onnx

from csdf.model import CNN
from explorer.plan.sensitivity import Sensitivity
from sdf3.errors import InputError

LOWER = ("fp16", "int8")          # the precisions a row is measured for
FORMAT = 1                        # the cache file's layout


def frames_digest(frames: Sequence[np.ndarray]) -> str:
    """SHA-256 of the frames' shapes and float32 bytes, in order."""
    h = hashlib.sha256()
    for f in frames:
        a = np.ascontiguousarray(f, np.float32)
        h.update(repr(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()


def table_key(model_path: str | Path, frames: Sequence[np.ndarray], method: str) -> str:
    """The key a table is measured and cached under (module docstring)."""
    from importlib.metadata import version

    from deploy.checks.files import digest
    parts = [f"format={FORMAT}", f"model={digest(Path(model_path))}",
             f"frames={frames_digest(frames)}", f"method={method}",
             f"onnxruntime={version('onnxruntime')}"]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def measure(model_path: str | Path, cnn: CNN, frames: Sequence[np.ndarray], method: str = "minmax",
            threads: int = 1, progress: Callable[[str], None] | None = None) -> Sensitivity:
    """The sensitivity table of `cnn` (csdf's import of the model at `model_path`) on
    `frames` (each the CNN's one input, NCHW float32), int8 scales by calibration `method`."""
    from deploy.checks.quantized import held_weights
    from deploy.checks.rounding import rounded, with_held_weights
    from deploy.quant.calibration import activation_scales, stored
    from csdf.onnx_inputs import with_shapes

    if cnn.quantized is not None:
        raise InputError(f"{model_path}: a quantized (QDQ) model has no fp32 form to measure "
                         f"layers' sensitivity against; give the fp32 model")
    frames = [np.ascontiguousarray(f, np.float32) for f in frames]
    if not frames:
        raise InputError(f"{model_path}: no frames to measure the sensitivity table on")
    model = onnx.load(str(model_path))
    with_shapes(model, dict(cnn.input_shapes))
    tensors = stored(cnn, model)                      # ONNX tensor -> layer
    scales = activation_scales(model_path, cnn, frames, method=method)
    want = outputs(model, frames, threads)
    rows = []
    for tensor, layer in tensors.items():
        for precision in LOWER:
            if progress is not None:
                progress(f"sensitivity: {cnn.name}.{layer} at {precision}")
            if precision == "fp16":
                variant, _ = with_held_weights(model, cnn, "float16", only=[layer])
                variant = rounded(variant, [tensor])
            else:
                variant = held_weights(model, cnn, only=[layer])
                variant = _quantized(variant, tensor, scales.of(cnn.name, layer), scales.dtype)
            rows.append((layer, precision, sqnr_db(outputs(variant, frames, threads), want)))
    return Sensitivity(tuple(sorted(rows)), table_key(model_path, frames, method), len(frames))


def sqnr_db(got: Sequence[Sequence[np.ndarray]], want: Sequence[Sequence[np.ndarray]]) -> float:
    """The lowest over outputs of 10 log10(sum x^2 / sum (y - x)^2) over all frames, x the
    fp32 outputs `want` and y `got` (per frame, per output); infinite when they are equal."""
    lowest = math.inf
    for k in range(len(want[0]) if want else 0):
        signal = sum(float(np.sum(np.square(w[k].astype(np.float64)))) for w in want)
        noise = sum(float(np.sum(np.square(g[k].astype(np.float64) - w[k].astype(np.float64))))
                    for g, w in zip(got, want))
        if noise > 0:
            lowest = min(lowest, -math.inf if signal == 0 else 10 * math.log10(signal / noise))
    return lowest


def _quantized(model: onnx.ModelProto, tensor: str, scale, dtype: str) -> onnx.ModelProto:
    """`model` with `tensor` through QuantizeLinear -> DequantizeLinear at `scale`."""
    from onnx import helper, numpy_helper

    from deploy.checks.rounding import rounded
    np_type = {"uint8": np.uint8, "int8": np.int8}[dtype]
    inits = []

    def trip(t: str, src: str, dst: str) -> list[onnx.NodeProto]:
        s, z = dst + "_scale", dst + "_zero_point"
        inits.extend([numpy_helper.from_array(np.array(scale.scale, np.float32), s),
                      numpy_helper.from_array(np.array(scale.zero_point, np_type), z)])
        return [helper.make_node("QuantizeLinear", [src, s, z], [dst + "_q"]),
                helper.make_node("DequantizeLinear", [dst + "_q", s, z], [dst])]

    out = rounded(model, [tensor], trip=trip)
    out.graph.initializer.extend(inits)
    return out


def outputs(model: onnx.ModelProto, frames: Sequence[np.ndarray], threads: int = 1) -> list[list[np.ndarray]]:
    """Every output of `model` for each frame, one ONNX Runtime session."""
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    port = sess.get_inputs()[0].name
    return [[np.asarray(o, np.float32) for o in sess.run(None, {port: f})] for f in frames]


@dataclass(frozen=True)
class Lookup:
    """A table and whether it came from the cache (False: measured now and stored)."""
    table: Sensitivity
    cached: bool
    path: Path


class SensitivityCache:
    """Sensitivity tables on disk under `directory`, one file per key
    (`sensitivity-<key>.json`), written whole (a temporary sibling renamed over the entry)."""

    def __init__(self, directory: str | Path):
        self.directory = Path(directory)

    def path(self, key: str) -> Path:
        return self.directory / f"sensitivity-{key}.json"

    def get(self, key: str) -> Sensitivity | None:
        """The table under `key`; None when there is none (or it is unreadable: measured again)."""
        try:
            data = json.loads(self.path(key).read_text())
            table = Sensitivity.from_dict(data)
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return table if table.key == key else None

    def put(self, table: Sensitivity) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        target = self.path(table.key)
        fd, tmp = tempfile.mkstemp(prefix=target.name, dir=self.directory)
        with os.fdopen(fd, "w") as f:
            json.dump(table.to_dict(), f, indent=1)
        os.replace(tmp, target)
        return target

    def table(self, model_path: str | Path, cnn: CNN, frames: Sequence[np.ndarray],
              method: str = "minmax", threads: int = 1,
              progress: Callable[[str], None] | None = None) -> Lookup:
        """The table of `cnn` on `frames`: the cached one for their key, else measured and kept."""
        key = table_key(model_path, [np.asarray(f, np.float32) for f in frames], method)
        found = self.get(key)
        if found is not None:
            return Lookup(found, True, self.path(key))
        table = measure(model_path, cnn, frames, method, threads, progress)
        return Lookup(table, False, self.put(table))
