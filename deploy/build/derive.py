"""Plan -> deployment: ONNX step models for every layer (whole, or one part model per part
size for its phases: deploy/steps/parts.py), the
arena placement of the plan's buffers and the resolved schedule of every partition.

Each step of a partition's schedule is one firing of the plan: a whole layer, or phase p of a
layer by parts (output rows p*k .. p*k + k - 1, k = ceil(H / phases), the last part shorter). A step binds, for every input edge, the stored tensor (whole,
or the ring plus the int32 slots of the rows its window reads and, where the window meets
padding, their 0/1 mask), and for every output edge the
region it writes (the whole tensor, or slots p*k % S .. of the ring). Sink layers write the CNN's
output array outside the arena. Pipeline-crossing edges come in two copies used on even and
odd frames, so every binding lists two edges (the same one twice when single-buffered).
"""
from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import onnx
from onnx.external_data_helper import uses_external_data

from csdf.model import CNN, INPUT, edge_name
from csdf.parts import part_rows, rows_per_phase
from deploy.build.regions import band_step, bands, prune, shared
from deploy.runtime import arena, manifest as mf
from deploy.checks import plan_check
from deploy.steps.parts import InPort, OutPort, counted_rows, step_model, window_rows
from sdf3.errors import InputError

DTYPES = {4: "float32", 2: "float16"}


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def _write_reference(source: str, target: Path) -> None:
    """The unmodified model, self-contained: weights kept in an external data file (read
    beside the source) are embedded, so the deployment runs from any working directory."""
    head = onnx.load(source, load_external_data=False)
    if any(uses_external_data(t) for t in head.graph.initializer):
        onnx.save(onnx.load(source), str(target))
    else:
        shutil.copyfile(source, target)


def _edge_copies(plan_edges: dict, cnn: str, src: str, dst: str) -> list[str]:
    name = edge_name(cnn, src, dst)
    if name in plan_edges:
        return [name, name]
    pair = [edge_name(cnn, src, dst, 1), edge_name(cnn, src, dst, 2)]
    if all(p in plan_edges for p in pair):
        return pair
    raise InputError(f"plan: key 'edges' has no entry for edge {name}")


def _stored_by_rows(plan_edges: dict, phases: dict, rep: dict[str, str]) -> set[str]:
    """Stored tensors (`rep`: manifest.stored_as, edges of one tensor in one buffer) kept
    rows outermost ("hncw"): some edge stored there has an end that runs by parts (the
    others read or write the same rows, whole)."""
    out = set()
    for name in plan_edges:
        cnn, rest = name.split(".", 1)
        src, dst = re.sub(r"\(\d\)$", "", rest).split("->")
        ph = phases.get(cnn, {})
        if ph.get(src, 1) > 1 or ph.get(dst, 1) > 1:
            out.add(rep[name])
    return out


