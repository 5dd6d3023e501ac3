"""What a deployment takes and gives, as the unmodified model does: each CNN's input (name,
shape, element type) and outputs (names, shapes, element types, in the model's order), as
the deployment recorded them from its reference model (deploy/build/model_ports.py); and the
checks that a frame fits, one line naming the input and what it expected.

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
    the model's tensor names, shapes and element types the deployment recorded
    (deploy/build/model_ports.py); a CNN deployed without an ONNX model (a network built in
    memory) keeps its layer names and 4-D shapes."""
    def port(p) -> Port:
        if p.tensor is None:
            return Port(p.layer, tuple(p.shape), np.dtype(np.float32))
        return Port(p.tensor, tuple(p.tensor_shape), np.dtype(p.dtype))
    if not info.outputs or not info.inputs:
        raise InputError(f"{deploy_dir}: CNN {cnn!r} has no input or output in the manifest")
    return ModelPorts(cnn, port(info.inputs[0]), tuple(port(p) for p in info.outputs))


def per_cnn(given: Any, names: list[str], where: str, what: str) -> dict[str, Any]:
    """`given` as {CNN name: value}: the value itself for an app of one CNN, else a mapping
    naming every CNN once (one line naming the first name unknown or missing)."""
    if not isinstance(given, Mapping):
        if len(names) != 1:
            raise InputError(f"{where}: the app has {len(names)} CNNs ({', '.join(names)}); expected "
                             f"a mapping of CNN name to {what}")
        return {names[0]: given}
    unknown = [k for k in given if k not in names]
    if unknown:
        raise InputError(f"{where}: no CNN named {unknown[0]!r}; expected {', '.join(names)}")
    missing = [n for n in names if n not in given]
    if missing:
        raise InputError(f"{where}: CNN {missing[0]!r} has no {what}; expected one for each of "
                         f"{', '.join(names)}")
    return {n: given[n] for n in names}


def by_cnn(feed: Any, cnns: Mapping[str, ModelPorts]) -> dict[str, np.ndarray]:
    """A feed as {CNN name: checked frame}: one array for an app of one CNN, else a mapping
    naming every CNN once."""
    return {n: cnns[n].check(frame) for n, frame in per_cnn(feed, list(cnns), "feed", "frame").items()}
