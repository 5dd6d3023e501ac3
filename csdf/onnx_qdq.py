"""A model already quantized in ONNX's QDQ format, read as the int8 network it describes.

The QDQ format (ONNX Runtime's quantization docs, "Quantize ONNX models": the QDQ format;
the ONNX operators QuantizeLinear and DequantizeLinear) keeps the fp32 graph and marks what is
int8 with operator pairs: a constant integer tensor behind a DequantizeLinear is a quantized
weight (or bias), and a QuantizeLinear -> DequantizeLinear pair on a tensor between two
operators says that tensor is held as int8 with that scale and zero point. ONNX Runtime's
quantize_static, NNCF and NVIDIA's pytorch-quantization write models this way.

`fold` rewrites such a model before csdf's import reads it (csdf/onnx_import.py):
- every QuantizeLinear whose readers are all DequantizeLinear is removed with them, the
  readers reading the QuantizeLinear's fp32 input instead, and that tensor's scale and zero
  point recorded (`Quantized.activations`): the layers and edges are those of the fp32
  network, an edge's tensor held in one byte;
- a DequantizeLinear of a constant integer tensor stays: the import folds it into the
  layer's parameter like any constant (csdf/onnx_consts.py), and its scale, zero point and
  axis are recorded (`Quantized.weights`, by the dequantized tensor's name, which the layer's
  `param_sources` names).
`attach` keeps the record on the CNN by layer: `CNN.quantized`, for a deployment to use the
model's own scales (no calibration). A CNN with that record is an int8 network: its app's
precision is int8 (explorer/app/appfile.py, docs/import.md).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import onnx
from onnx import numpy_helper

from csdf.model import CNN


@dataclass(frozen=True)
class Scale:
    """A quantized tensor's scale and zero point: one each (per tensor, `axis` None) or one
    per slice along `axis` (per channel); `dtype` the integer type it is stored in."""
    scale: tuple[float, ...]
    zero_point: tuple[int, ...]
    axis: int | None
    dtype: str


@dataclass(frozen=True)
class Quantized:
    """What a QDQ model says about its int8 network. From `fold`: by ONNX tensor name
    (`activations`: fp32 tensors between operators; `weights`: dequantized constants);
    after `attach`: `activations` by the layer whose output it is, `weights` by
    "layer:key" of the layer parameter that is that tensor verbatim, else by
    "layer:<ONNX tensor>" (a tensor folded into another parameter, as BatchNorm folding
    does: the scales are the tensor's, before folding)."""
    activations: dict[str, Scale] = field(default_factory=dict)
    weights: dict[str, Scale] = field(default_factory=dict)
    # from `fold` only: ONNX node (name, else first output) -> the dequantized constants it reads
    readers: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # after `attach`: points inside fused layers, by "layer@point" (`inner_key`); the
    # layers whose BatchNormalization or bias Add the import left unfused, with its op; and
    # the points neither a layer's output nor inside one (ONNX tensor names; none expected)
    inner: dict[str, Scale] = field(default_factory=dict)
    apart: dict[str, str] = field(default_factory=dict)
    unkept: tuple[str, ...] = ()

    def points_of(self, layer: str) -> tuple[str, ...]:
        """The points inside `layer` that keep the model's own scales, in the layer's order."""
        prefix = inner_key(layer, "")
        return tuple(k[len(prefix):] for k in self.inner if k.startswith(prefix))


def inner_key(layer: str, point: str) -> str:
    """The name of a quantization point inside a layer: "layer@act<i>" (what its i-th fused
    activation reads), "layer@gate<i>" (the gate of its i-th, Swish or HardSwish), or, in an
    opaque layer (csdf/onnx_opaque.py), "layer@<ONNX tensor>" (one of its nodes' outputs)."""
    return f"{layer}@{point}"


class _Constants:
    """The model's initializers and Constant node values by name, each read into an array
    only when asked for (a model's weights are never all copied)."""

    def __init__(self, model: onnx.ModelProto):
        self.protos = {t.name: t for t in model.graph.initializer}
        for node in model.graph.node:
            if node.op_type == "Constant":
                for a in node.attribute:
                    if a.name == "value":
                        self.protos[node.output[0]] = a.t
        self.arrays: dict[str, np.ndarray] = {}

    def __contains__(self, name: str) -> bool:
        return name in self.protos

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self.arrays:
            self.arrays[name] = numpy_helper.to_array(self.protos[name])
        return self.arrays[name]

    def dtype(self, name: str) -> np.dtype:
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(self.protos[name].data_type))

    def integer(self, name: str) -> bool:
        return name in self.protos and self.dtype(name).kind in "iu"