def derive(plan: dict[str, Any], cnns: dict[str, CNN], out_dir: str | Path,
           backend: str = "onnxruntime", with_profile: bool = False,
           where: str = "plan", regions: bool = False, every_band: bool = False) -> dict[str, Any]:
    """Write the step models and manifest.json of `plan` into `out_dir`; returns the manifest.
    The plan is checked first (deploy/checks/plan_check.py; `where` names it in the one-line
    refusal), so nothing is written for a plan the explorer could not have made.
    `regions`: consecutive firings by parts run as region steps, one call per band
    (deploy/build/regions.py), a band whose model no other band shares as its firings' own
    steps (regions.shared) unless `every_band`; else one step per firing."""
    dtype = DTYPES.get(plan.get("data_bytes", 4)) if isinstance(plan.get("data_bytes", 4), int) else None
    if dtype is None:
        raise InputError(f"{where}: key 'data_bytes' must be 4 (fp32) or 2 (fp16) to deploy, "
                         f"got {plan.get('data_bytes')!r}")
    plan_check.check(plan, cnns, where)
    out = Path(out_dir)
    (out / "models").mkdir(parents=True, exist_ok=True)
    data_bytes = int(plan["data_bytes"])
    phases = {c: {k: int(v) for k, v in ph.items()} for c, ph in plan["phases"].items()}
    plan_edges = plan["edges"]
    sizes = [int(b["bytes"]) for b in plan["buffers"]]
    if plan["buffers"] and all("offset" in b for b in plan["buffers"]):   # offset planners
        at = [int(b["offset"]) for b in plan["buffers"]]
        host, dev = arena.place_at(at, sizes), arena.place_at(at, sizes, arena.DEVICE_ALIGN)
    else:
        host, dev = arena.place(sizes), arena.place(sizes, arena.DEVICE_ALIGN)

    groups = _tiled_groups(plan, cnns)
    stored = mf.stored_as(plan_edges)
    by_rows = _stored_by_rows(plan_edges, phases, stored)
    inner = {(c, a, b_) for c, gs in groups.items() for g in gs for a, b_ in g.internal_edges()}
    edges: dict[str, dict] = {}
    for name, e in plan_edges.items():
        cnn_name, rest = name.split(".", 1)
        src, dst = re.sub(r"\(\d\)$", "", rest).split("->")
        if cnn_name not in cnns:
            raise InputError(f"plan: edge {name} names unknown CNN {cnn_name!r}")
        cnn = cnns[cnn_name]
        if not cnn.graph.has_edge(src, dst):
            raise InputError(f"plan: edge {name} is not an edge of CNN {cnn_name}")
        shape = [int(v) for v in cnn.edge_shape(src, dst)]
        n, c, h, w = shape
        ph = phases.get(cnn_name, {})
        if (cnn_name, src, dst) in inner:     # a per-tile buffer of a tiled group
            nbytes = int(e["elements"]) * data_bytes
            edges[name] = {"buffer": int(e["buffer"]), "offset": host.offsets[int(e["buffer"])],
                           "device_offset": dev.offsets[int(e["buffer"])], "shape": shape,
                           "slots": int(e.get("rows", h)), "layout": "tile", "bytes": nbytes,
                           "row_bytes": n * c * w * data_bytes}
            continue
        layout = "hncw" if h > 1 and stored[name] in by_rows else "nchw"
        slots = int(e.get("rows", h))
        if layout == "nchw" and slots != h:
            raise InputError(f"plan: edge {name} holds {slots} of {h} rows but neither end "
                             f"runs by parts")
        nbytes = slots * n * c * w * data_bytes
        buf = int(e["buffer"])
        if nbytes > sizes[buf]:
            raise InputError(f"plan: edge {name} needs {nbytes} bytes, buffer {buf} has {sizes[buf]}")
        edges[name] = {"buffer": buf, "offset": host.offsets[buf], "device_offset": dev.offsets[buf],
                       "shape": shape, "slots": slots, "layout": layout, "bytes": nbytes,
                       "row_bytes": n * c * w * data_bytes}

    models: dict[str, dict] = {}
    region_keys: dict = {}
    partitions = []
    for part in plan["partitions"]:
        cnn = cnns[part["cnn"]]
        ph = phases.get(cnn.name, {})
        firings = plan["firings"][part["name"]]
        seen: dict[str, int] = {}
        steps = []
        member = {l: g for g in groups.get(cnn.name, []) for l in g.layers}
        for layer_name in firings:
            if layer_name not in cnn.graph:
                raise InputError(f"plan: firings of {part['name']} name unknown layer {layer_name!r}")
        copies = lambda a, b_, c=cnn.name: _edge_copies(plan_edges, c, a, b_)  # noqa: E731
        items = [(name, None) for name in firings]
        if regions:
            items = prune(cnn, bands(cnn, firings, ph, copies, edges, stored, set(member)), ph,
                          set(part["layers"]))
            items = items if every_band else shared(cnn, items, edges)
        for item in items:
            if isinstance(item, list):            # a band: one region step
                steps.append(band_step(cnn, item, edges, dtype, out, models, region_keys, _safe))
                for f in item:
                    seen[f.layer] = seen.get(f.layer, 0) + 1
                continue
            layer_name = item[0]
            p = seen.get(layer_name, 0)
            seen[layer_name] = p + 1
            if layer_name in member:              # a tiled group is one step at its first layer
                if layer_name == member[layer_name].layers[0]:
                    from deploy.steps.tiles import group_step
                    steps.append(group_step(cnn, member[layer_name], copies,
                                            dtype, out, models, _safe, edges))
                continue
            steps.append(_step(cnn, layer_name, p, ph, plan_edges, edges, dtype, out, models,
                               _primitive(plan, cnn.name, layer_name, ph)))
        for layer_name, count in seen.items():
            if count != ph.get(layer_name, 1):
                raise InputError(f"plan: {part['name']} fires {layer_name} {count} times, "
                                 f"phases say {ph.get(layer_name, 1)}")
        partitions.append({"name": part["name"], "cnn": cnn.name,
                           "processor": part.get("processor", "gpu"), "steps": steps})

    cnn_info = {}
    for name, cnn in cnns.items():
        ph = phases.get(name, {})
        sinks = [s for s in cnn.order() if cnn.graph.out_degree(s) == 0]
        inputs = [s for s in cnn.order() if cnn.layer(s).op == INPUT]
        ref = None
        if cnn.source and Path(cnn.source).is_file():
            ref = str(Path("reference") / f"{_safe(name)}.onnx")
            (out / "reference").mkdir(exist_ok=True)
            _write_reference(cnn.source, out / ref)
        cnn_info[name] = {
            "inputs": [{"layer": s, "shape": list(cnn.layer(s).output_shape)} for s in inputs],
            "outputs": [{"layer": s, "shape": list(cnn.layer(s).output_shape),
                         "layout": "hncw" if ph.get(s, 1) > 1 else "nchw"} for s in sinks],
            "reference": ref,
            "partitions": [p["name"] for p in partitions if p["cnn"] == name]}
    result = {
        "format": mf.FORMAT, "version": mf.VERSION, "name": plan.get("name", ""),
        "backend": backend, "precision": plan.get("precision", "fp32"), "dtype": dtype,
        "data_bytes": data_bytes, "arena_bytes": host.total, "device_arena_bytes": dev.total,
        "device_align": arena.DEVICE_ALIGN, "plan_buffer_bytes": int(plan.get("buffer_bytes", sum(sizes))),
        "plan_param_bytes": plan.get("param_bytes"), "plan_memory_bytes": plan.get("memory_bytes"),
        "plan_workspace_bytes": plan.get("workspace_bytes", 0),
        "plan_session_bytes": plan.get("session_bytes", 0),
        "plan_output_bytes": plan.get("output_bytes", 0),
        "plan_fps": plan.get("fps") or {}, "plan_platform": plan.get("platform", ""),
        "buffers": [{"index": i, "offset": host.offsets[i], "device_offset": dev.offsets[i],
                     "bytes": sizes[i], "edges": list(b["edges"])} for i, b in enumerate(plan["buffers"])],
        "edges": edges, "cnns": cnn_info, "partitions": partitions,
        "pipelines": [list(g) for g in plan.get("pipelines", [[p["name"]] for p in partitions])],
        "routing": "round-robin", "models": models,
    }
    checked = dict(models)
    if with_profile:
        from deploy.steps.layer_models import write_profile_models
        result["profile"] = write_profile_models(cnns, dtype, out)
        checked.update({e["model"]: {"cnn": e["cnn"], "layer": e["layer"]} for e in result["profile"]})
    from deploy.checks.step_models import check_models
    check_models(out, checked, cnns)     # what ONNX Runtime would refuse, found here
    if backend == "tensorrt":
        from deploy.tensorrt.backend import copy_runner
        copy_runner(out)
    mf.save(result, out)
    return result


