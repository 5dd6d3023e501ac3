"""A deployed CNN's input and outputs as its unmodified model names them: each tensor's name,
shape and element type, read from the reference model when the deployment is written and
kept in the manifest's ports (deploy/runtime/manifest_records.Port), so a program running the
deployment (memtrade.Session) hands back outputs in the model's own shapes without parsing
the model, weights and all, again.

The executor stores every output as 4-D NCHW (a [1, 1000] logit vector is [1, 1000, 1, 1]):
a port's shape is the model's where its dimensions are fixed and multiply to the stored
size, else the deployment's own (dynamic dimensions take the sizes they were deployed with).
"""
from __future__ import annotations

from dataclasses import replace
from math import prod
from pathlib import Path

from deploy.runtime.manifest_records import Port

ELEMENT = {1: "float32", 10: "float16", 11: "float64"}      # onnx.TensorProto element types


def tensor_shape(dims: list[int], stored: list[int]) -> list[int]:
    """The model's shape of a tensor stored as `stored` (`dims`: its graph dimensions, 0 for
    a dynamic one)."""
    size = prod(stored)
    if dims and 0 not in dims and prod(dims) == size:
        return list(dims)
    if len(dims) == len(stored) or not dims:
        return list(stored)
    head = list(stored[:len(dims)])       # a lower rank with dynamic dimensions: the padding dropped
    return head if prod(head) == size else list(stored)


def _entry(value_info) -> tuple[str, list[int], str]:
    t = value_info.type.tensor_type
    dims = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else 0 for d in t.shape.dim]
    return value_info.name, dims, ELEMENT.get(t.elem_type, "float32")


def model_ports(reference: str | Path, inputs: tuple[Port, ...],
                outputs: tuple[Port, ...]) -> tuple[tuple[Port, ...], tuple[Port, ...]]:
    """A CNN's manifest ports (its input and output layers' ports) with the `tensor`,
    `tensor_shape` and `dtype` of its reference model's graph inputs and outputs, paired in
    order; a model whose graph does not pair with the deployment's ports leaves them as
    they are."""
    import onnx
    graph = onnx.load(str(reference), load_external_data=False).graph
    weights = {t.name for t in graph.initializer}
    given = [i for i in graph.input if i.name not in weights]
    if len(given) < len(inputs) or len(graph.output) != len(outputs):
        return inputs, outputs

    def named(port: Port, value) -> Port:
        name, dims, dtype = _entry(value)
        return replace(port, tensor=name, tensor_shape=tuple(tensor_shape(dims, list(port.shape))),
                       dtype=dtype)
    return (tuple(named(p, v) for p, v in zip(inputs, given)),
            tuple(named(p, v) for p, v in zip(outputs, graph.output)))
