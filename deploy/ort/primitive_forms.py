"""How each step of a primitive plan runs on ONNX Runtime, and which edges hold ONNX
Runtime's blocked NCHWc layout (TASO's per-primitive data layouts, Wen et al. 2020 Sec. 4.3).

An edge is blocked exactly when the primitives at both its ends read/write NCHWc: the ILP
charged no layout transition for it. Any other end of an NCHWc step keeps (or, for the
layout-neutral Add/Relu/Concat steps, gets) a ReorderInput / ReorderOutput: the transition
the ILP charged. Non-NCHWc primitives run with ONNX Runtime's NCHWc rewrite off, as the
profile timed them. Optimised models are valid only on the machine that wrote them, so they
are made here, at load time (deploy/ort/blocked.py).
"""
from __future__ import annotations

from pathlib import Path

import onnx
from onnx import helper

from deploy.ort import blocked as ob
from deploy.runtime.manifest import stored_as
from deploy.runtime.manifest_records import Manifest, Step
from deploy.steps import primitives
from sdf3.errors import InputError


def strip_ports(model: onnx.ModelProto, ports: frozenset[str] | set[str]) -> onnx.ModelProto:
    """The optimised model reading/writing `ports` blocked. Unlike ob.strip, one of several
    output copies of a ReorderOutput may go blocked alone (its Identity reads the blocked
    tensor, the others keep the reorder)."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    g = model.graph
    producer = {out: node for node in g.node for out in node.output}
    outputs = {o.name for o in g.output}
    alone = set()
    for port in ports:
        node = producer.get(port)
        if port not in outputs or node is None or node.op_type != "Identity":
            continue
        src = producer.get(node.input[0])
        if src is not None and ob.plain_reorder(src, "ReorderOutput"):
            readers = ob.node_readers(g, src.output[0])
            if not all(r.op_type == "Identity" and r.output[0] in ports for r in readers):
                node.input[0] = src.input[0]
                alone.add(port)
    return ob.strip(model, frozenset(set(ports) - alone))


def add_reorders(model: onnx.ModelProto, plain: set[str]) -> onnx.ModelProto:
    """A layout-neutral step (its nodes compute alike on blocked tensors) whose ports in
    `plain` stay NCHW: a ReorderInput after each such input, a ReorderOutput before each
    such output."""
    if not plain:
        return model
    g = model.graph
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in list(g.input) + list(g.output)}
    new_nodes = []
    for port in [i.name for i in g.input if i.name in plain]:
        inner = f"{port}__blocked"
        for node in g.node:
            for k, name in enumerate(node.input):
                if name == port:
                    node.input[k] = inner
        new_nodes.append(helper.make_node("ReorderInput", [port], [inner], domain=ob.NCHWC))
    tail = []
    for port in [o.name for o in g.output if o.name in plain]:
        inner = f"{port}__blocked"
        for node in g.node:
            for k, name in enumerate(node.output):
                if name == port:
                    node.output[k] = inner
        tail.append(helper.make_node("ReorderOutput", [inner], [port], domain=ob.NCHWC,
                                     channels=int(shapes[port][1])))
    nodes = new_nodes + list(g.node) + tail
    del g.node[:]
    g.node.extend(nodes)
    if not any(o.domain == ob.NCHWC for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid(ob.NCHWC, 1))
    del g.value_info[:]
    return model


def blocked_form(path: str | Path, work: str | Path, opts, in_ports: list[str],
                 out_ports: list[str]) -> tuple[onnx.ModelProto, ob.StepForm] | None:
    """ONNX Runtime's optimised step and its form when it can read every input and write
    every output blocked (an NCHWc kernel between reorders, or a layout-neutral step)."""
    optimized = ob.optimized(path, work, opts)
    form = ob.step_form(optimized, onnx.load(str(path)))
    if form.neutral or (set(in_ports) <= form.accepts and set(out_ports) <= form.emits):
        return optimized, form
    return None


def stripped_step(optimized: onnx.ModelProto, form: ob.StepForm, ports: set[str],
                  all_ports: set[str]) -> onnx.ModelProto:
    """The step reading/writing `ports` blocked and the rest of `all_ports` plain."""
    model = strip_ports(optimized, ports)
    return add_reorders(model, all_ports - ports) if form.neutral else model


def prepare_plan_forms(backend, manifest: Manifest, root: Path) -> set[str]:
    """Fix every step's form from its primitive (manifest step key `primitive`) on
    `backend` (deploy/ort/backend.py); returns the edges stored blocked."""
    block = ob.block_size(backend.options())
    steps = [s for _, _, s in manifest.steps()]
    stored = stored_as(manifest.edges)      # edges of one tensor in one buffer: one
    members: dict[str, list[str]] = {}
    for eid, rep in stored.items():
        members.setdefault(rep, []).append(eid)
    ends: dict[str, list[Step]] = {}           # stored tensor -> its producer and readers' steps
    for s in steps:
        for rep in {stored[e] for b in s.bind if b.kind in ("edge", "frame") for e in b.edges}:
            ends.setdefault(rep, []).append(s)

    def nchwc(step: Step) -> bool:
        name = step.primitive
        return bool(step.model) and name is not None and primitives.get(name).layout == "nchwc"

    blocked = set()
    for rep, eids in members.items():          # one layout for the writer and every reader
        at = ends.get(rep, [])
        if all(e.layout == "nchw" and e.shape[0] == 1 and e.whole and e.shape[1] % block == 0
               for e in (manifest.edges[x] for x in eids)) \
                and len(at) == len(eids) + 1 and all(nchwc(s) for s in at):
            blocked.update(eids)
    backend.prefetch([(str(root / s.model), "nchwc" if nchwc(s) else "nchw")
                       for s in steps if s.model])
    for s in steps:
        if not s.model:
            continue
        key = str(root / s.model)
        ports = {b.name for b in s.bind if b.kind == "edge" and set(b.edges) <= blocked}
        if not nchwc(s) or not ports:
            backend.fix_form(key, "nchwc" if nchwc(s) else "nchw")
            continue
        names = {b.name for b in s.bind if b.kind in ("edge", "output")}
        opt = onnx.load(str(backend.optimize(key, "nchwc")), load_external_data=False)
        form = ob.step_form(opt, ob.graph_only(root / s.model, opt))
        ins = {n for n in names if n.startswith("in")}
        if not (form.neutral or (ins <= form.accepts and names - ins <= form.emits)):
            raise InputError(f"plan: layer {s.layer}: primitive {s.primitive} does not "
                             "run blocked on this machine's ONNX Runtime (profile it here)")
        backend.fix_form(key, "nchwc", frozenset(ports),
                         lambda m, f=form, p=set(ports), a=set(names): stripped_step(m, f, p, a))
    return blocked