def _tiled_groups(plan: dict[str, Any], cnns: dict[str, CNN]) -> dict[str, list]:
    """The plan's fused-tiled groups (key `tilings`), checked against the CNNs."""
    from csdf.tiling import Group, check_group
    out: dict[str, list] = {}
    for cnn_name, groups in (plan.get("tilings") or {}).items():
        if cnn_name not in cnns:
            raise InputError(f"plan: key 'tilings' names unknown CNN {cnn_name!r}")
        for g in groups:
            try:
                group = Group(tuple(g["layers"]), int(g["grid"][0]), int(g["grid"][1]))
            except (KeyError, TypeError, ValueError, IndexError):
                raise InputError(f"plan: tilings.{cnn_name}: expected {{layers: [...], grid: [n, m]}}") from None
            check_group(cnns[cnn_name], list(group.layers))
            out.setdefault(cnn_name, []).append(group)
    return out


def _primitive(plan: dict, cnn: str, layer: str, ph: dict[str, int]) -> str | None:
    """The plan's primitive for a layer (key `primitives`, explore primitives), or None."""
    table = plan.get("primitives") or {}
    if not table:
        return None
    from deploy.steps import primitives
    name = (table.get(cnn) or {}).get(layer, primitives.DEFAULT)
    primitives.get(name)                      # InputError for an unknown name
    if ph.get(layer, 1) > 1 and name != primitives.DEFAULT:
        raise InputError(f"plan: layer {layer} runs by parts; primitive {name} is for whole layers")
    return name


