"""The fp16 reference of an fp16 (or mixed) deployment: the unmodified network computed in
fp32, with every tensor the deployment stores rounded to fp16 where it is stored.

How the ONNX Runtime deployment computes at fp16 (deploy/steps/*): the arena holds every
stored tensor in fp16 (the frame is rounded as it is copied in); each step casts what it
reads to fp32, computes its layer in fp32 with fp32 weights (the importer's, BatchNorm folded),
and casts its result to fp16 as it writes it. So the deployment is the fp32 network with each
CNN layer's output (and the input) rounded to fp16. The reference here is exactly that: the
original ONNX model, a Cast to fp16 and back after the graph input and after the ONNX tensor
of every layer (`Layer.output_tensor`, from csdf's own import of the same file), weights
untouched (fp32, as the deployment holds them). What remains between the two is operation
order inside kernels (BatchNorm folded or not, a row window or the whole map, ...) and the
rows a region band or a fused tile hands to its next layer inside one call, which are not
rounded (deploy/steps/regions.py, tiles.py): fp32 differences far below an fp16 unit that
flip the rounding of some elements by one unit (deploy/run/verdict.py says how the
tolerance covers them).

Only fp32 tensors are rounded (integer tensors between opaque layers stay as they are).
`rounded` takes the round trip as an argument: the int8 reference (deploy/checks/quantized.py)
passes QuantizeLinear -> DequantizeLinear with each tensor's scale instead of the fp16 Casts.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import onnx
from onnx import TensorProto, helper

SUFFIX = "__memtrade_stored"


def stored_tensors(path: str | Path, model: onnx.ModelProto) -> list[str]:
    """The fp32 tensors of `model` (read from `path`) that a deployment of it stores: the
    graph input and every layer's output, as csdf's import cuts the model into layers."""
    from csdf.onnx_import import load_onnx
    cnn = load_onnx(path, "reference")
    typed = onnx.shape_inference.infer_shapes(model)
    kinds = {v.name: v.type.tensor_type.elem_type
             for v in list(typed.graph.input) + list(typed.graph.value_info) + list(typed.graph.output)}
    tensors = [layer.output_tensor for layer in cnn.layers() if layer.output_tensor]
    return [t for t in dict.fromkeys(tensors) if kinds.get(t) == TensorProto.FLOAT]


# (tensor, its value, the name its readers read) -> the nodes of one round trip
Trip = Callable[[str, str, str], list[onnx.NodeProto]]


def cast_trip(to: int = TensorProto.FLOAT16) -> Trip:
    """Cast(to) then Cast(FLOAT): the value as type `to` stores it."""
    def trip(tensor: str, src: str, dst: str) -> list[onnx.NodeProto]:
        half = dst + "_half"
        return [helper.make_node("Cast", [src], [half], to=to),
                helper.make_node("Cast", [half], [dst], to=TensorProto.FLOAT)]
    return trip


def rounded(model: onnx.ModelProto, tensors: list[str], to: int = TensorProto.FLOAT16,
            trip: Trip | None = None) -> onnx.ModelProto:
    """A copy of `model` where each of `tensors` passes through a round trip before anything
    reads it (graph outputs included): `trip`'s nodes, by default through type `to` and back
    to fp32 (`cast_trip`)."""
    round_trip_of = trip or cast_trip(to)
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    wanted = set(tensors)
    inputs = {v.name for v in graph.input} & wanted
    exact = {t: t + SUFFIX + "_exact" for t in wanted - inputs}   # a node's output, renamed
    read = {t: t + SUFFIX for t in inputs}                         # a graph input, its readers renamed

    nodes = [n for t in sorted(inputs) for n in round_trip_of(t, t, read[t])]
    for original in graph.node:
        node = onnx.NodeProto()
        node.CopyFrom(original)
        for k, name in enumerate(node.input):
            if name in read:
                node.input[k] = read[name]
        nodes.append(node)
        for k, name in enumerate(node.output):
            if name in exact:
                node.output[k] = exact[name]
                nodes += round_trip_of(name, exact[name], name)
    del graph.node[:]
    graph.node.extend(nodes)
    for value in graph.output:       # a graph output that is the graph input: its rounded copy
        if value.name in read:
            graph.node.append(helper.make_node("Identity", [read[value.name]], [value.name + SUFFIX + "_out"]))
            value.name += SUFFIX + "_out"
    return out
