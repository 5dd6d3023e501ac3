"""Opaque layers: ONNX nodes the importer does not model, kept verbatim and run whole by
the backend (deploy/steps/opaque.py), so that no valid static-shape model is refused for an
unknown operator.

Grouping (`groups`): the nodes that cannot be layers form maximal connected groups (nodes
joined by a tensor). A group is made convex — a node on a path between two of its nodes
joins it — and groups that would form a cycle between them are merged, so every group can
run as one step. Each tensor that leaves a group becomes one opaque layer holding the
group's nodes it needs (a Split read by two layers gives two layers).

Per-pixel groups (`per_pixel`): a group that maps each (h, w) position's vector independently
may go by parts like an element-wise layer (one output row per phase). This is proved, not
guessed, by following the H and W axes of the group's 4-D NCHW inputs through every node:
element-wise ops and constants of extent 1 on those axes keep them; Transpose permutes
them; Reshape, Flatten, Squeeze and Unsqueeze keep them when the dims before, between and
after H and W keep their products; reductions, LayerNormalization, Softmax, Concat, Split,
Slice and Gather act on other axes; MatMul by a constant contracts the last axis. The group
is per-pixel when the output's H and W are the inputs' axes 2 and 3 again. Recognised this
way: LayerNorm over channels (also decomposed as ReduceMean/Sub/Pow/Sqrt/Div), channel
shuffle (Reshape to 5-D, Transpose, Reshape back), GELU (also as Erf), channels-last MatMul
(ConvNeXt's Linear layers between two Transposes). Any other node leaves the group whole.
"""
from __future__ import annotations

from math import prod
from typing import TYPE_CHECKING

import networkx as nx
import numpy as np
import onnx

from csdf.onnx_fusion import attributes

if TYPE_CHECKING:
    from csdf.model import Layer

UNARY = {"Relu", "Sigmoid", "Tanh", "Erf", "Sqrt", "Exp", "Log", "Neg", "Abs", "Reciprocal",
         "Softplus", "Softsign", "Gelu", "HardSigmoid", "HardSwish", "LeakyRelu", "Elu", "Selu",
         "Celu", "Clip", "Identity", "Dropout", "Cast", "Mish", "Floor", "Ceil", "Round", "Sign",
         "Sin", "Cos", "Not", "IsNaN", "ThresholdedRelu", "PRelu"}
BINARY = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean", "Where", "Equal",
          "Less", "Greater", "And", "Or", "BitShift", "Mod"}
REDUCE = {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
          "ReduceL2", "ReduceSumSquare", "ReduceLogSumExp", "ReduceLogSum"}
RESHAPES = {"Reshape", "Flatten", "Squeeze", "Unsqueeze"}


def groups(nodes, unknown: set[int], edges: list[tuple[int, int]]) -> list[set[int]]:
    """Convex, mutually acyclic groups covering `unknown` (node indices); `edges` are the
    (producer, consumer) pairs of node indices."""
    g = nx.DiGraph()
    g.add_nodes_from(range(len(nodes)))
    g.add_edges_from(edges)
    parts = [set(c) for c in nx.connected_components(g.subgraph(unknown).to_undirected())]
    while parts:
        # convex closure: nodes that are descendants and ancestors of the group
        parts = [p | (set().union(*(nx.descendants(g, n) for n in p))
                      & set().union(*(nx.ancestors(g, n) for n in p))) for p in parts]
        overlap = nx.Graph()
        overlap.add_nodes_from(range(len(parts)))
        first: dict[int, int] = {}
        for k, p in enumerate(parts):
            for n in p:
                overlap.add_edge(first.setdefault(n, k), k)
        if overlap.number_of_edges() > sum(1 for k in range(len(parts)) if overlap.has_edge(k, k)):
            parts = [set().union(*(parts[k] for k in c)) for c in nx.connected_components(overlap)]
            continue
        block = {n: ("g", k) for k, p in enumerate(parts) for n in p}
        cond = nx.DiGraph()
        cond.add_edges_from((block.get(u, u), block.get(v, v)) for u, v in g.edges
                            if block.get(u, u) != block.get(v, v))
        try:
            cycle = nx.find_cycle(cond)
        except nx.NetworkXNoCycle:
            return sorted(parts, key=min)
        ids = {x for edge in cycle for x in edge[:2]}
        joined = set().union(*(parts[x[1]] if isinstance(x, tuple) else {x} for x in ids))
        parts = [p for k, p in enumerate(parts) if ("g", k) not in ids] + [joined]
    return []