def _step(cnn: CNN, name: str, p: int, ph: dict[str, int], plan_edges: dict, edges: dict,
          dtype: str, out: Path, models: dict, primitive: str | None = None) -> dict:
    layer = cnn.layer(name)
    n_phases = ph.get(name, 1)
    by_parts = n_phases > 1
    height = int(layer.output_shape[2])
    k = rows_per_phase(height, n_phases)            # output rows per phase
    count = len(part_rows(height, n_phases, p))     # of this phase (the last may be shorter)
    succ = [d for d in cnn.order() if cnn.graph.has_edge(name, d)]
    out_edges = [cp for cp, _ in mf.stored_outputs(       # each stored tensor once
        succ, lambda d: _edge_copies(plan_edges, cnn.name, name, d), edges)]
    is_sink = cnn.graph.out_degree(name) == 0
    if layer.op == INPUT:
        if by_parts:
            raise InputError(f"layer {name}: an Input by parts cannot be deployed")
        return {"layer": name, "phase": p, "model": None,
                "bind": [{"kind": "frame", "edges": e} for e in out_edges]}
    if primitive is not None and layer.op != "Conv" and primitive not in ("ort_nchw", "ort_nchwc"):
        raise InputError(f"plan: layer {name}: primitive {primitive} is for Conv layers, "
                         f"not {layer.op}")
    if primitive is not None and layer.op == "Conv" and ph.get(name, 1) == 1:
        from deploy.steps.primitives import ConvSpec, get
        in_shape = cnn.edge_shape(list(dict.fromkeys(layer.inputs))[0], name)
        why = get(primitive).refuses(ConvSpec.of(layer, in_shape))
        if why:
            raise InputError(f"plan: layer {name}: primitive {primitive} refuses it: {why}")
    bind: list[dict] = []
    in_ports, out_ports, fill = [], [], False
    srcs = list(dict.fromkeys(layer.inputs))
    for i, src in enumerate(srcs):
        copies = _edge_copies(plan_edges, cnn.name, src, name)
        e = edges[copies[0]]
        port = f"in{i}"
        if by_parts and not (e["shape"][2] == 1 and e["layout"] == "nchw"):
            rows, real = window_rows(cnn, name, src, p, k, count)
            if not any(real) and layer.op == "Pad":   # rows of its vertical padding only: no input
                fill = True
                continue
            if not any(real):
                raise InputError(f"layer {name}: phase {p} reads no row of {src}; "
                                 f"{layer.op} by parts with padding rows cannot be deployed")
            if e["layout"] != "hncw":
                raise InputError(f"plan: edge {copies[0]} feeds {name} by parts but is not stored by rows")
            masked = _needs_mask(cnn, name, src, n_phases, count)
            counted = counted_rows(cnn, name, src, p, k, count)
            in_ports.append(InPort(port, tuple(e["shape"]), "hncw", e["slots"], len(rows), masked,
                                   counted is not None))
            bind.append({"kind": "edge", "name": port, "edges": copies, "slot": 0,
                         "shape": in_ports[-1].stored_shape})
            # padding rows are masked; they point at a real row of the same window (not slot
            # 0), so a step reads only rows still holding data (explorer/memory/staircase.py)
            anchor = next(r for r, ok in zip(rows, real) if ok) % e["slots"]
            bind.append({"kind": "const", "name": f"{port}_idx",
                         "values": [r % e["slots"] if ok else anchor for r, ok in zip(rows, real)]})
            if masked:
                bind.append({"kind": "const", "name": f"{port}_mask", "values": [int(ok) for ok in real]})
            if counted is not None:
                bind.append({"kind": "const", "name": f"{port}_count", "values": counted})
        else:
            if e["slots"] != e["shape"][2]:
                raise InputError(f"plan: edge {copies[0]} holds {e['slots']} rows but {name} "
                                 f"reads it whole")
            in_ports.append(InPort(port, tuple(e["shape"]), e["layout"], e["slots"], None))
            bind.append({"kind": "edge", "name": port, "edges": copies, "slot": 0,
                         "shape": in_ports[-1].stored_shape})
    shape = tuple(int(v) for v in layer.output_shape)
    for j, copies in enumerate(out_edges):
        e = edges[copies[0]]
        port = OutPort(f"out{j}", shape, e["layout"], by_parts, count)
        out_ports.append(port)
        slot = (p * k) % e["slots"] if by_parts else 0
        if by_parts and slot + count > e["slots"]:
            raise InputError(f"plan: edge {copies[0]} holds {e['slots']} rows, not whole parts "
                             f"of {k} rows of {name}")
        bind.append({"kind": "edge", "name": port.name, "edges": copies, "slot": slot,
                     "shape": port.stored_shape})
    if is_sink:
        port = OutPort("sink", shape, "hncw" if by_parts else "nchw", by_parts, count)
        out_ports.append(port)
        bind.append({"kind": "output", "name": "sink", "layer": name, "slot": p * k if by_parts else 0,
                     "shape": port.stored_shape})
    # one part model per part size serves every phase of that size (a Pad's phases in its
    # vertical padding: another; a Pad's part of k > 1 rows meeting it: one per border)
    tag = "whole" if not by_parts else ("part" if k == 1 else f"part{count}")
    if by_parts and fill:
        tag += "_fill"
    pad_rows = _pad_part(cnn, layer, p, k, count) if by_parts and layer.op == "Pad" and k > 1 else None
    if pad_rows and any(pad_rows):
        tag += f"_t{pad_rows[0]}_b{pad_rows[1]}"
    rel = f"models/{_safe(cnn.name)}/{_safe(name)}.{tag}.onnx"
    if rel not in models:
        built, part_model = layer, by_parts
        if pad_rows and (fill or any(pad_rows)):   # a Pad part of k > 1 rows meeting its padding
            built, part_model = _pad_layer(layer, pad_rows, count, fill), fill
        model = step_model(built, in_ports, out_ports, dtype, part_model,
                           primitive if layer.op == "Conv" and not by_parts else None)
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        onnx.save(model, str(out / rel))
        models[rel] = {"cnn": cnn.name, "layer": name, "variant": tag,
                       "inputs": [p_.name for p_ in in_ports], "outputs": [p_.name for p_ in out_ports]}
        if primitive is not None:
            models[rel]["primitive"] = primitive
    step = {"layer": name, "phase": p, "model": rel, "bind": bind}
    if primitive is not None:
        step["primitive"] = primitive
    return step


