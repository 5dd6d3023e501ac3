"""Chain steps: consecutive whole-layer steps of an int8 partition in one ONNX Runtime call.

Every step model is a session, and a session keeps ONNX Runtime's fixed state (about 20
KiB a model besides ~2.6 KiB a node, docs/region_steps.md) plus a binding for the whole run;
int8 MobileNetV2's least-memory plan runs 57 of its 66 step models whole, one layer each. A
chain step computes a run of consecutive whole-layer steps in one model: each member's
nodes as its own step model has them (names prefixed by the member's place), a tensor that
an earlier member wrote read from that member's output inside the call, and every tensor
the members store still written to its arena bytes (a graph output bound to the same view
as the member's own step bound). The arena, buffers and bytes of every tensor are the
plan's, unchanged; the calls fall by the members less one per chain.

Why one call computes what the members compute one after another. ONNX Runtime may run a
call's nodes in any order their data allow. A chain admits a step only when it reads a
tensor the step before it wrote, and a layer's outputs depend on all its inputs, so every
node of an earlier member that reads the arena runs before any node of a later member
writes: a later member never overwrites bytes an earlier one still reads, however the plan
reuses them. A member reads what an earlier member wrote only inside the call (never from
the arena, where ONNX Runtime could read before the write). What is left, a member reading
bytes that an earlier member overwrote, would be the plan's error; `explore run`'s manifest
check judges lifetimes member by member (a chain step's bindings name their member's layer,
`chained` bindings record the reads inside the call).

The chain step is a region step to everything after it: `region` lists its members' firings
and `work` each one's multiply-adds and outputs, as a band's, and weight_holders sees the
layers it holds. `explore profile` measures
whole layers in steps of their own (deploy/profile/ladder.py says why), so a plan counts a
chained layer as its own step. Only int8 deployments on ONNX Runtime chain:
their steps hold no NCHWc ports (deploy/ort/channels_last.py judges each port of the chain
model as of any step model).
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Callable

import onnx
from onnx import helper

from csdf.model import CNN
from deploy.runtime.manifest_records import StepModel, StoredEdge
from deploy.runtime.step_records import Binding, Step

MAX_MEMBERS = 256       # a bound on one model's size
# A chain's parameters, at most (int8: bytes). A chain holds its layers' weights alone, so
# it pre-packs them (deploy/ort/weight_holders.py), and ONNX Runtime holds a pre-packing
# session's weights up to three times while it builds it; the shared arena keeps the pages
# that build touched. Measured on int8 MobileNetV2's least-memory plan (`explore run
# --threads 1`): chains of at most 128 KiB 9.6 MiB footprint in 81 calls a frame, 256 KiB
# 9.5 in 73, 512 KiB 9.3 in 67, 1 MiB 11.0 in 65 (1.7 MiB of it the load's excess),
# unbounded 17.5 in 61 (7.7); one step per layer 10.5 in 114.
CHAIN_PARAMS = 512 << 10


def chainable(step: Step, models: dict[str, StepModel], edges: dict[str, StoredEdge]) -> bool:
    """A step a chain may hold: one whole layer's model reading and writing whole tensors
    (layout nchw) and the CNN's outputs, nothing else (no slot indices, frame, primitive)."""
    model = models.get(step.model or "")
    if model is None or model.variant != "whole" or step.primitive is not None \
            or step.region is not None or step.group is not None:
        return False
    return all(b.kind == "output" or b.kind == "edge" and b.slot == 0
               and all(edges[e].layout == "nchw" for e in b.edges) for b in step.bind)


def _params(cnn: CNN, steps: list[Step]) -> int:
    return sum(cnn.layer(step.layer).param_count for step in steps)


def _tensor(b: Binding, stored: dict[str, str]) -> tuple[str, ...]:
    """The stored tensors a binding's edge copies live in."""
    return tuple(stored.get(e, e) for e in b.edges)


def _reads(step: Step, stored: dict[str, str]) -> set[tuple[str, ...]]:
    return {_tensor(b, stored) for b in step.bind if b.kind == "edge" and not b.writes}


def _writes(step: Step, stored: dict[str, str]) -> set[tuple[str, ...]]:
    return {_tensor(b, stored) for b in step.bind if b.writes}


def runs(cnn: CNN, steps: list[Step], models: dict[str, StepModel], edges: dict[str, StoredEdge],
         stored: dict[str, str]) -> list[list[int]]:
    """The partition's steps (indices) cut into runs: a run of chainable steps each of which
    reads a tensor (by its stored bytes, `stored`: edge -> stored tensor) that the step
    before it wrote, at most MAX_MEMBERS steps and CHAIN_PARAMS parameters; every other step
    alone."""
    out: list[list[int]] = []
    for i, step in enumerate(steps):
        last = out[-1] if out else None
        if last is not None and len(last) < MAX_MEMBERS and chainable(step, models, edges) \
                and chainable(steps[last[-1]], models, edges) \
                and _reads(step, stored) & _writes(steps[last[-1]], stored) \
                and _params(cnn, [steps[j] for j in last + [i]]) <= CHAIN_PARAMS:
            last.append(i)
        else:
            out.append([i])
    return out


