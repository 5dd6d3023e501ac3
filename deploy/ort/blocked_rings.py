"""Rows rings stored row-blocked, so a by-parts step's conv reads and writes the arena without
ONNX Runtime's NCHWc reorders.

Why: a ring (an edge whose producer or consumer runs by parts) holds rows height-outermost,
[S, N, C, W] (deploy/steps/parts.py), and a part model gathers its window rows, transposes
them to NCHW, and ONNX Runtime wraps its NCHWc Conv in a ReorderInput and a ReorderOutput.
Measured on MobileNetV2's features_2_dw part of 2 rows (one thread): the two reorders took
20% of the part's kernel time, beside the transposes and the conv itself; the by-parts
layers of MobileNetV2 plans near the least memory cost 2-5x their whole-layer time.

How: with C a multiple of the block b, a ring row is stored as [N, C/b, W, b], the NCHWc
layout of that one row (the same bytes as [N, C, W]). Then
- a window step (gather, per-row mask, Transpose [1, 2, 0, 3], ReorderInput) gathers
  [r, N, C/b, W, b] from the ring (declared 5-D) and one 5-D Transpose makes it
  [N, C/b, r, W, b], the NCHWc window (a free Reshape gives the kernel its 4-D shape): the
  ReorderInput goes; on the way out the ReorderOutput becomes a free Reshape to 5-D and the
  Transpose a 5-D one writing the ring;
- a one-row step (deploy/steps/rowwise.py: [k, N, C, W] seen as k one-row images
  [k*N, C, 1, W]) reads and writes NCHWc rows as they are: both reorders just go, and its
  conv writes the ring.
A per-row mask multiplies whole rows, so it is the same on either layout. Measured with one
thread on a MobileNetV2 plan's parts (hot loop): 17-30% less per call. Like
deploy/ort/blocked.py, this rewrites the graph ONNX Runtime optimised on this machine, at
run time; the shipped step models stay plain.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper, numpy_helper

NCHWC = "com.microsoft.nchwc"
RING_IN = [1, 2, 0, 3]      # gathered rows [r, N, C, W] -> NCHW
RING_OUT = [2, 0, 1, 3]     # NCHW output -> rows [k, N, C, W]
ROW_OPS = {"Mul", "Add", "Sub"}


@dataclass(frozen=True)
class NodeAttrs:
    """The attributes of an ONNX node the layout passes read, with ONNX's defaults: a
    Transpose's `perm` (() when not given), a Gather's or Concat's `axis`, a ReorderOutput's
    `channels` and an NCHWc reorder's `channels_last`."""
    perm: tuple[int, ...] = ()
    axis: int = 0
    channels: int = 0
    channels_last: int = 0

    @classmethod
    def of(cls, node: onnx.NodeProto) -> NodeAttrs:
        a = {x.name: helper.get_attribute_value(x) for x in node.attribute}
        return cls(tuple(int(v) for v in a.get("perm", ())), int(a.get("axis", 0)),
                   int(a.get("channels", 0)), int(a.get("channels_last", 0)))


def plain_reorder(node: onnx.NodeProto | None, op: str) -> bool:
    """`node` is ONNX Runtime's NCHWc `op` (ReorderInput / ReorderOutput) to or from plain
    NCHW (not channels-last)."""
    return (node is not None and node.domain == NCHWC and node.op_type == op
            and not NodeAttrs.of(node).channels_last)


