"""The CNN graph model: layers as nodes of a networkx DiGraph, edges carrying [N, C, H, W].

A CNN has one `Input` layer per graph input (the paper's l1: its output edge is the input
image buffer). Outputs of sink layers leave the application and are not buffers, as in the
paper's worked example (CNN1's l5 has no outgoing edge).

Every (producer, consumer) pair is one edge and so one buffer, as in the paper's Table 1
(l2 -> l3 and l2 -> l4 are separate buffers): with processing by parts two consumers of
one tensor need different amounts of it held.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from math import prod
from typing import Any, Iterator

import networkx as nx
import numpy as np

from sdf3.errors import InputError

Shape = tuple[int, int, int, int]

# Layer ops are ONNX op types of the layer's main node, plus "Input", "Synthetic" and
# "Opaque" (a group of ONNX nodes the importer does not model, run verbatim: csdf/onnx_opaque.py).
INPUT = "Input"
OPAQUE = "Opaque"


@dataclass
class Layer:
    """One CNN layer. `hyper` holds ONNX-style attributes (kernel_shape, strides, pads as
    [top, left, bottom, right], dilations, group, axis, ...) and `activation`: the list of
    activations fused into it (e.g. ["Relu"], ["Clip"] with hyper["clip"] = (lo, hi),
    ["HardSwish"], ["Swish"]). `params` are the (folded) tensors: W, B for Conv/Gemm."""

    name: str
    op: str
    hyper: dict[str, Any] = field(default_factory=dict)
    params: dict[str, np.ndarray] = field(default_factory=dict)
    inputs: list[str] = field(default_factory=list)
    output_shape: Shape = (1, 1, 1, 1)
    onnx_nodes: list[str] = field(default_factory=list)
    # params taken verbatim from an ONNX tensor: key -> tensor name (shared tensors count once)
    param_sources: dict[str, str] = field(default_factory=dict)
    # the ONNX tensor the layer computes (set by the ONNX import; None for zoo-built layers):
    # where a deployment stores the layer's output, its fp16 reference rounds that tensor
    output_tensor: str | None = None

    @property
    def param_count(self) -> int:
        return int(sum(p.size for p in self.params.values()))

    def param_items(self) -> Iterator[tuple[str, int]]:
        """(identity, size) of every parameter: the ONNX tensor name for a verbatim one
        (so a tensor shared between layers is one parameter), else "layer:key"."""
        for key, arr in self.params.items():
            yield self.param_sources.get(key) or f"{self.name}:{key}", int(arr.size)

    @property
    def out_elements(self) -> int:
        return prod(self.output_shape)


@dataclass
class GraphMemo:
    """Orders a CNN works out from its own graph (`CNN.order`, `CNN.edges`), kept until a
    layer or edge is added or removed: the search asks for them thousands of times."""
    stamp: tuple[int, int] = (0, 0)                  # (layers, edges) when they were made
    orders: dict[str, tuple] = field(default_factory=dict)


@dataclass
class CNN:
    """A DAG of layers. Node attribute "layer" holds the Layer; edge attribute "shape" the
    [N, C, H, W] of the tensor it carries (the producer's output)."""

    name: str
    graph: nx.DiGraph = field(default_factory=nx.DiGraph)
    source: str | None = None           # path of the ONNX file it was read from, if any
    original_param_count: int | None = None  # before BatchNorm folding
    outputs: list[str] = field(default_factory=list)  # layers whose output leaves the CNN
    # tensors whose shapes ONNX shape inference left unknown, taken from one ONNX Runtime
    # run (csdf/onnx_ort_shapes.py); 0 for most models
    shapes_from_ort: int = 0
    # each ONNX graph input's static shape as imported (csdf/onnx_inputs.py), and the inputs
    # whose dynamic batch dimension became 1
    input_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    batch_fixed: tuple[str, ...] = ()
    memo: GraphMemo = field(default_factory=GraphMemo, init=False, repr=False, compare=False)
    # a model already quantized (QDQ): its scales by layer (csdf/onnx_qdq.py `Quantized`)
    quantized: Any = None

    def add_layer(self, layer: Layer) -> None:
        self.graph.add_node(layer.name, layer=layer)
        for src in layer.inputs:
            self.graph.add_edge(src, layer.name, shape=self.layer(src).output_shape)

    def layer(self, name: str) -> Layer:
        return self.graph.nodes[name]["layer"]

    def _cached(self, what: str, make):
        """`make()` kept in `memo` until a layer or edge is added or removed (a copy is
        returned, callers may edit it)."""
        stamp = (len(self.graph), len(self.graph.edges))
        memo = self.memo
        if memo.stamp != stamp:
            memo.stamp, memo.orders = stamp, {}
        hit = memo.orders.get(what)
        if hit is None:
            hit = memo.orders[what] = tuple(make())
        return list(hit)

    def order(self) -> list[str]:
        """Layer names in a deterministic topological order (ties by insertion order)."""
        def make():
            index = {n: i for i, n in enumerate(self.graph.nodes)}
            return nx.lexicographical_topological_sort(self.graph, key=index.__getitem__)
        return self._cached("order", make)

    def layers(self) -> Iterator[Layer]:
        for name in self.order():
            yield self.layer(name)

    def edges(self) -> list[tuple[str, str]]:
        """Edges in a stable order: by producer, then consumer, topological positions."""
        def make():
            pos = {n: i for i, n in enumerate(self.order())}
            return sorted(self.graph.edges, key=lambda e: (pos[e[0]], pos[e[1]]))
        return self._cached("edges", make)

    def edge_shape(self, src: str, dst: str) -> Shape:
        return self.graph.edges[src, dst]["shape"]

    def edge_elements(self, src: str, dst: str) -> int:
        return prod(self.edge_shape(src, dst))

    @property
    def param_count(self) -> int:
        """Parameters stored once each: an ONNX initializer read by two layers counts once."""
        seen: dict[str, int] = {}
        for layer in self.layers():
            for ident, size in layer.param_items():
                seen.setdefault(ident, size)
        return sum(seen.values())

    @property
    def edge_elements_total(self) -> int:
        return sum(self.edge_elements(u, v) for u, v in self.edges())


_EDGE_NAME = re.compile(r"^(?P<cnn>[^.]+)\.(?P<src>.+)->(?P<dst>.+?)(?:\((?P<copy>[1-9]\d*)\))?$")


@dataclass(frozen=True, order=True)
class EdgeId:
    """The identity of one edge in plans, reports and deployments, written "cnn.src->dst",
    or "cnn.src->dst(k)" for copy k (1 or 2) of a double-buffered pipeline edge (copy 0:
    the edge itself). A dst of "*" names one produced tensor stored once for all its
    readers (explorer/memory/tensors.py). `str` writes the name, `parse` reads it back; the
    CNN's name holds no ".", a layer's may (src runs to the last "->"). Each name has one
    identity and back: "(0)" is no copy number, so "a.b->c(0)" is the edge to layer "c(0)"."""

    cnn: str
    src: str
    dst: str
    copy: int = 0

    def __str__(self) -> str:
        base = f"{self.cnn}.{self.src}->{self.dst}"
        return f"{base}({self.copy})" if self.copy else base

    @classmethod
    def parse(cls, name: object, where: str = "edge name") -> EdgeId:
        """The identity written in `name`; InputError naming `where` for anything else."""
        m = _EDGE_NAME.match(name) if isinstance(name, str) else None
        if m is None:
            raise InputError(f"{where}: {name!r} is not an edge name 'cnn.src->dst' or "
                             f"'cnn.src->dst(k)'")
        return cls(m["cnn"], m["src"], m["dst"], int(m["copy"] or 0))

    @property
    def ends(self) -> tuple[str, str]:
        """(src, dst): the edge in its CNN's graph."""
        return self.src, self.dst

    def with_copy(self, copy: int) -> EdgeId:
        """The same edge, copy `copy` (0: the edge itself)."""
        return EdgeId(self.cnn, self.src, self.dst, copy)


def edge_name(cnn: str, src: str, dst: str, copy: int = 0) -> str:
    """Qualified edge name used in plans and reports: str(EdgeId(cnn, src, dst, copy))."""
    return str(EdgeId(cnn, src, dst, copy))