def chain_step(cnn: CNN, members: list[Step], stored: dict[str, str], out: Path,
               rel: str) -> Step:
    """The manifest step computing `members` (consecutive steps, `runs`) in one model, written
    to `out / rel`: ports in0.., out0.., sink0.. in member order, each binding naming its
    member's layer."""
    writer: dict[tuple[str, ...], str] = {}     # stored tensor -> the chain's value holding it
    binds: list[Binding] = []
    graphs: list[onnx.GraphProto] = []
    opsets: dict[str, int] = {}
    ir = 0
    n_in = n_out = n_sink = 0
    work = []
    for k, step in enumerate(members):
        layer = step.layer
        model = onnx.load(str(out / str(step.model)))
        ir = max(ir, model.ir_version)
        for o in model.opset_import:
            opsets[o.domain] = max(opsets.get(o.domain, 0), o.version)
        ports: dict[str, str] = {}
        inside: set[str] = set()
        for b in step.bind:
            name = str(b.name)
            tensor = _tensor(b, stored)
            if b.kind == "edge" and not b.writes:
                if tensor in writer:
                    ports[name] = writer[tensor]
                    inside.add(name)
                    binds.append(Binding("chained", edges=b.edges, layer=layer))
                    continue
                ports[name] = f"in{n_in}"
                n_in += 1
            elif b.kind == "edge":
                ports[name] = f"out{n_out}"
                writer[tensor] = ports[name]
                n_out += 1
            else:                       # the CNN's output rows
                ports[name] = f"sink{n_sink}"
                n_sink += 1
            binds.append(replace(b, name=ports[name], layer=layer))
        graphs.append(_renamed(model.graph, ports, inside, f"c{k}/"))
        n, c, h, w = (int(v) for v in cnn.layer(layer).output_shape)
        work.append((cnn.layer(layer).param_count + c) * n * h * w)
    graph = helper.make_graph(
        [node for g in graphs for node in g.node], f"{cnn.name}.chain",
        [v for g in graphs for v in g.input], [v for g in graphs for v in g.output],
        [t for g in graphs for t in g.initializer],
        value_info=[v for g in graphs for v in g.value_info])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v)
                                                    for d, v in sorted(opsets.items())])
    model.ir_version = ir
    onnx.save(model, str(out / rel))
    return Step(members[0].layer, members[0].phase, rel, tuple(binds),
                region=tuple((s.layer, s.phase) for s in members), work=tuple(work))


def _renamed(graph: onnx.GraphProto, ports: dict[str, str], inside: set[str],
             prefix: str) -> onnx.GraphProto:
    """`graph` with its ports renamed by `ports`, the ports in `inside` no longer inputs, and
    every other name prefixed (a layer's own parameters, `param:<layer>:...`, keep theirs)."""
    names = {v.name for v in graph.input} | {v.name for v in graph.output} \
        | {t.name for t in graph.initializer} | {o for n in graph.node for o in n.output}

    def new(name: str) -> str:
        if not name or name.startswith("param:"):
            return name
        return ports.get(name, prefix + name) if name in names else name
    g = onnx.GraphProto()
    g.CopyFrom(graph)
    for node in g.node:
        node.name = prefix + node.name if node.name else ""
        node.input[:] = [new(x) for x in node.input]
        node.output[:] = [new(x) for x in node.output]
    for group in (g.input, g.output, g.value_info, g.initializer):
        for v in group:
            v.name = new(v.name)
    kept = [v for v in g.input if v.name not in {ports[p] for p in inside}]
    del g.input[:]
    g.input.extend(kept)
    return g


def chains(cnn: CNN, steps: list[Step], models: dict[str, StepModel], edges: dict[str, StoredEdge],
           stored: dict[str, str], out: Path, safe: Callable[[str], str]) -> list[Step]:
    """`steps` with every run of two or more chainable steps (`runs`) replaced by its chain
    step, written to `out` and listed in `models`; the members' own models are removed from
    both."""
    result = []
    for run in runs(cnn, steps, models, edges, stored):
        if len(run) == 1:
            result.append(steps[run[0]])
            continue
        members = [steps[i] for i in run]
        count = sum(1 for m in models.values() if m.cnn == cnn.name and m.variant == "chain")
        rel = f"models/{safe(cnn.name)}/{safe(members[0].layer)}.chain{count}.onnx"
        step = chain_step(cnn, members, stored, out, rel)
        for m in members:
            models.pop(str(m.model), None)
            (out / str(m.model)).unlink()
        names = [str(b.name) for b in step.bind if b.kind in ("edge", "output")]
        models[rel] = StepModel(cnn.name, members[0].layer, "chain",
                                tuple(n for n in names if n.startswith("in")),
                                tuple(n for n in names if n.startswith(("out", "sink"))),
                                tuple(m.layer for m in members))
        result.append(step)
    return result