class Graph:
    """Readers, producers, constants and (inferred) shapes of an optimised step graph."""

    def __init__(self, model: onnx.ModelProto):
        self.g = model.graph
        self.users: dict[str, list[onnx.NodeProto]] = {}
        self.producer: dict[str, onnx.NodeProto] = {}
        for node in self.g.node:
            for name in node.input:
                self.users.setdefault(name, []).append(node)
            for name in node.output:
                self.producer[name] = node
        self.consts = {t.name: numpy_helper.to_array(t) for t in self.g.initializer
                       if t.data_location != onnx.TensorProto.EXTERNAL}   # shapes, masks
        self.outputs = {o.name for o in self.g.output}
        self.declared = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
                         for v in list(self.g.input) + list(self.g.output)}
        self.declared.update({t.name: list(t.dims) for t in self.g.initializer})
        self._shapes: dict[str, list[int] | None] = {}

    def sole(self, name: str) -> onnx.NodeProto | None:
        use = self.users.get(name, [])
        return use[0] if len(use) == 1 and name not in self.outputs else None

    def shape(self, name: str) -> list[int] | None:
        """The static shape of `name`, followed through the few standard ops a ring step has
        before its NCHWc nodes (onnx's shape inference would do it, but holds ~8 MiB of RSS
        after one call: a footprint that `explore run` measures)."""
        if name not in self._shapes:
            self._shapes[name] = None          # cycles and unknown ops: no shape
            self._shapes[name] = self._infer(name)
        return self._shapes[name]

    def _infer(self, name: str) -> list[int] | None:
        if name in self.declared:
            return self.declared[name]
        node = self.producer.get(name)
        if node is None or node.domain != "":
            return None
        ins = [self.shape(x) for x in node.input]
        op = node.op_type
        if op in ("Cast", "Relu", "Clip", "Identity", "Sigmoid"):
            return ins[0]
        if op == "Reshape":
            dims = self.consts.get(node.input[1])
            return None if dims is None or any(int(d) <= 0 for d in dims) else [int(d) for d in dims]
        if op == "Gather" and ins[0] is not None and ins[1] is not None:
            axis = NodeAttrs.of(node).axis
            return ins[0][:axis] + ins[1] + ins[0][axis + 1:]
        if op == "Transpose" and ins[0] is not None:
            return [ins[0][p] for p in NodeAttrs.of(node).perm]
        if op in ROW_OPS | {"Div"} and all(x is not None for x in ins):
            try:
                return list(np.broadcast_shapes(*[tuple(x) for x in ins]))
            except ValueError:
                return None
        return None

    def per_row(self, name: str) -> bool:
        """A tensor broadcast over every axis of [r, N, C, W] but the first (a row mask), or
        a scalar: the same on plain and row-blocked rows."""
        shape = self.shape(name)
        if shape is None or len(shape) > 4 or any(d < 0 for d in shape):
            return False
        return all(d == 1 for d in (shape[1:] if len(shape) == 4 else shape))


@dataclass
class Match:
    """How a step reads or writes one ring port: `kind` "window" (Transpose to or from NCHW)
    or "rows" (one-row images), `node` that Transpose or Reshape, `reorder` the NCHWc
    reorder beside it, `chain` the per-row elementwise nodes between the port's Gather and
    `node` (masks)."""
    kind: str
    node: onnx.NodeProto
    reorder: onnx.NodeProto
    chain: list = field(default_factory=list)


def ring_input(graph: Graph, port: str) -> Match | None:
    """How input `port` is read, when it is a ring read only as above, else None."""
    t, node, chain = port, graph.sole(port), []
    if node is not None and node.op_type == "Gather" and node.input[0] == t \
            and NodeAttrs.of(node).axis == 0:
        t, node = node.output[0], graph.sole(node.output[0])
    while node is not None and node.op_type in ROW_OPS and node.domain == "" \
            and all(graph.per_row(x) for x in node.input if x != t):
        chain.append((node, t))
        t, node = node.output[0], graph.sole(node.output[0])
    if node is None or node.domain != "":
        return None
    reorder = graph.sole(node.output[0])
    if not plain_reorder(reorder, "ReorderInput"):
        return None
    if node.op_type == "Transpose" and list(NodeAttrs.of(node).perm) == RING_IN:
        return Match("window", node, reorder, chain)
    if node.op_type == "Reshape" and _one_row_images(graph, node):
        return Match("rows", node, reorder, chain)
    return None


def ring_output(graph: Graph, port: str) -> Match | None:
    """How output `port` is written (`node`: the Transpose or Reshape writing it, or its
    Identity copies' source), when it is a ring written only as above, else None."""
    node = graph.producer.get(port)
    if node is not None and node.op_type == "Identity":
        node = graph.producer.get(node.input[0])
    if node is None or node.domain != "":
        return None
    reorder = graph.producer.get(node.input[0])
    if not plain_reorder(reorder, "ReorderOutput"):
        return None
    if node.op_type == "Transpose" and list(NodeAttrs.of(node).perm) == RING_OUT:
        return Match("window", node, reorder)
    if node.op_type == "Reshape" and _from_row_images(graph, reorder):
        return Match("rows", node, reorder)
    return None