def _needs_mask(cnn: CNN, name: str, src: str, n_phases: int, count: int) -> bool:
    """True when a phase of `count` rows of `name` reads padding rows of `src`: its part
    model (shared by every phase of that size) takes a row mask."""
    height = int(cnn.layer(name).output_shape[2])
    k = rows_per_phase(height, n_phases)
    return any(not all(window_rows(cnn, name, src, q, k, count)[1]) for q in range(n_phases)
               if len(part_rows(height, n_phases, q)) == count)


def _pad_part(cnn: CNN, layer, p: int, k: int, count: int) -> tuple[int, int]:
    """Output rows of a Pad's part (rows p*k ..) that lie in its top and bottom padding."""
    from csdf.parts import window
    src = list(dict.fromkeys(layer.inputs))[0]
    in_h = int(cnn.edge_shape(src, layer.name)[2])
    top = window(cnn, layer, src).pad_top
    rows = [p * k + i - top for i in range(count)]
    return sum(1 for r in rows if r < 0), sum(1 for r in rows if r >= in_h)


def _pad_layer(layer, pad_rows: tuple[int, int], count: int, fill: bool):
    """The Pad of one part of k > 1 rows: its real rows padded by the part's padding rows
    (built as a whole Pad of the gathered rows), or `count` rows of the pad value."""
    from dataclasses import replace as dc_replace
    hyper = dict(layer.hyper)
    if fill:
        hyper["fill_rows"] = count
        return dc_replace(layer, hyper=hyper)
    pads = [int(v) for v in hyper.get("pads", [])]
    if len(pads) == 4:
        pads = [pad_rows[0], pads[1], pad_rows[1], pads[3]]
    else:
        pads[2], pads[6] = pad_rows
    hyper["pads"] = pads
    return dc_replace(layer, hyper=hyper)
