"""Constants of an ONNX graph, read wherever they appear in node order, and the nodes that
matter.

Exporters write constants in many places: initializers, `Constant` nodes placed after the
node whose consumer reads them (PyTorch writes a Clip's bounds after the Conv that feeds the
Clip), and small computations on constants or on static shapes (`Shape` -> `Gather` ->
`Unsqueeze` -> `Concat` -> `Reshape`, as `x.view(b, g, -1, h, w)` exports). All of them are
values before the first layer is built: `fold_constants` evaluates every node whose inputs
are all known, with ONNX's own reference evaluator (`onnx.reference`), until nothing changes.
`live_nodes` drops nodes whose outputs reach no graph output (ONNX Runtime does the same).
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator

# Never folded: their value is not a function of their inputs.
NONDETERMINISTIC = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
                    "Multinomial", "Bernoulli", "Dropout"}


def opsets(model: onnx.ModelProto) -> dict[str, int]:
    return {o.domain or "": int(o.version) for o in model.opset_import}


def constant_tensors(graph: onnx.GraphProto) -> dict[str, onnx.TensorProto]:
    """The graph's constant tensors by name, as stored: its initializers and the `value` of
    its Constant nodes."""
    consts = {t.name: t for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant":
            value = next((a.t for a in node.attribute if a.name == "value"), None)
            if value is not None:
                consts[node.output[0]] = value
    return consts


def _constant_value(node: onnx.NodeProto) -> np.ndarray:
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    if "value" in attrs:
        return numpy_helper.to_array(attrs["value"])
    key, value = next(iter(attrs.items()))
    dtype = {"value_float": np.float32, "value_floats": np.float32, "value_int": np.int64,
             "value_ints": np.int64}.get(key)
    return np.asarray(value, dtype=dtype)


def fold_constants(model: onnx.ModelProto, shapes: dict[str, tuple[int, ...]],
                   live: set[int]) -> tuple[dict[str, np.ndarray], set[int]]:
    """Every constant tensor (initializers, Constant nodes, Shape/Size of a static tensor,
    outputs of nodes whose inputs are all constant) and the indices of the nodes folded."""
    graph = model.graph
    consts = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
    inputs = {v.name for v in graph.input} - set(consts)
    versions = opsets(model)
    folded: set[int] = set()
    changed = True
    while changed:
        changed = False
        for i, node in enumerate(graph.node):
            if i in folded or i not in live:
                continue
            value = _fold(node, consts, shapes, inputs, versions)
            if value is not None:
                for name, arr in zip(node.output, value):
                    consts[name] = arr
                folded.add(i)
                changed = True
    return consts, folded


def _fold(node: onnx.NodeProto, consts: dict, shapes: dict, inputs: set[str],
          versions: dict[str, int]) -> list[np.ndarray] | None:
    op = node.op_type
    if node.domain not in ("", "ai.onnx"):
        return None
    if op == "Constant":
        return [_constant_value(node)]
    if op in ("Shape", "Size") and node.input[0] not in consts:
        shape = shapes.get(node.input[0])
        if shape is None or any(d <= 0 for d in shape):
            return None
        if op == "Size":
            return [np.asarray(int(np.prod(shape)), np.int64)]
        attrs = {a.name: a.i for a in node.attribute}
        return [np.asarray(shape, np.int64)[attrs.get("start", 0):attrs.get("end")]]
    real = [t for t in node.input if t]
    if op in NONDETERMINISTIC or not real or any(t not in consts or t in inputs for t in real):
        return None
    try:
        ev = ReferenceEvaluator(node, opsets=versions)
        feeds = {t: consts[t] for t in real}
        return [np.asarray(v) for v in ev.run(None, feeds)]
    except Exception:   # an op the reference evaluator lacks: left to the graph
        return None


def live_nodes(graph: onnx.GraphProto) -> set[int]:
    """Indices of the nodes some graph output depends on."""
    producer = {o: i for i, n in enumerate(graph.node) for o in n.output if o}
    live: set[int] = set()
    stack = [producer[o.name] for o in graph.output if o.name in producer]
    while stack:
        i = stack.pop()
        if i in live:
            continue
        live.add(i)
        stack += [producer[t] for t in graph.node[i].input if t in producer]
    return live


def static_shapes(model: onnx.ModelProto) -> tuple[dict[str, tuple[int, ...]], dict[str, int]]:
    """Static shapes and element types of the graph's tensors, as shape inference gave them."""
    shapes, types = {}, {}
    graph = model.graph
    for value in [*graph.input, *graph.value_info, *graph.output]:
        tt = value.type.tensor_type
        types[value.name] = tt.elem_type
        if tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim):
            shapes[value.name] = tuple(d.dim_value for d in tt.shape.dim)
    return shapes, types


def reinfer(model: onnx.ModelProto, consts: dict[str, np.ndarray], folded: set[int]
            ) -> tuple[dict[str, tuple[int, ...]], dict[str, int]]:
    """Shapes again, with folded values as initializers: shape inference then sees the
    shape tensors PyTorch computes from `Shape` nodes (a 5-D view's target) as constants."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    graph = copy.graph
    kept = [n for i, n in enumerate(graph.node) if i not in folded]
    have = {i.name for i in graph.initializer}
    needed = {t for n in kept for t in n.input if t in consts and t not in have}
    del graph.node[:]
    graph.node.extend(kept)
    graph.initializer.extend(numpy_helper.from_array(np.asarray(consts[t]), t) for t in sorted(needed))
    del graph.value_info[:]
    try:
        return static_shapes(onnx.shape_inference.infer_shapes(copy, data_prop=True))
    except Exception:   # keep what the first inference gave
        return static_shapes(model)