def copies(graph: Graph, node: onnx.NodeProto) -> set[str] | None:
    """The output ports `node`'s result is written to (itself, or Identity copies), or None
    when anything else reads it."""
    out = node.output[0]
    ports = {out} if out in graph.outputs else set()
    for reader in graph.users.get(out, []):
        if reader.op_type != "Identity" or reader.output[0] not in graph.outputs:
            return None
        ports.add(reader.output[0])
    return ports


def _one_row_images(graph: Graph, node: onnx.NodeProto) -> bool:
    """A Reshape of rows [k, N, C, W] to one-row images [k*N, C, 1, W]."""
    images = graph.shape(node.output[0])
    if images is None and node.input[1] in graph.consts:
        images = [int(v) for v in graph.consts[node.input[1]]]
    return images is not None and len(images) == 4 and images[2] == 1


def _from_row_images(graph: Graph, reorder: onnx.NodeProto) -> bool:
    """The NCHWc chain ending in `reorder` (a ReorderOutput) started from one-row images:
    back through NCHWc nodes (first inputs) to a ReorderInput of such a Reshape. Shape
    inference stops at NCHWc nodes, so the images' shape is read where it was made."""
    node = graph.producer.get(reorder.input[0])
    while node is not None and node.domain == NCHWC and node.op_type != "ReorderInput":
        node = graph.producer.get(node.input[0])
    source = node                     # a conv reading plain images (few input channels)
    if plain_reorder(node, "ReorderInput"):
        source = graph.producer.get(node.input[0])
    return (source is not None and source.op_type == "Reshape" and source.domain == ""
            and _one_row_images(graph, source))


def rewrite(model: onnx.ModelProto, ports: frozenset[str], block: int) -> onnx.ModelProto:
    """`model` (changed in place) reading and writing its ring `ports` row-blocked; ports
    that are not rings are left to deploy/ort_blocked.strip.

    A ring port is declared [S, N, C/b, W, b] (window steps; a one-row step's output: the
    images [k*N, C, 1, W] its conv writes), the same bytes as the view the executor binds
    (the backend binds a view with the shape the model declares), so no Reshape copies a
    graph input or output: the gather reads the arena, the conv or the 5-D Transpose writes
    it."""
    edit = _Editor(Graph(model), block)
    inputs = {i.name for i in edit.g.input}
    matches = {port: (ring_input if port in inputs else ring_output)(edit.graph, port)
               for port in sorted(ports)}    # all before any change: the checks read the graph
    for port, m in matches.items():
        if m is not None:
            (edit.ring_in if port in inputs else edit.ring_out)(port, m)
    edit.finish()
    return model


