"""Region steps (deploy/steps/regions.py) on row-blocked rings, so a band's convs pass their
rows to each other in ONNX Runtime's NCHWc layout instead of reordering at every window.

Why: ONNX Runtime keeps a chain of NCHWc convs blocked, but a region step's window is a
Concat along the rows of [rows gathered from the ring, rows an earlier firing of the band
made] and its ring writes are plain: between two NCHWc convs sit a ReorderOutput, the
Concat (or a Slice) and a ReorderInput, and every ring gathered or written is plain too.
Measured on a MobileNetV2 least-memory band (12 firings, one thread, ORT's profiler): the
reorders were 23% of the band's kernel time.

How: the plain nodes of the optimised graph fall into islands (nodes joined by the plain
tensors they pass), each bounded by NCHWc nodes (through ReorderInput / ReorderOutput) and
ring ports. An island whose nodes all compute the same on a blocked tensor viewed
[N, C/b, H, W, b] (Concat and Slice on rows, Concat on channels of whole blocks, elementwise
ops on equal shapes, the rows <-> NCHW Transposes and Reshapes of a ring) is rewritten:
  - a ReorderOutput becomes a Reshape of the NCHWc tensor to 5-D (no copy), a ReorderInput
    a Reshape back to the kernel's 4-D shape;
  - a ring port is declared row-blocked, [S, N, C/b, W, b], each row in NCHWc (the layout of
    deploy/ort/blocked_rings.py, so part steps and region steps share rings); its Transposes
    become 5-D ones and its one-row Reshapes 5-D ones.
An island's ring ports go blocked together or not at all (one `StepForm` group; the edges
are chosen with every other step's form by deploy/ort/blocked.choose); an island with no
ring port is always rewritten. Like deploy/ort/blocked.py, this rewrites the graph ONNX
Runtime optimised on this machine, at load time; the shipped region models stay plain.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper, numpy_helper

from deploy.ort.blocked_rings import RING_IN, RING_OUT, Graph, NodeAttrs, plain_reorder

UNARY = {"Relu", "Clip", "Identity", "Sigmoid", "Cast", "LeakyRelu", "HardSigmoid", "Tanh"}
BINARY = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Sum"}


@dataclass
class Island:
    """Plain nodes joined by the tensors they pass; `inputs`/`outputs`: its ring ports;
    `channels`: each tensor's channel count; `why`: why it stays plain (empty: it may go
    blocked)."""
    nodes: list = field(default_factory=list)
    inputs: set = field(default_factory=set)
    outputs: set = field(default_factory=set)
    channels: dict = field(default_factory=dict)
    why: str = ""

    @property
    def ports(self) -> set[str]:
        return self.inputs | self.outputs


def _data_inputs(node: onnx.NodeProto) -> list[str]:
    """The inputs of a plain node that carry rows (not shapes, indices, bounds)."""
    if node.op_type in ("Gather", "Reshape", "Slice", "Transpose", "ReorderInput") \
            or node.op_type in UNARY:
        return [node.input[0]]
    return [x for x in node.input if x]


def islands(model: onnx.ModelProto, block: int) -> list[Island]:
    """The plain islands of an optimised region graph, each judged for a block of `block`
    channels."""
    graph = Graph(model)
    ports_in = {i.name for i in model.graph.input}
    members = [n for n in model.graph.node
               if n.domain == "" or plain_reorder(n, "ReorderInput") or plain_reorder(n, "ReorderOutput")]
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def touches(node: onnx.NodeProto) -> list[str]:
        if node.op_type == "ReorderOutput":
            return [node.output[0]]
        return _data_inputs(node) + ([] if node.op_type == "ReorderInput" else list(node.output))

    for node in members:
        names = touches(node)
        for x in names[1:]:
            parent[find(x)] = find(names[0])
    groups: dict[str, Island] = {}
    for node in members:
        groups.setdefault(find(touches(node)[0]), Island()).nodes.append(node)
    out = list(groups.values())
    for isle in out:
        _judge(graph, isle, ports_in, block)
    return out


def _judge(graph: Graph, isle: Island, ports_in: set[str], block: int) -> None:
    """Fill the island's ports and channels, or say why it stays plain."""
    mine = {id(n) for n in isle.nodes}
    made = {x for n in isle.nodes if n.op_type != "ReorderInput" for x in n.output}

    def no(why: str) -> None:
        if not isle.why:
            isle.why = why

    for node in isle.nodes:              # the nodes' order is the graph's (topological)
        op, a = node.op_type, NodeAttrs.of(node)
        ins = [] if op == "ReorderOutput" else _data_inputs(node)
        for x in ins:
            if x in ports_in:
                shape = graph.declared.get(x, [])
                if node.op_type != "Gather" or a.axis != 0 or len(shape) != 4:
                    return no(f"input {x} is not a gathered ring")
                isle.inputs.add(x)
                isle.channels[x] = shape[2]
            elif x not in made and x not in isle.channels:
                return no(f"{x} comes from outside the island")
        c = [isle.channels.get(x) for x in ins]
        if op == "ReorderOutput":
            ch = a.channels
        elif op == "ReorderInput":
            ch = c[0]
        elif op == "Gather":
            ch = c[0]
        elif op == "Transpose":
            if list(a.perm) not in (RING_IN, RING_OUT):
                return no(f"Transpose {node.name}: perm {list(a.perm)}")
            ch = c[0]
        elif op == "Reshape":
            if _reshape_kind(graph, node) is None:
                return no(f"Reshape {node.name}: not a one-row ring view")
            ch = c[0]
        elif op == "Concat":
            axis = a.axis
            if axis not in (1, 2, -2) or any(v is None for v in c):
                return no(f"Concat {node.name} on axis {axis}")
            ch = sum(c) if axis == 1 else c[0]
            if axis != 1 and len(set(c)) != 1:
                return no(f"Concat {node.name}: channels {c}")
        elif op == "Slice":
            axes = graph.consts.get(node.input[3]) if len(node.input) > 3 else None
            if axes is None or [int(v) for v in np.ravel(axes)] not in ([2], [-2]):
                return no(f"Slice {node.name}: not on rows")
            ch = c[0]
        elif op in UNARY:
            if any(x and (graph.consts.get(x) is None or np.size(graph.consts[x]) != 1)
                   for x in node.input[1:]):
                return no(f"{op} {node.name}: bounds not scalar constants")
            ch = c[0]
        elif op in BINARY:
            if len(set(c)) != 1:
                return no(f"{op} {node.name}: operands {c}")
            ch = c[0]
        else:
            return no(f"{op} {node.name}")
        if ch is None or ch % block:
            return no(f"{op} {node.name}: {ch} channels, not whole blocks of {block}")
        for y in node.output:
            isle.channels[y] = ch
        if op == "ReorderInput":
            continue
        for y in node.output:            # every reader a member, or a ring port
            if y in graph.outputs:
                if not _ring_write(graph, node, y):
                    return no(f"output {y} is not a ring written by rows")
                isle.outputs.add(y)
            for reader in graph.users.get(y, []):
                if id(reader) not in mine:
                    return no(f"{y} is read by {reader.op_type} {reader.name} outside the island")
    for port in isle.ports:
        shape = graph.declared.get(port, [])
        if len(shape) != 4 or shape[1] != 1:
            return no(f"port {port}: shape {shape}")


