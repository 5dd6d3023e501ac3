"""Whole-layer tensors stored in ONNX Runtime's blocked NCHWc layout, so that a Conv or pool
step reads and writes the arena without reordering.

Why: at ORT_ENABLE_ALL, ONNX Runtime runs a Conv or pool as its blocked NCHWc kernel between
a `ReorderInput` and a `ReorderOutput`. A whole-model session reorders once per frame; a step
session reorders at every step, which on MobileNetV2's early depthwise convs costs 2-5x the
kernel (docs/run.md, "Kernel layout"). When both ends of an edge are such steps, the
edge can hold the blocked tensor instead: the producer's model loses its `ReorderOutput`,
the consumers' lose their `ReorderInput`, and the bytes, offsets and calls stay those of the plan.

How: ONNX Runtime writes the step model it optimised (`optimized_model_filepath`), with its
`com.microsoft.nchwc` nodes and reordered weights; that file is valid only on the machine
and ONNX Runtime version that wrote it, so it is made at run time, never shipped. An edge is
blocked only when its channels are a multiple of the CPU's block size (probed from
ONNX Runtime itself: 8 with AVX2, 16 with AVX-512), so the blocked tensor has exactly the
plain tensor's bytes. Elementwise steps (Add, Relu, Clip) and channel Concat compute the same
on blocked tensors when every tensor they touch is blocked alike, so they pass the layout on.
Rows rings (the edges of by-parts steps) are stored row-blocked the same way, each row in
NCHWc: deploy/ort/blocked_rings.py.
"""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

from deploy.ort import blocked_rings as rings
from deploy.ort.blocked_rings import NCHWC, plain_reorder
from deploy.ort.providers import CPU
from deploy.runtime.manifest import stored_as
from deploy.runtime.manifest_records import Manifest, Step
NEUTRAL_OPS = {"Add", "Sum", "Relu", "Clip", "Identity", "Concat"}


@dataclass
class StepForm:
    """What a step model's optimised graph allows: the input ports read only through a
    ReorderInput, the output ports written by a ReorderOutput (directly or through Identity
    copies of one ReorderOutput: such ports go blocked together), and whether the step is
    elementwise/concat (layout-neutral)."""
    accepts: set[str] = field(default_factory=set)
    emits: set[str] = field(default_factory=set)
    groups: list[set[str]] = field(default_factory=list)   # output ports blocked together
    neutral: bool = False
    inner: bool = False     # a region step with tensors it may block whatever its ports


def block_size(opts: ort.SessionOptions) -> int:
    """Channels per NCHWc block on this CPU, asked of ONNX Runtime: ReorderInput pads 4 channels
    (the least it takes) up to one block. `opts`: the caller's session options (thread pool).
    One small session per call: a caller keeps the answer (OrtBackend.prepare keeps it for its
    deployment)."""
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4, 1, 1])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)
    node = helper.make_node("ReorderInput", ["x"], ["y"], domain=NCHWC)
    model = helper.make_model(helper.make_graph([node], "probe", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 13),
                                             helper.make_opsetid(NCHWC, 1)])
    model.ir_version = 8
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=CPU)
    return int(sess.run(None, {"x": np.zeros([1, 4, 1, 1], np.float32)})[0].shape[1])


def optimized(path: str | Path, workdir: str | Path, opts: ort.SessionOptions) -> onnx.ModelProto:
    """The step model as ONNX Runtime optimises it on this machine (ORT_ENABLE_ALL)."""
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.log_severity_level = 3    # the "hardware specific" warning is the point here
    fd, target = tempfile.mkstemp(suffix=".onnx", dir=workdir)
    os.close(fd)
    opts.optimized_model_filepath = target
    ort.InferenceSession(str(path), opts, providers=CPU)
    model = onnx.load(target)
    os.unlink(target)
    return model


def step_form(model: onnx.ModelProto, original: onnx.ModelProto) -> StepForm:
    g = model.graph
    users: dict[str, list[onnx.NodeProto]] = {}
    producer: dict[str, onnx.NodeProto] = {}
    for node in g.node:
        for name in node.input:
            users.setdefault(name, []).append(node)
        for name in node.output:
            producer[name] = node
    form = StepForm()
    for port in g.input:
        use = users.get(port.name, [])
        if use and all(plain_reorder(n, "ReorderInput") for n in use):
            form.accepts.add(port.name)
    outputs = {o.name for o in g.output}
    for port in g.output:
        node = producer.get(port.name)
        if node is not None and plain_reorder(node, "ReorderOutput"):
            form.emits.add(port.name)
            form.groups.append({port.name})
    for node in g.node:          # ReorderOutput -> Identity copies -> several output ports
        if plain_reorder(node, "ReorderOutput") and node.output[0] not in outputs:
            readers = users.get(node.output[0], [])
            if readers and all(n.op_type == "Identity" and n.output[0] in outputs for n in readers):
                group = {n.output[0] for n in readers}
                form.emits |= group
                form.groups.append(group)
    _ring_form(model, form)
    ops = {(n.domain or "", n.op_type) for n in original.graph.node}
    if ops and all(d == "" and op in NEUTRAL_OPS for d, op in ops):
        form.neutral = same_layout_math(original)
    return form


