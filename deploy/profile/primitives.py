"""`explore profile --primitives`: every whole layer timed with every primitive of
deploy/steps/primitives that computes it, its measured workspace and weight bytes, and the
measured cost of each layout transition between neighbours (TASO's device profiling, Wen
et al. 2020 Sec. 4.3: the T_i, M_i vectors and the Trans matrices of Eq. 4-12).

A layer's step is built with the ports a deployment gives it (one output per consumer edge,
plus the sink output), reading and writing plain NCHW for the NCHW primitives and ONNX
Runtime's blocked layout on every port for `ort_nchwc` (deploy/ort/primitive_forms.py), and timed
inside a deployment's frame as `explore run` runs it (deploy/profile/primitive_timing.py). A
transition is priced where a deployment runs it: inside the NCHWc step, as that step's time
with the edge's port plain (ONNX Runtime's ReorderInput / ReorderOutput in the step) minus
its time with every port blocked. Workspaces come from deploy/profile/workspace_probe.py (peak
resident set in a child process); a transition's is the reordered copy it makes.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from csdf.model import CNN, INPUT, edge_name
from deploy.ort import blocked as ob
from deploy.profile import primitive_timing, workspace_probe
from deploy.profile.primitive_timing import TimingJob, Variant
from deploy.steps import primitives
from deploy.ort.backend import OrtBackend
from deploy.steps.builder import ONNX_TYPE
from deploy.steps.parts import InPort, OutPort, step_model
from deploy.ort.primitive_forms import blocked_form, stripped_step

HOW = ("ms: median of --repeats bound calls after 3 warm-ups inside the frame of a deployment "
       "of the CNN with ORT's plain Conv (the frame's other steps run before each call; "
       "deploy/profile/primitive_timing.py), ports as deployed (ort_nchwc: every port blocked); "
       "workspace_bytes: peak resident set during one call minus before "
       "it, ORT arena off, in a child process (deploy/profile/workspace_probe.py); weight_bytes: "
       "initializers the step holds (ort_nchwc: as ONNX Runtime reordered them); transitions: "
       "the NCHWc end's step with the edge's port plain minus with every port blocked, in the "
       "frame; their workspace: one reorder of the edge's tensor")


def layer_ports(cnn: CNN, name: str) -> tuple[list[InPort], list[OutPort], list[str], list[str]]:
    """Ports of layer `name` run whole as a deployment binds them; its sources and consumers."""
    layer = cnn.layer(name)
    srcs = list(dict.fromkeys(layer.inputs))
    ins = [InPort(f"in{i}", tuple(int(v) for v in cnn.edge_shape(s, name)), "nchw",
                  int(cnn.edge_shape(s, name)[2])) for i, s in enumerate(srcs)]
    succ = [d for d in cnn.order() if cnn.graph.has_edge(name, d)]
    shape = tuple(int(v) for v in layer.output_shape)
    outs = [OutPort(f"out{j}", shape, "nchw") for j in range(len(succ))]
    if cnn.graph.out_degree(name) == 0:
        outs.append(OutPort("sink", shape, "nchw"))
    return ins, outs, srcs, succ


def _weight_bytes(model: onnx.ModelProto) -> int:
    return int(sum(numpy_helper.to_array(t).nbytes for t in model.graph.initializer))


def _io(ins: list[InPort], outs: list[OutPort], dtype: str, seed: int = 0):
    rng = np.random.default_rng(seed)
    feeds = {p.name: rng.standard_normal(p.stored_shape).astype(dtype) for p in ins}
    fetches = {p.name: np.zeros(p.stored_shape, dtype) for p in outs}
    return feeds, fetches


def reorder_model(op: str, shape: list[int], dtype: str, copy: bool) -> onnx.ModelProto:
    """One ReorderInput / ReorderOutput of a [1, C, H, W] tensor (C whole blocks). `copy`
    makes the reordered tensor an intermediate (for its workspace): a Concat of it with
    itself reads it (an in-place op such as Abs would let ONNX Runtime write the reorder
    straight into the bound output)."""
    elem = ONNX_TYPE[dtype]
    attrs = {"channels": int(shape[1])} if op == "ReorderOutput" else {}
    nodes = [helper.make_node(op, ["x"], ["r" if copy else "y"], domain=ob.NCHWC, **attrs)]
    if copy:
        nodes.append(helper.make_node("Concat", ["r", "r"], ["y"], axis=0))
    out = [2 * shape[0]] + list(shape[1:]) if copy else shape
    graph = helper.make_graph(nodes, op, [helper.make_tensor_value_info("x", elem, shape)],
                              [helper.make_tensor_value_info("y", elem, out)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                    helper.make_opsetid(ob.NCHWC, 1)])
    model.ir_version = 8
    return model


@dataclass(frozen=True)
class Candidate:
    """One primitive of one layer: its median ms in the frame, its workspace and weight
    bytes and the layout its ports read and write (the profile file keeps these keys)."""
    ms: float
    workspace_bytes: int
    weight_bytes: int
    layout: str


@dataclass(frozen=True)
class Transition:
    """An edge with an NCHWc form at one end: the ms of its reorder into and out of the
    blocked layout (inside the NCHWc step) and the workspace of each, for its tensor `shape`."""
    src: str
    dst: str
    shape: tuple[int, ...]
    to_nchwc_ms: float = 0.0
    to_nchw_ms: float = 0.0
    to_nchwc_workspace_bytes: int = 0
    to_nchw_workspace_bytes: int = 0

    def to_dict(self) -> dict[str, Any]:
        """As the profile file keeps it (without the shape)."""
        return {"src": self.src, "dst": self.dst, "to_nchwc_ms": self.to_nchwc_ms,
                "to_nchw_ms": self.to_nchw_ms,
                "to_nchwc_workspace_bytes": self.to_nchwc_workspace_bytes,
                "to_nchw_workspace_bytes": self.to_nchw_workspace_bytes}


def profile_primitives(cnn: CNN, dtype: str = "float32", repeats: int = 20, threads: int = 0,
                       progress=None) -> dict[str, Any]:
    """{block, layers: {layer: {primitive: {ms, workspace_bytes, weight_bytes, layout}}},
    transitions: {edge: {src, dst, to_nchwc_ms, to_nchw_ms, to_nchwc_workspace_bytes,
    to_nchw_workspace_bytes}}, how}: the profile file's table (`Candidate`, `Transition`).
    Input layers are the frame copy: one NCHW form."""
    backend = OrtBackend(dtype, threads, layout="nchw")
    opts = backend.options()
    block = ob.block_size(opts)
    layers: dict[str, dict[str, Candidate]] = {}
    jobs, where = [], []            # workspace probes, and (layer, primitive) of each
    timing: list[TimingJob] = []    # frame timings
    timed = []                      # (layer, primitive, the transitions each variant prices)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "m"
        folder.mkdir()
        for name in cnn.order():
            layer = cnn.layer(name)
            if layer.op == INPUT:        # the executor's frame copy into the arena
                layers[name] = {primitives.DEFAULT: Candidate(0.0, 0, 0, "nchw")}
                timing.append(TimingJob(name, None))
                timed.append((name, primitives.DEFAULT, []))
                continue
            ins, outs, srcs, succ = layer_ports(cnn, name)
            shapes = [p.shape for p in ins] + [p.shape for p in outs]
            can_block = (cnn.graph.out_degree(name) > 0
                         and all(s[0] == 1 and s[1] % block == 0 for s in shapes))
            feeds, fetches = _io(ins, outs, dtype)
            entries = {}
            for prim in primitives.applicable(layer, ins[0].shape):
                layout = primitives.get(prim).layout
                path = folder / f"{len(jobs)}_{prim}.onnx"
                onnx.save(step_model(layer, ins, outs, dtype, primitive=prim), str(path))
                if layout == "nchwc":
                    if not can_block:
                        continue
                    ports = tuple(p.name for p in ins) + tuple(p.name for p in outs)
                    found = blocked_form(path, tmp, opts, [p.name for p in ins], [p.name for p in outs])
                    if found is None:
                        continue
                    model = stripped_step(*found, set(ports), set(ports))
                    probe = folder / f"{len(jobs)}_{prim}.stripped.onnx"
                    onnx.save(model, str(probe))
                    mode = "stripped"
                    # every port blocked, then each edge's port plain: its transition
                    # (src, dst, into the blocked layout)
                    ends = [(src, name, True) for src in srcs] + [(name, dst, False) for dst in succ]
                    variants = (Variant(ports),) + tuple(
                        Variant(tuple(p for p in ports if p != port), (port,)) for port in ports)
                    timing.append(TimingJob(name, str(path), layout, variants))
                    timed.append((name, prim, ends))
                else:
                    model, probe, mode = onnx.load(str(path)), path, "nchw"
                    timing.append(TimingJob(name, str(path), layout, (Variant(),)))
                    timed.append((name, prim, []))
                entries[prim] = Candidate(0.0, 0, _weight_bytes(model), layout)
                jobs.append(workspace_probe.job(probe, mode, feeds, fetches, threads))
                where.append((name, prim))
            layers[name] = entries
        transitions, tjobs = _transitions(cnn, layers, dtype, threads, folder)
        ms = primitive_timing.measure(context(cnn, layers, dtype, Path(tmp) / "context"), timing,
                                      threads, repeats)
        measured = workspace_probe.measure(jobs + [j for j, _ in tjobs])
    for (name, prim, ends), t in zip(timed, ms):
        layers[name][prim] = replace(layers[name][prim], ms=t.ms[0])
        for (src, dst, into), extra in zip(ends, t.diff[1:]):   # port plain - all blocked
            e = edge_name(cnn.name, src, dst)
            transitions[e] = (replace(transitions[e], to_nchwc_ms=max(0.0, extra)) if into
                              else replace(transitions[e], to_nchw_ms=max(0.0, extra)))
    for (name, prim), ws in zip(where, measured):
        layers[name][prim] = replace(layers[name][prim], workspace_bytes=int(ws))
    for (_, (key, into)), ws in zip(tjobs, measured[len(jobs):]):
        for e, t in transitions.items():
            if t.shape == key:
                transitions[e] = (replace(t, to_nchwc_workspace_bytes=int(ws)) if into
                                  else replace(t, to_nchw_workspace_bytes=int(ws)))
    table = {name: {prim: asdict(c) for prim, c in entries.items()}
             for name, entries in layers.items()}
    if progress:
        for name in cnn.order():
            progress(name, table[name])
    return {"block": block, "layers": table,
            "transitions": {e: t.to_dict() for e, t in transitions.items()}, "how": HOW}


def context(cnn: CNN, layers: dict, dtype: str, out: Path) -> Path:
    """The deployment whose frame candidates are timed in: `cnn` whole, every layer with
    ONNX Runtime's own kernels, NCHWc where the layer has that form (the fastest primitive
    on almost every layer here, so what the plans chosen mostly run), else the plain Conv;
    arena placed as `explore` plans it. A context of plain Convs only (MLAS's im2col
    buffers evicting more of the cache) predicted the ResNet-style plans 13 % slow."""
    from deploy.build.derive import derive
    from deploy.profile.ladder import cnn_plan
    plan = cnn_plan(cnn, {n: 1 for n in cnn.order()}, {"float32": "fp32", "float16": "fp16"}[dtype])
    plan = replace(plan, primitives={
        cnn.name: {n: ("ort_nchwc" if "ort_nchwc" in layers[n] else primitives.DEFAULT)
                   for n in cnn.order() if cnn.layer(n).op != INPUT}})
    derive(plan, {cnn.name: cnn}, out)
    return out


def _transitions(cnn: CNN, layers: dict[str, dict[str, Candidate]], dtype: str, threads: int,
                 folder: Path):
    """Every edge with an NCHWc form at one end: its `Transition` (times filled in from the
    frame timings) and one workspace probe per tensor shape of each reorder, (job, (shape,
    into the blocked layout))."""
    probed: set[tuple] = set()
    jobs = []
    out: dict[str, Transition] = {}
    for src, dst in cnn.graph.edges:
        if not any(c.layout == "nchwc" for end in (src, dst) for c in layers[end].values()):
            continue
        shape = [int(v) for v in cnn.edge_shape(src, dst)]
        key = tuple(shape)
        if key not in probed:
            probed.add(key)
            x = np.zeros(shape, dtype)
            for op, into in (("ReorderInput", True), ("ReorderOutput", False)):
                cpath = folder / f"t{len(probed)}_{op}.copy.onnx"
                onnx.save(reorder_model(op, shape, dtype, True), str(cpath))
                y2 = np.zeros([2 * shape[0]] + shape[1:], dtype)
                jobs.append((workspace_probe.job(cpath, "stripped", {"x": x}, {"y": y2}, threads),
                             (key, into)))
        out[edge_name(cnn.name, src, dst)] = Transition(src, dst, key)
    return out, jobs
