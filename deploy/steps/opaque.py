"""The computation of an opaque layer (csdf/onnx_opaque.py) in a step model: its ONNX nodes
verbatim, between the step's NCHW float32 tensors and the group's own boundary tensors.

Inputs are reshaped from their 4-D padded form to the tensor's ONNX shape and cast to its
ONNX type; the group's tensors are renamed with a "g:" prefix so they cannot clash with the
step's own names; its constants become initializers (floating ones named `param:onnx:NAME`,
so a tensor shared between layers is one parameter in the measured bytes). By parts (a
per-pixel group, `rows` output rows per phase, the last phase maybe fewer), every input is
those rows [N, C, rows, W] and each Reshape in the group gets its static output shape with
the H axis set to `rows`: a shape the exporter baked for the whole height (TorchScript at
opset 17 folds ShuffleNetV2's channel shuffle to constant shapes) would otherwise compute
one row, or the wrong channels, for a part of several rows. The model runs
at the source model's opsets (docs/deploy.md), so every node keeps its meaning. In an int8
step, a QDQ model's quantization points between the group's nodes (csdf/onnx_qdq.py
`inner_key`: "layer@<ONNX tensor>") round there, QuantizeLinear -> DequantizeLinear, as the
model does.
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from csdf.layer_attrs import OpaqueAttrs
from csdf.model import Layer
from csdf.onnx_qdq import inner_key
from deploy.steps import storage

PREFIX = "g:"


def param_name(tensor: str) -> str:
    return f"param:onnx:{tensor}"


def opaque_core(b, layer: Layer, xs: list[str], srcs: list[str], by_parts: bool,
                rows: int = 1) -> str:
    """Append the group to builder `b`; `xs[k]` is the NCHW float32 tensor of input layer
    `srcs[k]` (by parts: `rows` rows of it). Returns the name of the NCHW float32 output."""
    group = OpaqueAttrs.of(layer)
    port = {src: x for src, x in zip(srcs, xs)}
    for t, src, shape, kind in zip(group.tensor_inputs, layer.inputs, group.in_shapes,
                                   group.in_types):
        x = port[src]
        if by_parts:
            shape = [shape[0], shape[1], rows, shape[3]]
        if len(shape) != 4:
            x = b.node("Reshape", [x, b.const(b.tmp("shape"), np.array(shape, np.int64))])
        b.nodes.append(helper.make_node("Cast", [x], [PREFIX + t], to=int(kind or TensorProto.FLOAT)))
    rename = {name: param_name(name) for name in layer.params}
    values = {**{PREFIX + k: v for k, v in group.consts.items()},
              **{param_name(k): v for k, v in layer.params.items()}}
    h_axis = group.h_axis if by_parts else {}
    for raw in group.nodes:
        _node(b, layer, raw, rename, values, h_axis, group, rows)
    y = b.node("Cast", [rename.get(group.output, PREFIX + group.output)], to=TensorProto.FLOAT)
    n, c, h, w = layer.output_shape
    if by_parts:
        h = rows
    if len(group.out_shape) != 4:
        y = b.node("Reshape", [y, b.const(b.tmp("shape"), np.array([n, c, h, w], np.int64))])
    return y


def _node(b, layer: Layer, raw: bytes, rename: dict, values: dict, h_axis: dict, group, rows: int) -> None:
    """One node of the group appended to `b`, its tensors renamed (`rename`: a parameter's
    name, or a rounded point's; else the "g:" prefix); an output that is a quantization point
    inside the layer is rounded, and the nodes after it read the rounded tensor."""
    node = onnx.NodeProto()
    node.ParseFromString(raw)
    ins = [rename.get(t, PREFIX + t) if t else "" for t in node.input]
    if node.op_type == "Reshape" and node.output[0] in h_axis:
        shape = list(group.shapes[node.output[0]])
        shape[h_axis[node.output[0]]] = rows
        ins[1] = b.const(b.tmp("rows_shape"), np.array(shape, np.int64))
    for t in ins:
        if t in values:
            b.const(t, values[t])   # only the constants the nodes read
    del node.input[:]
    node.input.extend(ins)
    outs = [PREFIX + t if t else "" for t in node.output]
    del node.output[:]
    node.output.extend(outs)
    b.nodes.append(node)
    for t in (t for t in node.output if t):
        point = inner_key(layer.name, t[len(PREFIX):])
        if b.int8_data and point in b.scales:
            rename[t[len(PREFIX):]] = storage.rounded(b, t, point)
