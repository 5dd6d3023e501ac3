"""The quantization parameters of a QDQ model, checked before its import reads them
(csdf/onnx_qdq.py): what the ONNX operators QuantizeLinear and DequantizeLinear require
(ONNX operator specification: y_scale "must be a positive value" per element; y_zero_point of
the quantized type, in its range; a 1-D scale and zero point per slice along `axis`, as many
as that axis has), and the 8-bit activations an int8 deployment stores.

A QDQ model is its own reference, so a scale of inf, 0 or -1 deploys and PASSes against
itself while meaning nothing; a per-channel scale of the wrong length failed only at run,
inside ONNX Runtime. Each is refused here, in one line naming the node and the tensor
(InputError: exit 2). Only constant parameters are checked: a computed scale is not one the
import takes (csdf/onnx_qdq.py reads constants only).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from csdf.onnx_consts import constant_tensors
from sdf3.errors import InputError

QDQ_OPS = ("QuantizeLinear", "DequantizeLinear")
ACTIVATION_TYPES = ("uint8", "int8")      # what an int8 deployment's arena holds


def check(model: onnx.ModelProto, path: str | Path) -> None:
    """Raise InputError for the first QuantizeLinear / DequantizeLinear whose constant scale
    or zero point is not one the operator allows, or whose per-channel length is not its
    axis's."""
    graph = model.graph
    nodes = [n for n in graph.node if n.op_type in QDQ_OPS]
    if not nodes:
        return
    consts = constant_tensors(graph)
    shapes: dict[str, list[int]] | None = None
    for node in nodes:
        where = f"{path}: {node.op_type} {node.name or node.output[0]!r} of tensor {node.input[0]!r}"
        if len(node.input) < 2 or node.input[1] not in consts:
            continue
        scale = numpy_helper.to_array(consts[node.input[1]]).astype(np.float64).reshape(-1)
        bad = scale[~(np.isfinite(scale) & (scale > 0))]
        if bad.size:
            raise InputError(f"{where}: scale {bad[0]:g}; a scale must be finite and > 0")
        zp_name = node.input[2] if len(node.input) > 2 else ""
        zp = None
        if zp_name and zp_name in consts:
            zp_proto = consts[zp_name]
            zp = numpy_helper.to_array(zp_proto).reshape(-1)
            _zero_point(zp, zp_proto.data_type, node, consts, where)
        if scale.size > 1:
            if zp is not None and zp.size != scale.size:
                raise InputError(f"{where}: {scale.size} scales but {zp.size} zero points; "
                                 f"expected one zero point per scale")
            if shapes is None:
                shapes = _shapes(model, consts)
            _per_channel(node, scale.size, shapes.get(node.input[0]), where)


def _zero_point(zp: np.ndarray, elem: int, node, consts: dict, where: str) -> None:
    dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem))
    if dtype.kind not in "iu":
        raise InputError(f"{where}: zero point of type {dtype.name}; expected an integer type")
    stored = dtype
    if node.op_type == "DequantizeLinear" and node.input[0] in consts:
        x_type = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(consts[node.input[0]].data_type))
        if x_type != dtype:
            raise InputError(f"{where}: zero point of type {dtype.name}, the tensor is "
                             f"{x_type.name}; expected the same type")
    elif node.op_type == "QuantizeLinear" and dtype.name not in ACTIVATION_TYPES:
        raise InputError(f"{where}: quantized to {dtype.name}; an int8 deployment stores "
                         f"activations as {' or '.join(ACTIVATION_TYPES)}")
    info = np.iinfo(stored)
    out = zp[(zp < info.min) | (zp > info.max)]
    if out.size:
        raise InputError(f"{where}: zero point {int(out[0])} outside {stored.name}'s range "
                         f"{info.min}..{info.max}")


def _per_channel(node, count: int, shape: list[int] | None, where: str) -> None:
    axis = next((int(a.i) for a in node.attribute if a.name == "axis"), 1)
    if not shape:       # unknown here: the import finds it (or refuses the tensor) itself
        return
    if not -len(shape) <= axis < len(shape):
        raise InputError(f"{where}: axis {axis} of a {len(shape)}-D tensor")
    size = shape[axis]
    if size > 0 and size != count:
        raise InputError(f"{where}: {count} scales along axis {axis}, which has {size} "
                         f"elements; expected one per element (shape {shape})")


def _shapes(model: onnx.ModelProto, consts: dict) -> dict[str, list[int]]:
    """Tensor name -> static shape (-1 for an unknown dimension): constants' own, the
    others from ONNX shape inference where it gives them."""
    out = {name: list(t.dims) for name, t in consts.items()}
    try:
        inferred = onnx.shape_inference.infer_shapes(model).graph
    except Exception:       # noqa: BLE001 - inference gives up on some exports; constants remain
        return out
    for v in list(inferred.input) + list(inferred.value_info) + list(inferred.output):
        t = v.type.tensor_type
        if t.HasField("shape"):
            out.setdefault(v.name, [d.dim_value if d.HasField("dim_value") else -1
                                    for d in t.shape.dim])
    return out