def region_form(model: onnx.ModelProto, block: int) -> StepForm:
    """A region step's form (deploy/ort/blocked_regions.py): each island's ring ports go
    blocked together, inputs accepted and outputs emitted."""
    from deploy.ort import blocked_regions
    form = StepForm()
    for isle in blocked_regions.islands(model, block):
        if isle.why:
            continue
        form.inner = form.inner or not isle.ports
        form.accepts |= isle.inputs
        form.emits |= isle.outputs
        if isle.ports:
            form.groups.append(isle.ports)
    return form


def region_rewrite(ports: frozenset[str], block: int):
    """The load-time transform of a region step whose `ports` are stored blocked."""
    from deploy.ort import blocked_regions
    return lambda model: blocked_regions.rewrite(model, ports, block)


def _ring_form(model: onnx.ModelProto, form: StepForm) -> None:
    """Rows-ring ports the step can read or write row-blocked (deploy/ort/blocked_rings.py)."""
    graph = rings.Graph(model)
    for port in model.graph.input:
        if port.name not in form.accepts and rings.ring_input(graph, port.name):
            form.accepts.add(port.name)
    for port in model.graph.output:
        found = rings.ring_output(graph, port.name) if port.name not in form.emits else None
        group = rings.copies(graph, found.node) if found else None
        if group and not group & form.emits:
            form.emits |= group
            form.groups.append(group)