class _Editor:
    """The changes `rewrite` makes to one graph: new Reshapes and shape constants, ports
    declared anew, nodes dropped at the end."""

    def __init__(self, graph: Graph, block: int):
        self.graph, self.g, self.block = graph, graph.g, block
        self.values = {v.name: v for v in list(self.g.input) + list(self.g.output)}
        self.drop: list[onnx.NodeProto] = []
        self.added = 0
        self.done: set[str] = set()   # outputs rewritten (Identity copies share one)
        self.made: set[str] = set()   # 5-D views of an NCHWc result made so far

    def const(self, dims: list[int]) -> str:
        self.added += 1
        name = f"ring_shape_{self.added}"
        self.g.initializer.append(numpy_helper.from_array(np.array(dims, np.int64), name))
        return name

    def reshape(self, src: str, dims: list[int], out: str) -> None:
        self.g.node.append(helper.make_node("Reshape", [src, self.const(dims)], [out],
                                            name=f"ring_{out}"))

    def declare(self, name: str, dims: list[int]) -> None:
        shape = self.values[name].type.tensor_type.shape
        del shape.dim[:]
        for d in dims:
            shape.dim.add().dim_value = int(d)

    @staticmethod
    def perm(node: onnx.NodeProto, order: list[int]) -> None:
        for a in node.attribute:
            if a.name == "perm":
                a.CopyFrom(helper.make_attribute("perm", order))

    def ring_in(self, port: str, m: Match) -> None:
        """Gather (and mask) 5-D rows; the window's Transpose 5-D, or the one-row images as
        they are; the ReorderInput goes."""
        graph, b = self.graph, self.block
        rows, n, c, w = graph.declared[port]          # the ring's slots
        window = graph.shape(m.node.input[0])[0]      # rows gathered (or all)
        self.declare(port, [rows, n, c // b, w, b])
        for node, t in m.chain:                       # per-row operands against 5-D rows
            for i, x in enumerate(node.input):
                shape = graph.shape(x)
                if x == t or len(shape) != 4 or shape[0] == 1:
                    continue
                src = graph.producer.get(x)
                if src is not None and src.op_type == "Reshape" and graph.sole(x) == node:
                    src.input[1] = self.const([shape[0], 1, 1, 1, 1])   # the mask's own
                else:
                    self.reshape(x, [shape[0], 1, 1, 1, 1], f"{x}_5d")
                    node.input[i] = f"{x}_5d"
        if m.kind == "window":
            self.perm(m.node, [1, 2, 0, 3, 4])
            m.node.output[0] = f"{m.node.output[0]}_5d"
            self.reshape(m.node.output[0], [n, c, window, w], m.reorder.output[0])
        else:
            _rename_readers(self.g, m.reorder.output[0], m.reorder.input[0])
        self.drop.append(m.reorder)

    def ring_out(self, port: str, m: Match) -> None:
        """The NCHWc result viewed 5-D and transposed into the ring, or (one-row images)
        written by the conv itself; the ReorderOutput goes when nothing else reads it."""
        graph, b = self.graph, self.block
        if m.node.output[0] in self.done:
            return
        self.done.add(m.node.output[0])
        rows, n, c, w = graph.declared[port]          # the part's rows
        if m.kind == "window":
            five_d = f"{m.reorder.input[0]}_5d"       # one Reshape however many rings read it
            if five_d not in self.made:
                self.reshape(m.reorder.input[0], [n, c // b, rows, w, b], five_d)
                self.made.add(five_d)
            m.node.input[0] = five_d
            self.perm(m.node, [2, 0, 1, 3, 4])
            for name in copies(graph, m.node) or {port}:
                self.declare(name, [rows, n, c // b, w, b])
        elif copies(graph, m.node) == {port} and graph.sole(m.reorder.input[0]) == m.reorder:
            graph.producer[m.reorder.input[0]].output[0] = port     # the conv writes the arena
            self.declare(port, [rows * n, c, 1, w])
            self.drop.append(m.node)
        else:
            m.node.input[0] = m.reorder.input[0]
        if m.reorder not in self.drop and not any(
                m.reorder.output[0] in x.input for x in self.g.node if x not in self.drop):
            self.drop.append(m.reorder)

    def finish(self) -> None:
        """Drop the nodes, the shape constants no node reads any more, the stale shapes;
        put the nodes back in an order ONNX accepts."""
        g = self.g
        for node in self.drop:
            if node in g.node:
                g.node.remove(node)
        used = {x for node in g.node for x in node.input}
        for t in [t for t in g.initializer if t.name not in used
                  and t.data_location != onnx.TensorProto.EXTERNAL]:
            g.initializer.remove(t)
        _toposort(g)
        del g.value_info[:]


def _rename_readers(g: onnx.GraphProto, old: str, new: str) -> None:
    for node in g.node:
        for i, name in enumerate(node.input):
            if name == old:
                node.input[i] = new


def _toposort(g: onnx.GraphProto) -> None:
    """Nodes in an order where every input is produced before it is read (ONNX requires it;
    the Reshapes above were appended at the end)."""
    ready = {i.name for i in g.input} | {t.name for t in g.initializer} | {""}
    nodes, ordered = list(g.node), []
    while nodes:
        rest = []
        for node in nodes:
            if all(x in ready for x in node.input):
                ordered.append(node)
                ready.update(node.output)
            else:
                rest.append(node)
        if len(rest) == len(nodes):
            raise ValueError(f"graph {g.name}: a cycle or a missing input after the ring rewrite")
        nodes = rest
    del g.node[:]
    g.node.extend(ordered)