def _const_ok(const: np.ndarray, rank: int, axes: tuple[int, int]) -> bool:
    """A constant broadcast into a rank-`rank` tensor has extent 1 on the spatial axes."""
    shape = (1,) * (rank - const.ndim) + tuple(const.shape)
    return len(shape) == rank and all(shape[a] == 1 for a in axes)


def _reshape_axes(src: tuple, dst: tuple, axes: tuple[int, int]) -> tuple[int, int] | None:
    """Where H and W land after a reshape from `src` to `dst`, if the dims before, between
    and after them keep their products (else the reshape mixes positions)."""
    a, b = sorted(axes)
    want = [prod(src[:a]), src[a], prod(src[a + 1:b]), src[b], prod(src[b + 1:])]
    for i in range(len(dst)):
        if dst[i] != want[1] or prod(dst[:i]) != want[0]:
            continue
        for j in range(i + 1, len(dst)):
            if dst[j] == want[3] and prod(dst[i + 1:j]) == want[2] and prod(dst[j + 1:]) == want[4]:
                return (i, j) if axes[0] < axes[1] else (j, i)
    return None


def per_pixel(nodes, members: list[int], inputs: list[str], output: str,
              shapes: dict, consts: dict, opset: int) -> dict[str, int] | None:
    """For a per-pixel group, the H axis of every Reshape-like node's output (rewritten to
    1 row when the group runs by parts); None when the group is not provably per-pixel."""
    axes: dict[str, tuple[int, int]] = {}
    hw = None
    for t in inputs:
        shape = shapes.get(t)
        if shape is None or len(shape) != 4 or (hw is not None and tuple(shape[2:]) != hw):
            return None
        hw = tuple(shape[2:])
        axes[t] = (2, 3)
    h_axis: dict[str, int] = {}
    for i in members:
        node = nodes[i]
        result = _follow(node, axes, shapes, consts, opset)
        if result is None:
            return None
        for t in node.output:
            if t:
                axes[t] = result
                if node.op_type == "Reshape":
                    h_axis[t] = result[0]
    out_shape = shapes.get(output)
    if axes.get(output) != (2, 3) or out_shape is None or len(out_shape) != 4 or tuple(out_shape[2:]) != hw:
        return None
    for t in h_axis:   # a reshape by parts needs its full static output shape
        if t not in shapes:
            return None
    return h_axis


def _follow(node, axes: dict, shapes: dict, consts: dict, opset: int) -> tuple[int, int] | None:
    """The spatial axes of the node's outputs, or None when it mixes positions."""
    op, attrs = node.op_type, attributes(node)
    ins = [t for t in node.input if t]
    tracked = [t for t in ins if t in axes]
    if not tracked:
        return None
    ax = axes[tracked[0]]
    out = node.output[0]
    rank = len(shapes[tracked[0]]) if tracked[0] in shapes else None
    if op in UNARY:
        if ins[0] != tracked[0] or any(t not in consts for t in ins[1:]):
            return None
        if op == "PRelu" and not _const_ok(consts[ins[1]], rank or 0, ax):
            return None
        return ax
    if op in BINARY or op == "Concat":
        out_shape = shapes.get(out)
        if out_shape is None:
            return None
        r = len(out_shape)
        if op == "Concat" and int(attrs.get("axis", 0)) % r in ax:
            return None
        for t in ins:
            if t in axes:
                if axes[t] != ax or len(shapes.get(t, ())) != r:
                    return None
            elif t not in consts or (op != "Concat" and not _const_ok(consts[t], r, ax)):
                return None
        return ax
    if op == "Transpose":
        if not rank:
            return None
        perm = list(attrs["perm"]) if "perm" in attrs else list(range(rank))[::-1]
        return perm.index(ax[0]), perm.index(ax[1])
    if op in RESHAPES:
        src, dst = shapes.get(tracked[0]), shapes.get(out)
        return _reshape_axes(tuple(src), tuple(dst), ax) if src and dst else None
    if op in REDUCE or op in ("Softmax", "LogSoftmax", "LayerNormalization", "Split", "Slice", "Gather"):
        return _along(op, node, attrs, ins, ax, rank, consts, opset)
    if op == "MatMul" and len(ins) == 2 and ins[0] == tracked[0] and ins[1] in consts:
        w = consts[ins[1]]
        return ax if w.ndim == 2 and rank and rank - 1 not in ax else None
    return None


