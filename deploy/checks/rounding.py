"""The fp16 reference of an fp16 (or mixed) deployment: the unmodified network computed in
fp32, with every tensor the deployment stores rounded to fp16 where it is stored.

How the ONNX Runtime deployment computes at fp16 (deploy/steps/*): the arena holds every
stored tensor in fp16 (the frame is rounded as it is copied in); each step casts what it
reads to fp32, computes its layer in fp32 with the weights it holds converted to fp32 (the
importer's, BatchNorm folded, stored in fp16, or in int8 for a mixed plan:
deploy/steps/builder.py), and casts its result to fp16 as it writes it. So the deployment is
the fp32 network with each CNN layer's output (and the input) rounded to fp16 and its weights
as held. The reference here is exactly that: the original ONNX model, a Cast to fp16 and back
after the graph input and after the ONNX tensor of every layer (`Layer.output_tensor`, from
csdf's own import of the same file; `rounded`), and each weight the deployment stores below
fp32 replaced by the values the step computes with (`with_held_weights`, deploy/quant/stored.py `held`).
A weight the importer folded (BatchNorm's scale into a Conv's W, Gemm's alpha, a MatMul's
transpose) is found through the layer's ONNX node and replaced by the held values divided by
the per-channel factor the folding applied, so that the model's own BatchNorm gives back the
held values. What remains between the two is operation
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
from typing import Callable, Collection

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from csdf.model import CNN, OPAQUE
from deploy.quant.stored import held, stored_low, weights_of

SUFFIX = "__memtrade_stored"
WEIGHT_OPS = ("Conv", "Gemm", "MatMul")    # the nodes whose input 1 a folded weight came from


def stored_tensors(path: str | Path, model: onnx.ModelProto, cnn: CNN | None = None) -> list[str]:
    """The fp32 tensors of `model` (read from `path`; `cnn`: csdf's import of it, made here
    when not given) that a deployment of it stores: the graph input and every layer's output,
    as csdf's import cuts the model into layers."""
    from csdf.onnx_import import load_onnx
    from deploy.quant.calibration import stored
    return list(stored(cnn or load_onnx(path, "reference"), model))


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


def with_held_weights(model: onnx.ModelProto, cnn: CNN, kind: str,
                      only: Collection[str] | None = None) -> tuple[onnx.ModelProto, list[str]]:
    """A copy of `model` (csdf imported it as `cnn`) whose weights (of the layers `only`
    names, when given) hold the values a deployment storing parameters as `kind` ("float16",
    "int8") computes with; and the layers whose
    weights it could not place (an ONNX tensor that is not an initializer, or one the import
    changed other than by a transpose and a factor per output channel): left as they are."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    if kind == "float32":           # the weights the deployment holds are the model's own
        return out, []
    storage = weights_of(kind, cnn)
    inits = {t.name: k for k, t in enumerate(out.graph.initializer)}
    nodes = {n.name or n.output[0]: n for n in out.graph.node}
    done: set[str] = set()
    missed = []
    for layer in cnn.layers():
        if layer.op == OPAQUE or only is not None and layer.name not in only:
            continue                     # an opaque layer's constants are stored as they are
        for key, value in layer.params.items():
            if not stored_low(np.asarray(value)):
                continue
            source = layer.param_sources.get(key)
            if source is None:
                readers = [nodes[n] for n in layer.onnx_nodes if n in nodes and nodes[n].op_type in WEIGHT_OPS]
                source = readers[0].input[1] if readers and key == "W" else None
            if source in done:
                continue
            tensor = out.graph.initializer[inits[source]] if source in inits else None
            placed = tensor is not None and _place(tensor, np.asarray(value, np.float32),
                                                   held(storage, layer, key))
            if placed:
                done.add(source)
            else:
                missed.append(layer.name)
    return out, missed


def _place(tensor: onnx.TensorProto, param: np.ndarray, values: np.ndarray) -> bool:
    """Write into `tensor` the values that the import would turn into `values`, as it turned
    `tensor` into `param`: the same array, or its transpose, times one factor per output
    channel (axis 0 of `param`). False when `param` is not so made from `tensor`."""
    original = numpy_helper.to_array(tensor)
    if original.dtype != np.float32:
        return False
    if original.shape == param.shape:
        aligned, back = original, (lambda a: a)
    elif original.ndim == 2 and original.T.shape == param.shape:
        aligned, back = original.T, (lambda a: a.T)
    else:
        return False
    flat_a = aligned.reshape(aligned.shape[0], -1).astype(np.float64)
    flat_p = param.reshape(param.shape[0], -1).astype(np.float64)
    norm = np.einsum("ij,ij->i", flat_a, flat_a)
    factor = np.where(norm > 0, np.einsum("ij,ij->i", flat_p, flat_a) / np.where(norm > 0, norm, 1), 1.0)
    if not np.allclose(flat_a * factor[:, None], flat_p, rtol=1e-4, atol=1e-6 * (np.abs(flat_p).max() + 1e-30)):
        return False
    keep = (factor == 0)[:, None]
    flat_v = values.reshape(values.shape[0], -1).astype(np.float64)
    new = np.where(keep, flat_a, flat_v / np.where(keep, 1.0, factor[:, None]))
    tensor.CopyFrom(numpy_helper.from_array(
        np.ascontiguousarray(back(new.reshape(aligned.shape).astype(np.float32))), tensor.name))
    return True