def same_layout_math(model: onnx.ModelProto, concat: bool = True) -> bool:
    """Elementwise on equal shapes, or (`concat`) Concat on axis 1 of batch-1 tensors: the
    result is the same whether the tensors are plain or blocked alike. A constant operand of more than one
    value (a per-channel or per-pixel Add) stays in plain layout, so such a step is not
    neutral: the blocked tensor would meet it element by element in another order."""
    consts = {i.name for i in model.graph.initializer}
    if any(int(np.prod(i.dims)) > 1 for i in model.graph.initializer) or any(
            n.op_type == "Constant" for n in model.graph.node):
        return False
    shapes = [[d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in list(model.graph.input) + list(model.graph.output) if v.name not in consts]
    if not shapes or any(len(s) != 4 or s[0] != 1 for s in shapes):
        return False
    concats = [n for n in model.graph.node if n.op_type == "Concat"]
    if concats and not concat:
        return False
    if concats:
        axes = [rings.NodeAttrs.of(n).axis for n in concats]
        return all(a == 1 for a in axes) and all(s[2:] == shapes[0][2:] for s in shapes)
    return all(s == shapes[0] for s in shapes)


def choose(manifest: Manifest, forms: dict[str, StepForm], block: int,
           rings: bool = True, frames: bool = False) -> set[str]:
    """The edges to store blocked: whole tensors and rows rings (row-blocked, see
    deploy/ort/blocked_rings.py) of batch 1 whose channels fill whole blocks, whose producer
    emits and every consumer accepts the blocked layout (neutral steps: all their tensors
    blocked or none). A model that several steps run (a layer's phases) binds each port to
    the same edges in every step, else none of its edges is blocked. `rings` False: whole
    tensors only. `frames`: the Input's frame copy writes its edges in the chosen layout
    (the executor asks `OrtBackend.frame_order`; the channels-last layout of int8
    deployments, deploy/ort/channels_last.py)."""
    edges = manifest.edges
    ok = {eid for eid, e in edges.items()
          if e.shape[0] == 1 and e.shape[1] % block == 0
          and (e.layout == "hncw" and rings or e.layout == "nchw" and e.whole)}
    stored = stored_as(edges)
    groups: dict[str, set[str]] = {}
    for eid, rep in stored.items():
        groups.setdefault(rep, set()).add(eid)
    steps = [s for _, _, s in manifest.steps()]
    bound: dict[str, set] = {}
    for s in steps:
        if s.model:
            bound.setdefault(s.model, set()).add(tuple(
                (b.name, b.edges) for b in s.bind if b.kind == "edge"))
    changed = True
    while changed:
        before = len(ok)
        for s in steps:
            ports = [b for b in s.bind if b.kind == "edge"]
            form = forms.get(s.model) if s.model else None
            if frames and not s.model and s.bind and all(b.kind == "frame" for b in s.bind):
                continue
            if form is None or len(bound[s.model]) > 1:   # frame copies, plain-only, mixed
                for b in s.bind:
                    ok.difference_update(b.edges)
                continue
            if form.neutral:
                ids = {eid for b in ports for eid in b.edges}
                if any(b.kind != "edge" for b in s.bind) or not ids <= ok:
                    ok -= ids
                continue
            for b in ports:
                allowed = form.emits if b.writes else form.accepts
                if b.name not in allowed or not set(b.edges) <= ok:
                    ok.difference_update(b.edges)
            by_name = {b.name: set(b.edges) for b in ports}
            for group in form.groups:
                ids = [by_name.get(name) for name in group]
                if any(i is None or not i <= ok for i in ids):
                    for i in ids:
                        ok.difference_update(i or ())
        for eid, rep in stored.items():     # one stored tensor: every reader's layout
            if eid not in ok:
                ok -= groups[rep]
        changed = len(ok) != before
    return ok


def step_ports(manifest: Manifest, forms: dict[str, StepForm], chosen: set[str], block: int):
    """(model, its ports stored blocked, its load-time transform or None) for every step
    model run in the blocked form: a region step also when only tensors inside it go
    blocked (deploy/ort/blocked_regions.py)."""
    for _, _, step in manifest.steps():
        if not step.model:
            continue
        ports = blocked_ports(step, chosen)
        form = forms.get(step.model)
        if step.region and form is not None and (ports or form.inner):
            yield step.model, ports, region_rewrite(ports, block)
        elif ports:
            yield step.model, ports, None


def blocked_ports(step: Step, chosen: set[str]) -> frozenset[str]:
    return frozenset(b.name for b in step.bind if b.kind == "edge" and set(b.edges) <= chosen)


def strip(model: onnx.ModelProto, ports: frozenset[str], block: int = 0) -> onnx.ModelProto:
    """The optimised model reading and writing `ports` in the blocked layout: their
    ReorderInput / ReorderOutput removed (rows-ring ports: rewritten for row-blocked rows,
    `block` channels a block)."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    if block:
        model = rings.rewrite(model, ports, block)
    g = model.graph
    rename: dict[str, str] = {}
    drop = []
    for node in g.node:
        if node.op_type == "ReorderInput" and node.domain == NCHWC and node.input[0] in ports:
            rename[node.output[0]] = node.input[0]
            drop.append(node)
    for node in g.node:
        for i, name in enumerate(node.input):
            if name in rename:
                node.input[i] = rename[name]
    outputs = {o.name for o in g.output}
    for node in list(g.node):
        if node.op_type == "ReorderOutput" and node.domain == NCHWC and (
                node.output[0] in ports or _copies_to(g, node.output[0], ports)):
            inner = node.input[0]
            source = next((n for n in g.node if inner in n.output), None)
            if source is not None and inner not in outputs and node_readers(g, inner) == [node]:
                source.output[list(source.output).index(inner)] = node.output[0]
                drop.append(node)
            else:                     # the blocked tensor is needed elsewhere too: copy it
                node.op_type, node.domain = "Identity", ""
                del node.attribute[:]
    for node in drop:
        g.node.remove(node)
    del g.value_info[:]       # shapes of renamed values; ONNX Runtime infers them again
    return model


def _copies_to(g: onnx.GraphProto, name: str, ports: frozenset[str]) -> bool:
    """`name` is read only by Identity nodes that write blocked ports."""
    readers = node_readers(g, name)
    return bool(readers) and all(n.op_type == "Identity" and n.output[0] in ports for n in readers)


def node_readers(g: onnx.GraphProto, name: str) -> list[onnx.NodeProto]:
    """The nodes of `g` reading tensor `name`."""
    return [n for n in g.node if name in n.input]


def graph_only(path: Path, optimized: onnx.ModelProto) -> onnx.ModelProto:
    """The step model's graph for `step_form` when it may be layout-neutral
    (no weights: elementwise and concat steps); a model with weights never is, so its
    file is not parsed at all."""
    if any(t.data_location == TensorProto.EXTERNAL and
           len(t.dims) > 1 for t in optimized.graph.initializer):
        return onnx.ModelProto()
    return onnx.load(str(path))