def _scale(node: onnx.NodeProto, consts: _Constants, stored: np.dtype) -> Scale | None:
    """The scale of a QuantizeLinear / DequantizeLinear node, None when not constant."""
    if len(node.input) < 2 or node.input[1] not in consts:
        return None
    scale = np.asarray(consts[node.input[1]], np.float64).reshape(-1)
    zp_name = node.input[2] if len(node.input) > 2 else ""
    if zp_name and zp_name not in consts:
        return None
    zp = np.asarray(consts[zp_name]).reshape(-1) if zp_name else np.zeros(1, np.int64)
    axis = next((int(a.i) for a in node.attribute if a.name == "axis"), 1) if scale.size > 1 else None
    dtype = (consts.dtype(zp_name) if zp_name else np.dtype(stored)).name
    return Scale(tuple(float(s) for s in scale), tuple(int(z) for z in zp), axis, dtype)


def fold(model: onnx.ModelProto) -> tuple[onnx.ModelProto, Quantized | None]:
    """`model` with its activation QuantizeLinear -> DequantizeLinear pairs removed, and what
    they and its weight DequantizeLinear nodes said; (model unchanged, None) when it has none."""
    graph = model.graph
    if not any(n.op_type in ("QuantizeLinear", "DequantizeLinear") for n in graph.node):
        return model, None
    consts = _Constants(model)
    readers: dict[str, list[int]] = {}
    for i, node in enumerate(graph.node):
        for t in node.input:
            readers.setdefault(t, []).append(i)
    outputs = {o.name for o in graph.output}
    weights: dict[str, Scale] = {}
    for node in graph.node:
        if node.op_type == "DequantizeLinear" and consts.integer(node.input[0]):
            found = _scale(node, consts, consts.dtype(node.input[0]))
            if found is not None:
                weights[node.output[0]] = found
    activations: dict[str, Scale] = {}
    dropped: set[int] = set()
    rename: dict[str, str] = {}        # a DequantizeLinear's output -> the fp32 tensor it stands for
    for i, node in enumerate(graph.node):
        if node.op_type != "QuantizeLinear" or node.input[0] in consts:
            continue
        users = readers.get(node.output[0], [])
        if not users or node.output[0] in outputs or any(graph.node[u].op_type != "DequantizeLinear" for u in users):
            continue
        found = _scale(node, consts, np.dtype(np.uint8))
        if found is None:
            continue
        activations[node.input[0]] = found
        dropped |= {i, *users}
        for u in users:
            rename[graph.node[u].output[0]] = node.input[0]
    if not activations and not weights:
        return model, None
    out = onnx.ModelProto()
    out.CopyFrom(model)
    # a pair's output that is a graph output keeps its name: the fp32 tensor takes it
    keep = {x: y for y, x in rename.items() if y in outputs}
    for node in out.graph.node:
        for k, t in enumerate(node.input):
            t = rename.get(t, t)
            node.input[k] = keep.get(t, t)
        for k, t in enumerate(node.output):
            node.output[k] = keep.get(t, t)
    for value in out.graph.input:
        if value.name in keep:      # a graph input passed straight out: leave that pair
            return model, None
    kept = [n for i, n in enumerate(out.graph.node) if i not in dropped]
    del out.graph.node[:]
    out.graph.node.extend(kept)
    activations = {keep.get(t, t): s for t, s in activations.items()}
    readers = {n.name or n.output[0]: tuple(t for t in n.input if t in weights) for n in kept}
    return out, Quantized(activations, weights, {k: v for k, v in readers.items() if v})


def attach(cnn: CNN, found: Quantized | None, inner: dict[str, dict[str, str]] | None = None,
           apart: dict[str, str] | None = None) -> CNN:
    """`cnn` (imported from `fold`'s model) with `found` kept by layer as `cnn.quantized`;
    `inner`: per layer, the quantization points fused inside it (point -> ONNX tensor,
    csdf/onnx_fusion.py), kept by `inner_key`; `apart`: the layers fusion stopped at such a
    point."""
    if found is None:
        return cnn
    acts, weights, points = {}, {}, {}
    for layer in cnn.layers():
        if layer.output_tensor in found.activations:
            acts[layer.name] = found.activations[layer.output_tensor]
        for point, tensor in (inner or {}).get(layer.name, {}).items():
            points[inner_key(layer.name, point)] = found.activations[tensor]
        keys = {source: key for key, source in layer.param_sources.items()}
        for node in layer.onnx_nodes:
            for tensor in found.readers.get(node, ()):
                key, scale = keys.get(tensor, tensor), found.weights[tensor]
                if key == "W" and layer.hyper.get("from_matmul") and scale.axis is not None:
                    # a MatMul's [in, out] tensor is the layer's W transposed: its axes swap
                    scale = replace(scale, axis=1 - scale.axis % 2)
                weights[f"{layer.name}:{key}"] = scale
    kept = {layer.output_tensor for layer in cnn.layers()} | {t for p in (inner or {}).values() for t in p.values()}
    unkept = tuple(t for t in found.activations if t not in kept)
    cnn.quantized = Quantized(acts, weights, inner=points, apart=dict(apart or {}), unkept=unkept)
    return cnn