def _along(op, node, attrs, ins, ax, rank, consts, opset) -> tuple[int, int] | None:
    """Ops acting along given axes: fine when those are not H or W."""
    if not rank:
        return None
    if op in REDUCE:
        given = attrs.get("axes")
        if given is None and len(ins) > 1:
            given = consts.get(ins[1])
            if given is None:
                return None
        used = sorted({int(a) % rank for a in given}) if given is not None else list(range(rank))
        if set(used) & set(ax):
            return None
        if attrs.get("keepdims", 1):
            return ax
        return tuple(a - sum(u < a for u in used) for a in ax)  # type: ignore[return-value]
    if op in ("Softmax", "LogSoftmax"):
        axis = int(attrs.get("axis", -1 if opset >= 13 else 1)) % rank
        used = {axis} if opset >= 13 else set(range(axis, rank))
        return None if used & set(ax) else ax
    if op == "LayerNormalization":
        axis = int(attrs.get("axis", -1)) % rank
        return None if set(range(axis, rank)) & set(ax) else ax
    if op == "Split":
        return None if int(attrs.get("axis", 0)) % rank in ax else ax
    if op == "Slice":
        if len(ins) < 4 or any(t not in consts for t in ins[1:]):
            return None
        return None if {int(a) % rank for a in consts[ins[3]].reshape(-1)} & set(ax) else ax
    if op == "Gather":
        idx = consts.get(ins[1]) if len(ins) > 1 else None
        axis = int(attrs.get("axis", 0)) % rank
        if idx is None or idx.ndim > 1 or axis in ax:
            return None
        return ax if idx.ndim == 1 else tuple(a - (a > axis) for a in ax)  # type: ignore[return-value]
    return None


def estimate_work(nodes, members: list[int], shapes: dict, consts: dict) -> tuple[int, int]:
    """Multiply-accumulates (MatMul, Conv, Gemm by their shapes) and FLOPs (2 per MAC, plus
    one per output element of every other node) of a group, for the cost model."""
    macs = flops = 0
    for i in members:
        node = nodes[i]
        out = shapes.get(node.output[0])
        size = prod(out) if out else 0
        a = shapes.get(node.input[0]) if node.input else None
        if node.op_type in ("MatMul", "Gemm") and a:
            macs += size * int(a[-1])
        elif node.op_type == "Conv" and len(node.input) > 1:
            w = consts.get(node.input[1])
            macs += size * (int(np.prod(w.shape[1:])) if w is not None else 1)
        else:
            flops += size
    return macs, 2 * macs + flops


def node_bytes(node: onnx.NodeProto) -> bytes:
    return node.SerializeToString()