def _reshape_kind(graph: Graph, node: onnx.NodeProto) -> str | None:
    """"in": one gathered row [1, N, C, W] -> [N, C, 1, W]; "out": [N, C, 1, W] -> one ring
    row [1, N, C, W] written to graph outputs only; else None."""
    dims = graph.consts.get(node.input[1])
    if dims is None or len(dims) != 4:
        return None
    dims = [int(d) for d in dims]
    src = graph.producer.get(node.input[0])
    if src is not None and src.op_type == "Gather" and dims[2] == 1:
        return "in"
    if dims[0] == 1 and _to_outputs(graph, node.output[0]):
        return "out"
    return None


def _to_outputs(graph: Graph, name: str) -> bool:
    """`name` reaches graph outputs only, itself or through Identity / Cast copies."""
    readers = graph.users.get(name, [])
    if any(r.op_type not in ("Identity", "Cast") for r in readers):
        return False
    return (name in graph.outputs or bool(readers)) and all(
        _to_outputs(graph, r.output[0]) for r in readers)


def _ring_write(graph: Graph, node: onnx.NodeProto, y: str) -> bool:
    """Output `y` (made by `node`) is a ring row block: written by a rows Transpose or a
    one-row Reshape, itself or through Identity / Cast copies."""
    while node is not None and node.op_type in ("Identity", "Cast"):
        node = graph.producer.get(node.input[0])
    if node is None:
        return False
    if node.op_type == "Transpose":
        return list(NodeAttrs.of(node).perm) == RING_OUT
    return node.op_type == "Reshape" and _reshape_kind(graph, node) == "out"


def rewrite(model: onnx.ModelProto, ports: frozenset[str], block: int) -> onnx.ModelProto:
    """A copy of optimised region graph `model` with every island whose ring ports are all
    in `ports` (islands without ports: always) computing on blocked tensors."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = Graph(model)
    g = model.graph
    values = {v.name: v for v in list(g.input) + list(g.output)}
    count = [0]

    def const(dims: list[int]) -> str:
        count[0] += 1
        name = f"region_shape_{count[0]}"
        g.initializer.append(numpy_helper.from_array(np.array(dims, np.int64), name))
        return name

    def declare(name: str) -> None:
        dims = values[name].type.tensor_type.shape.dim
        s, n, c, w = (d.dim_value for d in dims)
        del dims[:]
        for d in (s, n, c // block, w, block):
            dims.add().dim_value = int(d)

    for isle in islands(model, block):
        if isle.why or not isle.ports <= ports:
            continue
        for port in isle.ports:
            declare(port)
        for node in isle.nodes:
            op = node.op_type
            if op == "ReorderOutput":
                c = isle.channels[node.output[0]]
                _become_reshape(node, const([0, c // block, 0, -1, block]))
            elif op == "ReorderInput":
                c = isle.channels[node.input[0]]
                _become_reshape(node, const([0, c, 0, -1]))
            elif op == "Transpose":
                perm = list(NodeAttrs.of(node).perm) + [4]
                del node.attribute[:]
                node.attribute.append(helper.make_attribute("perm", perm))
            elif op == "Reshape":
                d = [int(v) for v in graph.consts[node.input[1]]]
                if _reshape_kind(graph, node) == "in":      # to [N, C, 1, W]
                    node.input[1] = const([d[0], d[1] // block, d[2], d[3], block])
                else:                                       # to [1, N, C, W]
                    node.input[1] = const([d[0], d[1], d[2] // block, d[3], block])
    used = {x for node in g.node for x in node.input}
    for t in [t for t in g.initializer if t.name not in used
              and t.data_location != onnx.TensorProto.EXTERNAL]:
        g.initializer.remove(t)          # the plain one-row shapes replaced above
    del g.value_info[:]
    return model


def _become_reshape(node: onnx.NodeProto, shape: str) -> None:
    node.op_type, node.domain = "Reshape", ""
    del node.attribute[:]
    node.input.append(shape)

