"""Static graph-input shapes for an ONNX model before shape inference.

Every figure memtrade computes (edge elements, buffers, times) follows from the graph
inputs' shapes, so they must be numbers. An export with dynamic dimensions (torch's
`dynamic_axes`, e.g. {0: 'N', 2: 'H', 3: 'W'} for detection and segmentation) gets them
from the app file's `input_shape` (docs/appfile.md): one shape for the one graph input, or a
mapping from input name to shape. Without it, a dynamic first dimension (the batch) becomes
1, as in the paper, and is reported; any other dynamic dimension is refused in one line
naming the input, the dimension and the key to set, since guessing it would make every
figure after it wrong.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import onnx

from csdf.machine_bound import check_dims
from sdf3.errors import InputError

KEY = "input_shape"


@dataclass(frozen=True)
class FixedInputs:
    """What `fix_inputs` did: each graph input's static shape, and the inputs whose dynamic
    batch (first) dimension became 1."""
    shapes: tuple[tuple[str, tuple[int, ...]], ...]
    batch_fixed: tuple[str, ...]


def graph_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    """The graph inputs that are not initializers (older exports list weights as inputs)."""
    weights = {t.name for t in model.graph.initializer}
    return [v for v in model.graph.input if v.name not in weights]


def _dims(value: onnx.ValueInfoProto) -> list[int | str | None]:
    """Each dimension: its number, its symbol, or None when unknown."""
    out: list[int | str | None] = []
    for dim in value.type.tensor_type.shape.dim:
        if dim.HasField("dim_value") and dim.dim_value > 0:
            out.append(int(dim.dim_value))
        else:
            out.append(dim.dim_param or None)
    return out


def _wanted(input_shape: Any, names: list[str], where: str) -> dict[str, list[int]]:
    """`input_shape` as input name -> shape, checked against the model's input names."""
    if input_shape is None:
        return {}
    if isinstance(input_shape, list):
        if len(names) != 1:
            raise InputError(f"{where}: {KEY}: the model has {len(names)} graph inputs "
                             f"({', '.join(names)}); expected a mapping name -> [N, C, H, W]")
        input_shape = {names[0]: input_shape}
    if not isinstance(input_shape, dict):
        raise InputError(f"{where}: {KEY}: expected [N, C, H, W] or a mapping input name -> "
                         f"[N, C, H, W], got {input_shape!r}")
    out = {}
    for name, shape in input_shape.items():
        if name not in names:
            raise InputError(f"{where}: {KEY}: unknown graph input {name!r}; expected one of "
                             f"{', '.join(names)}")
        ok = isinstance(shape, list) and shape and all(
            isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in shape)
        if not ok:
            raise InputError(f"{where}: {KEY}.{name}: expected a list of positive integers such "
                             f"as [1, 3, 224, 224], got {shape!r}")
        out[name] = list(shape)
    return out


def fix_inputs(model: onnx.ModelProto, where: str, input_shape: Any = None) -> FixedInputs:
    """Give every graph input of `model` static dimensions, in place (see the module
    docstring). `where` names the model file in refusals."""
    inputs = graph_inputs(model)
    wanted = _wanted(input_shape, [v.name for v in inputs], where)
    shapes, batch = [], []
    for value in inputs:
        if not value.type.tensor_type.HasField("shape"):
            continue                       # no shape at all: refused by the importer
        dims = _dims(value)
        if value.name in wanted:
            new = wanted[value.name]
            if len(new) != len(dims):
                raise InputError(f"{where}: {KEY}: graph input '{value.name}' has {len(dims)} "
                                 f"dimensions, {KEY} gives {len(new)} ({new})")
            for k, (old, got) in enumerate(zip(dims, new)):
                if isinstance(old, int) and old != got:
                    raise InputError(f"{where}: {KEY}: graph input '{value.name}' dimension {k} "
                                     f"is {old} in the model, {KEY} gives {got}")
        else:
            for k, old in enumerate(dims):
                if k > 0 and not isinstance(old, int):
                    label = f" ('{old}')" if old else ""
                    raise InputError(
                        f"{where}: graph input '{value.name}' dimension {k}{label} is dynamic; "
                        f"expected {KEY}: [{', '.join(str(d) if isinstance(d, int) else '?' for d in dims)}] "
                        f"with numbers in this CNN's entry of the app file")
            new = [d if isinstance(d, int) else 1 for d in dims]
            if dims and not isinstance(dims[0], int):
                batch.append(value.name)
        check_dims(value.name, new, where)      # before shape inference sizes anything
        for dim, size in zip(value.type.tensor_type.shape.dim, new):
            dim.Clear()
            dim.dim_value = size
        shapes.append((value.name, tuple(new)))
    return FixedInputs(tuple(shapes), tuple(batch))


def with_shapes(model: onnx.ModelProto, shapes: dict[str, tuple[int, ...]]) -> bool:
    """Set the graph inputs named in `shapes` to those static shapes, in place, and drop the
    model's value_info (inferred for the dynamic form); whether anything changed."""
    changed = False
    for value in graph_inputs(model):
        shape = shapes.get(value.name)
        if shape is None or _dims(value) == list(shape):
            continue
        tt = value.type.tensor_type
        tt.shape.ClearField("dim")
        for size in shape:
            tt.shape.dim.add().dim_value = int(size)
        changed = True
    if changed:
        del model.graph.value_info[:]
    return changed
