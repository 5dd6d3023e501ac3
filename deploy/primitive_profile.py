"""`explore profile --primitives`: every whole layer timed with every primitive of
deploy/primitives that computes it, its measured workspace and weight bytes, and the
measured cost of each layout transition between neighbours (TASO's device profiling, Wen
et al. 2020 Sec. 4.3: the T_i, M_i vectors and the Trans matrices of Eq. 4-12).

A layer is timed with the ports a deployment gives it (one output per consumer edge, plus
the sink output), reading and writing plain NCHW for the NCHW primitives and ONNX Runtime's
blocked layout on every port for `ort_nchwc` (deploy/primitive_forms.py), so a transition
is priced separately: a ReorderInput (NCHW -> NCHWc) or ReorderOutput (NCHWc -> NCHW) of the
edge's tensor, timed alone; its workspace is the reordered copy it makes inside a step.
Workspaces come from deploy/workspace_probe.py (peak resident set in a child process).
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from csdf.model import CNN, INPUT, edge_name
from deploy import ort_blocked as ob
from deploy import primitives, workspace_probe
from deploy.backend_ort import OrtBackend
from deploy.parts_onnx import ONNX_TYPE, InPort, OutPort, step_model
from deploy.primitive_forms import blocked_form, stripped_step

FLUSH_BYTES = 4 << 20        # written between timed calls: evicts the core's L1/L2 (docs/primitives.md)
_SCRATCH = np.zeros(FLUSH_BYTES // 8)


def _time(call, repeats: int, warmup: int = 3) -> float:
    """Median ms of `call`, each timed call after FLUSH_BYTES of other writes: a step in a
    frame finds its weights and input evicted by the steps between its runs, not hot as
    when called back to back."""
    for _ in range(warmup):
        call()
    times = []
    for _ in range(repeats):
        np.add(_SCRATCH, 1.0, out=_SCRATCH)
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1e3

HOW = ("ms: median of --repeats bound calls after 3 warm-ups, ports as deployed (ort_nchwc: "
       "every port blocked); workspace_bytes: peak resident set during one call minus before "
       "it, ORT arena off, in a child process (deploy/workspace_probe.py); weight_bytes: "
       "initializers the step holds (ort_nchwc: as ONNX Runtime reordered them); transitions: "
       "one reorder of the edge's tensor")


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


def _job(path: Path, mode: str, feeds: dict, fetches: dict, threads: int) -> dict:
    return {"model": str(path), "mode": mode, "threads": threads,
            "inputs": {k: {"shape": list(v.shape), "dtype": str(v.dtype)} for k, v in feeds.items()},
            "outputs": {k: {"shape": list(v.shape), "dtype": str(v.dtype)} for k, v in fetches.items()}}


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


def profile_primitives(cnn: CNN, dtype: str = "float32", repeats: int = 20, threads: int = 0,
                       progress=None) -> dict[str, Any]:
    """{block, layers: {layer: {primitive: {ms, workspace_bytes, weight_bytes, layout}}},
    transitions: {edge: {src, dst, to_nchwc_ms, to_nchw_ms, to_nchwc_workspace_bytes,
    to_nchw_workspace_bytes}}, how}. Input layers are the frame copy: one NCHW form."""
    backend = OrtBackend(dtype, threads, layout="nchw")
    opts = backend._options()
    block = ob.block_size(opts)
    layers: dict[str, dict] = {}
    jobs, where = [], []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "m"
        folder.mkdir()
        for name in cnn.order():
            layer = cnn.layer(name)
            if layer.op == INPUT:        # the executor's frame copy into the arena
                frame = np.zeros(layer.output_shape, np.float32)
                arena = np.zeros(layer.output_shape, dtype)
                ms = _time(lambda: np.copyto(arena, frame, casting="same_kind"), repeats)
                layers[name] = {primitives.DEFAULT: {"ms": ms, "workspace_bytes": 0,
                                                     "weight_bytes": 0, "layout": "nchw"}}
                continue
            ins, outs, _, _ = layer_ports(cnn, name)
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
                    ports = {p.name for p in ins} | {p.name for p in outs}
                    found = blocked_form(path, tmp, opts, [p.name for p in ins], [p.name for p in outs])
                    if found is None:
                        continue
                    model = stripped_step(*found, ports, ports)
                    probe = folder / f"{len(jobs)}_{prim}.stripped.onnx"
                    onnx.save(model, str(probe))
                    backend.fix_form(path, "nchwc", frozenset(ports),
                                     lambda m, f=found[1], p=ports: stripped_step(m, f, p, p))
                    mode = "stripped"
                else:
                    model, probe, mode = onnx.load(str(path)), path, "nchw"
                    backend.fix_form(path, "nchw")
                call = backend.bind(backend.load(path), feeds, fetches)
                entries[prim] = {"ms": _time(call, repeats), "workspace_bytes": 0,
                                 "weight_bytes": _weight_bytes(model), "layout": layout}
                jobs.append(_job(probe, mode, feeds, fetches, threads))
                where.append((name, prim))
            layers[name] = entries
            if progress:
                progress(name, entries)
        transitions, tjobs = _transitions(cnn, layers, block, backend, dtype, repeats, threads, folder)
        measured = workspace_probe.measure(jobs + [j for j, _ in tjobs])
    for (name, prim), ws in zip(where, measured):
        layers[name][prim]["workspace_bytes"] = int(ws)
    for (_, (key, field)), ws in zip(tjobs, measured[len(jobs):]):
        for t in transitions.values():
            if t["_shape"] == key:
                t[field] = int(ws)
    for t in transitions.values():
        del t["_shape"]
    return {"block": block, "layers": layers, "transitions": transitions, "how": HOW}


def _transitions(cnn: CNN, layers: dict, block: int, backend: OrtBackend, dtype: str,
                 repeats: int, threads: int, folder: Path):
    """Reorder costs for every edge with an NCHWc form at one end, timed once per shape."""
    timed: dict[tuple, dict] = {}
    jobs = []
    out: dict[str, dict] = {}
    for src, dst in cnn.graph.edges:
        if not any(p.get("layout") == "nchwc" for end in (src, dst) for p in layers[end].values()):
            continue
        shape = [int(v) for v in cnn.edge_shape(src, dst)]
        key = tuple(shape)
        if key not in timed:
            timed[key] = {}
            for op, tag in (("ReorderInput", "to_nchwc"), ("ReorderOutput", "to_nchw")):
                path = folder / f"t{len(timed)}_{op}.onnx"
                onnx.save(reorder_model(op, shape, dtype, False), str(path))
                backend.fix_form(path, "nchwc")
                x = np.random.default_rng(1).standard_normal(shape).astype(dtype)
                y = np.zeros(shape, dtype)      # bound by pointer: kept alive while timed
                call = backend.bind(backend.load(path), {"x": x}, {"y": y})
                timed[key][f"{tag}_ms"] = _time(call, repeats)
                cpath = folder / f"t{len(timed)}_{op}.copy.onnx"
                onnx.save(reorder_model(op, shape, dtype, True), str(cpath))
                y2 = np.zeros([2 * shape[0]] + shape[1:], dtype)
                jobs.append((_job(cpath, "stripped", {"x": x}, {"y": y2}, threads),
                             (key, f"{tag}_workspace_bytes")))
        out[edge_name(cnn.name, src, dst)] = {"src": src, "dst": dst, **timed[key], "_shape": key,
                                         "to_nchwc_workspace_bytes": 0, "to_nchw_workspace_bytes": 0}
    return out, jobs
