"""Shape constraints ONNX's shape inference does not enforce, checked once the graph inputs
are static (the app file's `input_shape`, csdf/onnx_inputs.py): where a layer's weights or a
constant target shape fix the size of what it reads, that size must be what its input has.

ONNX shape inference outside strict mode takes a Gemm's or MatMul's output from its
declared or weight shapes even when the input's features differ, and a Reshape's from its
target even when the element counts differ: a model exported for 16x16 frames given
`input_shape: [1, 3, 64, 64]` would import, be searched and planned, and fail only when its
step models are built. It is refused here, at import, in one line naming the layer and both
shapes (InputError: exit 2). Checked (only where every dimension
involved is known): Gemm (transA / transB), MatMul with a constant right operand, Conv (input
channels = weight channels x group) and Reshape to a constant shape (element counts; 0
copies a dimension, -1 takes the rest).
"""
from __future__ import annotations

from math import prod
from pathlib import Path
from typing import Callable

import numpy as np
import onnx
from onnx import numpy_helper

from csdf.onnx_consts import constant_tensors
from sdf3.errors import InputError


def check(model: onnx.ModelProto, path: str | Path, inputs=(),
          layer_name: Callable[[str], str] = str) -> None:
    """Raise InputError for the first node whose input size contradicts its constants.
    `model`: after shape inference; `inputs`: (name, static shape) of the graph inputs, named
    in the line as where the sizes come from; `layer_name`: a node name as the import names
    its layer."""
    graph = model.graph
    consts = constant_tensors(graph)
    shapes = {name: list(t.dims) for name, t in consts.items()}
    for v in list(graph.input) + list(graph.value_info) + list(graph.output):
        t = v.type.tensor_type
        if t.HasField("shape") and v.name not in shapes:
            shapes[v.name] = [d.dim_value if d.HasField("dim_value") else -1 for d in t.shape.dim]
    given = "; ".join(f"graph input '{n}' {list(s)}" for n, s in inputs)
    for node in graph.node:
        why = _contradiction(node, shapes, consts)
        if why is not None:
            raise InputError(f"{path}: layer {layer_name(node.name or node.output[0])!r} "
                             f"({node.op_type}): {why}" + (f" (with {given})" if given else ""))


def _known(shape) -> bool:
    return shape is not None and len(shape) > 0 and all(d > 0 for d in shape)


def _attr(node, name: str, default: int) -> int:
    return next((int(a.i) for a in node.attribute if a.name == name), default)


def _contradiction(node, shapes: dict, consts: dict) -> str | None:
    ins = list(node.input)
    a = shapes.get(ins[0]) if ins else None
    if node.op_type == "Gemm" and len(ins) >= 2:
        b = shapes.get(ins[1])
        if not (_known(a) and _known(b)) or len(a) != 2 or len(b) != 2:
            return None
        k_a = a[0] if _attr(node, "transA", 0) else a[1]
        k_b = b[1] if _attr(node, "transB", 0) else b[0]
        if k_a != k_b:
            return (f"its input '{ins[0]}' is {a}, {k_a} features, but its weight '{ins[1]}' "
                    f"{b} takes {k_b}")
    elif node.op_type == "MatMul" and len(ins) == 2 and ins[1] in consts:
        b = shapes.get(ins[1])
        if _known(a) and _known(b) and len(b) >= 2 and a[-1] != b[-2]:
            return (f"its input '{ins[0]}' is {a}, {a[-1]} features, but its weight "
                    f"'{ins[1]}' {b} takes {b[-2]}")
    elif node.op_type == "Conv" and len(ins) >= 2:
        w = shapes.get(ins[1])
        group = _attr(node, "group", 1)
        # a group not dividing the channels: the importer's own line says so
        if _known(a) and _known(w) and len(a) >= 2 and len(w) >= 2 and a[1] % group == 0 \
                and a[1] != w[1] * group:
            return (f"its input '{ins[0]}' is {a}, {a[1]} channels, but its weight '{ins[1]}' "
                    f"{w} (group {group}) takes {w[1] * group}")
    elif node.op_type == "Reshape" and len(ins) == 2 and ins[1] in consts and _known(a):
        target = [int(v) for v in np.asarray(numpy_helper.to_array(consts[ins[1]])).reshape(-1)]
        allowzero = _attr(node, "allowzero", 0)
        dims = [a[i] if d == 0 and not allowzero and i < len(a) else d for i, d in enumerate(target)]
        rest = prod(d for d in dims if d != -1)
        total = prod(a)
        if (-1 not in dims and rest != total) or (-1 in dims and (rest == 0 or total % rest)):
            return (f"its input '{ins[0]}' is {a} ({total} elements), which target shape "
                    f"{target} cannot hold")
    return None
