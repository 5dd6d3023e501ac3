"""What a deployment takes and gives, as the unmodified model does: each CNN's input (name,
shape, element type) and outputs (names, shapes, element types, in the model's order), read
from the reference model the deployment keeps (no weights loaded); and the checks that a
frame fits, one line naming the input and what it expected.

The executor stores a CNN's outputs as 4-D NCHW tensors (a [1, 1000] logit vector is
[1, 1000, 1, 1]); `ModelPorts.shaped` gives them back in the model's own shapes and types,
which is what `onnxruntime.InferenceSession(model).run(None, feed)` returns.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from sdf3.errors import InputError

_ELEM = {1: np.float32, 10: np.float16, 11: np.float64}     # onnx.TensorProto element types


@dataclass(frozen=True)
class Port:
    """An input or output of a CNN as its model names it: its name, shape and element type."""
    name: str
    shape: tuple[int, ...]
    dtype: np.dtype


@dataclass(frozen=True)
class ModelPorts:
    """A deployed CNN's input and outputs, in the unmodified model's names, shapes and types."""
    cnn: str
    input: Port
    outputs: tuple[Port, ...]

    def check(self, frame: Any) -> np.ndarray:
        """`frame` as the executor takes it (float32 NCHW), or InputError naming the input."""
        what = f"input {self.input.name!r} of CNN {self.cnn!r}"
        if not isinstance(frame, np.ndarray):
            raise InputError(f"{what}: expected a numpy array of shape {list(self.input.shape)}, "
                             f"got {type(frame).__name__}")
        if frame.dtype not in (np.float32, self.input.dtype):
            raise InputError(f"{what}: expected dtype {np.dtype(self.input.dtype).name}, got {frame.dtype.name}")
        if frame.ndim != len(self.input.shape):
            raise InputError(f"{what}: expected rank {len(self.input.shape)} (shape "
                             f"{list(self.input.shape)}), got rank {frame.ndim} (shape {list(frame.shape)})")
        if tuple(frame.shape) != self.input.shape:
            raise InputError(f"{what}: expected shape {list(self.input.shape)}, got {list(frame.shape)}")
        return np.ascontiguousarray(frame, dtype=np.float32)

    def shaped(self, stored: list[np.ndarray]) -> list[np.ndarray]:
        """The executor's outputs (4-D, float32) in the model's shapes and element types."""
        return [np.asarray(a).reshape(p.shape).astype(p.dtype, copy=False)
                for a, p in zip(stored, self.outputs)]


def ports(deploy_dir: str | Path, cnn: str, info) -> ModelPorts:
    """CNN `cnn`'s ports (`info`: its manifest entry, deploy/runtime/manifest_records.CnnInfo):
    names and element types from its reference model, shapes from the deployment (a model's
    dynamic dimensions are those it was deployed with); a CNN deployed without a reference
    model (a zoo network) keeps its layer names and 4-D shapes."""
    stored_in = [tuple(p.shape) for p in info.inputs]
    stored_out = [tuple(p.shape) for p in info.outputs]
    if info.reference is None:
        return ModelPorts(cnn, Port(info.inputs[0].layer, stored_in[0], np.dtype(np.float32)),
                          tuple(Port(p.layer, s, np.dtype(np.float32))
                                for p, s in zip(info.outputs, stored_out)))
    import onnx
    path = Path(deploy_dir) / info.reference
    try:
        graph = onnx.load(str(path), load_external_data=False).graph
    except Exception as err:          # DecodeError, OSError: a damaged deployment
        raise InputError(f"{path}: the reference model cannot be read ({' '.join(str(err).split())[:200]})") from None
    weights = {t.name for t in graph.initializer}
    inp = next(i for i in graph.input if i.name not in weights)
    outs = list(graph.output)
    if len(outs) != len(stored_out):
        raise InputError(f"{path}: {len(outs)} outputs, the deployment has {len(stored_out)} "
                         f"(the deployment is damaged or was edited; deploy it again)")
    return ModelPorts(cnn, _port(inp, stored_in[0]),
                      tuple(_port(o, s) for o, s in zip(outs, stored_out)))


def _port(value_info, stored: tuple[int, ...]) -> Port:
    """A graph input or output: its rank and fixed dimensions from the model, the dynamic
    ones from the deployment's 4-D shape (element counts agree)."""
    t = value_info.type.tensor_type
    dims = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else 0 for d in t.shape.dim]
    size = int(np.prod(stored))
    if dims and 0 not in dims and int(np.prod(dims)) == size:
        shape = tuple(dims)
    elif len(dims) == len(stored):
        shape = stored
    else:                             # dynamic dimensions of a lower rank: squeeze the padding
        shape = tuple(stored[:len(dims)]) if int(np.prod(stored[:len(dims)] or [1])) == size else stored
    return Port(value_info.name, tuple(int(d) for d in shape), np.dtype(_ELEM.get(t.elem_type, np.float32)))


def by_cnn(feed: Any, cnns: Mapping[str, ModelPorts]) -> dict[str, np.ndarray]:
    """A feed as {CNN name: checked frame}: one array for an app of one CNN, else a mapping
    naming every CNN once."""
    names = list(cnns)
    if not isinstance(feed, Mapping):
        if len(names) != 1:
            raise InputError(f"feed: the app has {len(names)} CNNs ({', '.join(names)}); expected "
                             f"a mapping of CNN name to frame")
        return {names[0]: cnns[names[0]].check(feed)}
    unknown = [k for k in feed if k not in cnns]
    if unknown:
        raise InputError(f"feed: no CNN named {unknown[0]!r}; expected {', '.join(names)}")
    missing = [n for n in names if n not in feed]
    if missing:
        raise InputError(f"feed: CNN {missing[0]!r} has no frame; expected one for each of {', '.join(names)}")
    return {n: cnns[n].check(feed[n]) for n in names}