def build(imp, group: list[int]) -> list[tuple["Layer", str]]:
    """One opaque layer per tensor leaving `group` (node indices, sorted), with the group's
    nodes that tensor needs; `imp` is the running importer (csdf/onnx_import.py)."""
    from csdf.model import OPAQUE, Layer

    nodes = imp.model.graph.node
    members = set(group)
    made = {o: i for i in group for o in nodes[i].output if o}
    leaving = []
    for i in group:
        for o in nodes[i].output:
            readers = [u for u in imp.consumers.get(o, []) if u not in members and u not in imp.done]
            if o and (readers or o in imp.outputs):
                leaving.append(o)
    out = []
    for tensor in leaving:
        need, stack = set(), [made[tensor]]
        while stack:
            i = stack.pop()
            if i not in need:
                need.add(i)
                stack += [made[t] for t in nodes[i].input if t in made]
        sub = sorted(need)
        inputs = list(dict.fromkeys(t for i in sub for t in nodes[i].input
                                    if t and t not in made and t not in imp.consts))
        for t in inputs:
            if t not in imp.producer:
                raise imp.fail(nodes[sub[0]], f"input '{t}' is neither a graph input nor produced by a node")
            imp.shape4(t, f"input of the opaque group at node '{nodes[sub[0]].name}'")
        node = nodes[made[tensor]]
        shape = imp.shape4(tensor, f"output of node '{node.name or tensor}' ({node.op_type}), "
                                   f"leaving a group of nodes run whole")
        read = list(dict.fromkeys(t for i in sub for t in nodes[i].input if t in imp.consts))
        # stored parameters: floating tensors of more than one element (a scalar is an operand
        # folded into the kernel, as a fused Clip's bounds are)
        params = {t: imp.consts[t] for t in read
                  if np.issubdtype(imp.consts[t].dtype, np.floating) and imp.consts[t].size > 1}
        other = {t: imp.consts[t] for t in read if t not in params}
        h_axis = per_pixel(nodes, sub, inputs, tensor, imp.shapes, imp.consts, imp.opset)
        macs, flops = estimate_work(nodes, sub, imp.shapes, imp.consts)
        hyper = {
            "onnx_ops": [nodes[i].op_type for i in sub],
            "nodes": [node_bytes(nodes[i]) for i in sub],
            "tensor_inputs": inputs, "in_shapes": [list(imp.shapes[t]) for t in inputs],
            "in_types": [imp.types.get(t, onnx.TensorProto.FLOAT) for t in inputs],
            "output": tensor, "out_shape": list(imp.shapes[tensor]),
            "out_type": imp.types.get(tensor, onnx.TensorProto.FLOAT),
            "opset": [[o.domain or "", int(o.version)] for o in imp.model.opset_import],
            "ir_version": int(imp.model.ir_version), "consts": other,
            "per_pixel": h_axis is not None, "h_axis": h_axis or {},
            "shapes": {t: list(imp.shapes[t]) for t in (h_axis or {})},
            "macs": macs, "flops": flops,
        }
        layer = Layer(imp._unique(node.name or tensor), OPAQUE, hyper=hyper, params=params,
                      inputs=[imp.producer[t] for t in inputs], output_shape=shape,
                      onnx_nodes=[nodes[i].name or nodes[i].output[0] for i in sub],
                      param_sources={t: t for t in params})
        out.append((layer, tensor))
    return out


SPATIAL_OPS = {"Conv", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "LpPool",
               "ConvTranspose", "Resize", "Upsample", "LRN", "InstanceNormalization"}


def layouts(nodes, order: list[int], inputs: list[str], shapes: dict, consts: dict,
            opset: int) -> dict[str, tuple[int, int]]:
    """Where H and W sit in every tensor the axes can be followed to, from the graph
    input (NCHW: axes 2 and 3); a tensor with them elsewhere (channels-last, a 5-D shuffle
    view) is not an NCHW tensor, so the importer does not make the nodes reading it layers."""
    axes = {t: (2, 3) for t in inputs if len(shapes.get(t, ())) == 4}
    for i in order:
        node = nodes[i]
        if node.op_type in SPATIAL_OPS and len(shapes.get(node.output[0], ())) == 4:
            result = (2, 3)
        else:
            result = _follow(node, axes, shapes, consts, opset)
        if result is not None:
            for t in node.output:
                if t:
                    axes[t] = result
    return axes
