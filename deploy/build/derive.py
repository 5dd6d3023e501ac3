"""Plan -> deployment: the arena placement of the plan's buffers, the steps of every
partition's schedule (deploy/build/layer_step.py: one ONNX step model per layer, whole or
per part size; deploy/build/regions.py: bands of firings by parts as region steps;
deploy/steps/tiles.py: fused-tiled groups), and manifest.json.
"""
from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any

import onnx
from onnx.external_data_helper import uses_external_data

from csdf.model import CNN, INPUT, EdgeId
from csdf.onnx_inputs import with_shapes
from deploy.backends import registry
from deploy.build.layer_step import layer_step, safe_name
from deploy.build.model_ports import model_ports
from deploy.build.regions import band_step, bands, prune, shared
from deploy.quant.scales import ActivationScales
from deploy.runtime import arena, manifest as mf
from deploy.runtime.manifest_records import (DTYPE_BYTES, ArenaBuffer, CnnInfo, Port,
                                             SourceModel, StepModel, StoredEdge)
from deploy.runtime.step_records import ManifestPartition, Step
from deploy.checks import plan_check
from explorer.app.layer_precision import AUTO, LayerPrecisions
from explorer.plan.model import Plan, PlanPartition
from explorer.plan.plan_file import from_dict
from sdf3.errors import InputError

DTYPES = {4: "float32", 2: "float16", 1: "uint8"}


def _write_reference(source: str, target: Path, shapes: dict[str, tuple[int, ...]]) -> None:
    """The unmodified model, self-contained: weights kept in an external data file (read
    beside the source) are embedded, so the deployment runs from any working directory; its
    graph inputs have the static `shapes` the CNN was imported with (an export with dynamic
    dimensions: the app file's input_shape, csdf/onnx_inputs.py), so the reference session
    and the frames made from it see the shapes the step models were built for."""
    head = onnx.load(source, load_external_data=False)
    external = any(uses_external_data(t) for t in head.graph.initializer)
    model = onnx.load(source) if external else head
    if with_shapes(model, shapes) or external:
        onnx.save(model, str(target))
    else:
        shutil.copyfile(source, target)


def edge_copies(plan: Plan, cnn: str, src: str, dst: str) -> list[str]:
    """The names of edge src -> dst on even and odd frames: the edge twice, or its copies
    (1) and (2) of a double-buffered pipeline edge."""
    one = EdgeId(cnn, src, dst)
    if one in plan.edges:
        return [str(one), str(one)]
    pair = [one.with_copy(1), one.with_copy(2)]
    if all(e in plan.edges for e in pair):
        return [str(e) for e in pair]
    raise InputError(f"plan: key 'edges' has no entry for edge {one}")


def _stored_by_rows(plan: Plan, phases: dict, rep: dict[str, str]) -> set[str]:
    """Stored tensors (`rep`: manifest.stored_as, edges of one tensor in one buffer) kept
    rows outermost ("hncw"): some edge stored there has an end that runs by parts (the
    others read or write the same rows, whole)."""
    out = set()
    for e in plan.edges:
        ph = phases.get(e.cnn, {})
        if ph.get(e.src, 1) > 1 or ph.get(e.dst, 1) > 1:
            out.add(rep[str(e)])
    return out


def derive(plan: Plan | dict[str, Any], cnns: dict[str, CNN], out_dir: str | Path,
           backend: str = "onnxruntime", with_profile: bool = False,
           where: str = "plan", regions: bool = False, every_band: bool = False,
           scales: ActivationScales | None = None, chains: bool = True) -> mf.Manifest:
    """Write the step models and manifest.json of `plan` into `out_dir`; returns the manifest.
    `plan` is a Plan, or plan.json's data (read as explorer.plan.plan_file reads the file).
    The plan is checked first (deploy/checks/plan_check.py; `where` names it in the one-line
    refusal), so nothing is written for a plan the explorer could not have made.
    `regions`: consecutive firings by parts run as region steps, one call per band
    (deploy/build/regions.py), a band whose model no other band shares as its firings' own
    steps (regions.shared) unless `every_band`, and an int8 plan's consecutive whole layers
    on ONNX Runtime as chain steps (deploy/build/chains.py) when `chains`; else one step per
    firing. An int8 plan (data_bytes 1) needs `scales`, the scale of every stored tensor
    (deploy/quant/): its arena holds them in `scales.dtype`."""
    if not isinstance(plan, Plan):
        plan = from_dict(plan, where)
    check_backend(plan, backend, where)
    dtype = DTYPES.get(plan.data_bytes) if isinstance(plan.data_bytes, int) else None
    if dtype is None:
        raise InputError(f"{where}: key 'data_bytes' must be 4 (fp32), 2 (fp16) or 1 (int8) "
                         f"to deploy, got {plan.data_bytes!r}")
    chosen = registry.backend(backend)
    layers = None
    if plan.layer_precisions and with_profile:
        raise InputError(f"{where}: --with-profile writes one-precision profile models; a plan "
                         f"with a precision per layer (key 'layer_precisions') has none")
    if plan.layer_precisions:      # bytes of each tensor at its layer's precision
        from deploy.build.layer_storage import LayerStorage
        layers = LayerStorage.of(LayerPrecisions.of(plan.layer_precisions), cnns, scales,
                                 chosen.stored_weights)
        chains = False             # chain steps are int8's
        dtype = scales.dtype if scales is not None else dtype     # an arena of bytes
    elif dtype == "uint8":
        if scales is None:
            raise ValueError("an int8 plan is deployed with the scales of its tensors")
        dtype = scales.dtype
    plan_check.check(plan, cnns, where)
    weights = chosen.stored_weights(plan.precision)      # docs/precision.md
    out = Path(out_dir)
    (out / "models").mkdir(parents=True, exist_ok=True)
    phases = {c: {k: int(v) for k, v in ph.items()} for c, ph in plan.phases.items()}
    host, dev = _arenas(plan)
    groups = _tiled_groups(plan, cnns)
    stored = mf.stored_as({str(k): e.to_dict() for k, e in plan.edges.items()})
    edges = _placed_edges(plan, cnns, phases, groups, stored, host, dev, layers)
    models: dict[str, StepModel] = {}
    region_keys: dict = {}
    partitions = []
    for part in plan.partitions:
        cnn = cnns[part.cnn]
        steps = _partition_steps(plan, part, cnn, phases.get(cnn.name, {}), groups, edges, stored,
                                 dtype, out, models, region_keys, regions, every_band,
                                 weights, scales.for_cnn(cnn.name) if scales else None,
                                 chain=chains and regions and scales is not None
                                 and chosen.capabilities.chain_steps, layers=layers)
        partitions.append(ManifestPartition(part.name, cnn.name, part.processor, tuple(steps)))
    manifest = mf.Manifest(
        plan.name, backend, plan.precision, dtype, int(plan.data_bytes), host.total, dev.total,
        arena.DEVICE_ALIGN,
        tuple(ArenaBuffer(i, host.offsets[i], dev.offsets[i], int(b.bytes),
                          tuple(str(e) for e in b.edges)) for i, b in enumerate(plan.buffers)),
        edges, _cnn_info(cnns, phases, partitions, out, scales, layers), tuple(partitions),
        tuple(tuple(g) for g in plan.pipelines), models,
        plan_buffer_bytes=int(plan.buffer_bytes), plan_param_bytes=plan.param_bytes,
        plan_memory_bytes=plan.memory_bytes, plan_workspace_bytes=plan.workspace_bytes,
        plan_session_bytes=plan.session_bytes, plan_output_bytes=plan.output_bytes,
        plan_fps={k: float(v) for k, v in plan.fps.items()}, plan_platform=plan.platform,
        quantization=scales,
        layer_precisions={c: dict(v) for c, v in layers.precisions.items()} if layers else {},
        tensor_dtypes={c: dict(v) for c, v in layers.tensors.items()} if layers else {},
        plan_sqnr_estimate_db={c: float(v) for c, v in plan.sqnr_estimate_db.items()
                               if v is not None and math.isfinite(v)})
    return _finish(manifest, cnns, dtype, out, backend, with_profile, where)


def check_backend(plan: Plan, backend: str, where: str = "plan") -> None:
    """One line for a plan `backend` cannot run, by what the backend says it supports
    (deploy/backends/: the TensorRT board runner builds fp32/fp16 engines and runs layer and
    region steps, so int8 plans and fused tiles are ONNX Runtime's), naming the first
    backend that can; an unknown `backend` is one line naming the known ones."""
    refused = _refused(plan, registry.backend(backend).capabilities)
    if refused:
        can = [n for n in registry.names() if not _refused(plan, registry.backend(n).capabilities)]
        raise InputError(f"{where}: {refused} cannot be deployed with --backend {backend}"
                         + (f"; deploy it with --backend {can[0]}" if can else ""))


def _refused(plan: Plan, caps) -> str:
    """What of `plan` a backend with capabilities `caps` cannot deploy, in words ("" none):
    a precision some backend deploys but not this one (data_bytes 1 is int8 whatever the
    plan's name for it), or fused tiles."""
    if plan.layer_precisions:
        return "" if AUTO in caps.precisions else "a plan with a precision per layer (precision: auto)"
    precision = "int8" if plan.data_bytes == 1 else plan.precision
    known = {p for n in registry.names() for p in registry.backend(n).capabilities.precisions}
    if precision in known and precision not in caps.precisions:
        return ("an " if precision[0] in "aeiouf" else "a ") + f"{precision} plan"
    if plan.tilings and not caps.fused_tiles:
        return "a plan with fused tiles (key 'tilings')"
    return ""


def _arenas(plan: Plan) -> tuple[arena.Placement, arena.Placement]:
    """The buffers' places in the host and the device arena: the plan's own offsets (offset
    planners), else packed in order."""
    sizes = [int(b.bytes) for b in plan.buffers]
    if plan.placed():
        at = [int(b.offset) for b in plan.buffers]
        return arena.place_at(at, sizes), arena.place_at(at, sizes, arena.DEVICE_ALIGN)
    return arena.place(sizes), arena.place(sizes, arena.DEVICE_ALIGN)


def _placed_edges(plan: Plan, cnns: dict[str, CNN], phases: dict, groups: dict, stored: dict,
                  host, dev, layers=None) -> dict[str, StoredEdge]:
    """The manifest's edges: each plan edge with its buffer's place, shape, slots (rows held)
    and layout (rows outermost where an end runs by parts; a tiled group's inner edges per tile);
    with a precision per layer (`layers`, deploy/build/layer_storage.py) each at its
    producer's element type and bytes."""
    by_rows = _stored_by_rows(plan, phases, stored)
    inner = {(c, a, b_) for c, gs in groups.items() for g in gs for a, b_ in g.internal_edges()}
    edges: dict[str, StoredEdge] = {}
    for eid, e in plan.edges.items():
        name = str(eid)
        own = layers.dtype(eid.cnn, eid.src) if layers is not None else None
        data_bytes = DTYPE_BYTES[own] if own else int(plan.data_bytes)
        shape = tuple(int(v) for v in cnns[eid.cnn].edge_shape(eid.src, eid.dst))
        n, c, h, w = shape
        buf = int(e.buffer)
        if (eid.cnn, eid.src, eid.dst) in inner:     # a per-tile buffer of a tiled group
            edges[name] = StoredEdge(buf, host.offsets[buf], dev.offsets[buf], shape, int(e.rows),
                                     "tile", int(e.elements) * data_bytes, n * c * w * data_bytes)
            continue
        layout = "hncw" if h > 1 and stored[name] in by_rows else "nchw"
        slots = int(e.rows)
        if layout == "nchw" and slots != h:
            raise InputError(f"plan: edge {name} holds {slots} of {h} rows but neither end "
                             f"runs by parts")
        nbytes = slots * n * c * w * data_bytes
        if nbytes > int(plan.buffers[buf].bytes):
            raise InputError(f"plan: edge {name} needs {nbytes} bytes, buffer {buf} has "
                             f"{int(plan.buffers[buf].bytes)}")
        edges[name] = StoredEdge(buf, host.offsets[buf], dev.offsets[buf], shape, slots, layout,
                                 nbytes, n * c * w * data_bytes, own)
    return edges


def _partition_steps(plan: Plan, part: PlanPartition, cnn: CNN, ph: dict[str, int], groups: dict,
                     edges: dict, stored: dict, dtype: str, out: Path, models: dict,
                     region_keys: dict, regions: bool, every_band: bool,
                     weights: str = "float32", scales: dict | None = None,
                     chain: bool = False, layers=None) -> list[Step]:
    """The steps of one partition's firings: a band of firings by parts as one region step
    (`regions`), a tiled group as one step at its first layer, every other firing its own,
    and with `chain` consecutive whole layers as one chain step (deploy/build/chains.py);
    `weights`: how their parameters are stored (deploy/quant/stored.py); `layers`: each
    layer's output type and weights where the plan has a precision per layer."""
    firings = plan.firings[part.name]
    member = {l: g for g in groups.get(cnn.name, []) for l in g.layers}
    for layer_name in firings:
        if layer_name not in cnn.graph:
            raise InputError(f"plan: firings of {part.name} name unknown layer {layer_name!r}")
    copies = lambda a, b_: edge_copies(plan, cnn.name, a, b_)  # noqa: E731
    items: list = [(name, None) for name in firings]
    if regions:
        items = prune(cnn, bands(cnn, firings, ph, copies, edges, stored, set(member)), ph,
                      set(part.layers))
        items = items if every_band else shared(cnn, items, edges)
    seen: dict[str, int] = {}
    steps = []
    for item in items:
        if isinstance(item, list):            # a band: one region step
            steps.append(band_step(cnn, item, edges, dtype, out, models, region_keys, safe_name,
                                   weights, scales, layers))
            for f in item:
                seen[f.layer] = seen.get(f.layer, 0) + 1
            continue
        layer_name = item[0]
        p = seen.get(layer_name, 0)
        seen[layer_name] = p + 1
        if layer_name in member:              # a tiled group is one step at its first layer
            if layer_name == member[layer_name].layers[0]:
                from deploy.build.tile_step import group_step
                steps.append(group_step(cnn, member[layer_name], copies,
                                        dtype, out, models, safe_name, edges, weights, scales))
            continue
        own = (layers.dtype(cnn.name, layer_name), layers.weight_kind(cnn.name, layer_name)) \
            if layers is not None else (dtype, weights)
        steps.append(layer_step(cnn, layer_name, p, ph, copies, edges, own[0], out, models,
                                _primitive(plan, cnn.name, layer_name, ph), own[1], scales))
    for layer_name, count in seen.items():
        if count != ph.get(layer_name, 1):
            raise InputError(f"plan: {part.name} fires {layer_name} {count} times, "
                             f"phases say {ph.get(layer_name, 1)}")
    if chain:
        from deploy.build.chains import chains
        steps = chains(cnn, steps, models, edges, stored, out, safe_name)
    return steps


def _cnn_info(cnns: dict[str, CNN], phases: dict, partitions: list[ManifestPartition], out: Path,
              scales: ActivationScales | None = None, layers=None) -> dict[str, CnnInfo]:
    """Per CNN: its input and output layers and shapes, its reference model (the unmodified
    model copied into `out`, for the equivalence check; for an int8 plan, the model quantized
    with `scales` as the deployment is: deploy/checks/quantized.py; with a precision per
    layer, the model rounded per layer as the deployment is: deploy/checks/layer_reference.py),
    its partitions and its source model's path and digest (`source_model`)."""
    info = {}
    for name, cnn in cnns.items():
        ph = phases.get(name, {})
        sinks = [s for s in cnn.order() if cnn.graph.out_degree(s) == 0]
        inputs = [s for s in cnn.order() if cnn.layer(s).op == INPUT]
        ref = None
        if cnn.source and Path(cnn.source).is_file():
            ref = str(Path("reference") / f"{safe_name(name)}.onnx")
            (out / "reference").mkdir(exist_ok=True)
            if layers is not None:
                from deploy.checks.layer_reference import layer_reference
                onnx.save(layer_reference(cnn.source, cnn, name,
                                          LayerPrecisions.of({name: layers.precisions[name]}),
                                          scales), str(out / ref))
            elif scales is not None:
                from deploy.checks.quantized import write_reference
                write_reference(cnn.source, out / ref, cnn, scales, name)
            else:
                _write_reference(cnn.source, out / ref, cnn.input_shapes)
        ins = tuple(Port(s, _shape(cnn, s)) for s in inputs)
        outs = tuple(Port(s, _shape(cnn, s), "hncw" if ph.get(s, 1) > 1 else "nchw") for s in sinks)
        if ref is not None:
            ins, outs = model_ports(out / ref, ins, outs)
        info[name] = CnnInfo(ins, outs, ref, tuple(p.name for p in partitions if p.cnn == name),
                             source_model(cnn))
    return info


def source_model(cnn: CNN) -> SourceModel | None:
    """The model file the app names for `cnn` (path, SHA-256, what it computes in), which
    the run compares an int8 deployment with (deploy/run/vs_fp32.py); None without one."""
    if not cnn.source or not Path(cnn.source).is_file():
        return None
    from deploy.checks.files import digest
    from deploy.checks.reference import stored_dtype
    path = Path(cnn.source).resolve()
    kind = "qdq" if getattr(cnn, "quantized", None) is not None else stored_dtype(path)
    return SourceModel(str(path), digest(path), kind)


def _shape(cnn: CNN, layer: str) -> tuple[int, ...]:
    return tuple(int(v) for v in cnn.layer(layer).output_shape)


def _finish(manifest: mf.Manifest, cnns: dict[str, CNN], dtype: str, out: Path, backend: str,
            with_profile: bool, where: str) -> mf.Manifest:
    """The per-layer profile models (`with_profile`), the check of every model written, the
    TensorRT runner, the digests of the files written (deploy/checks/files.py), and
    manifest.json."""
    from dataclasses import replace

    from deploy.checks import files
    from deploy.checks.step_models import check_models
    if with_profile:
        from deploy.build.profile_models import write_profile_models
        manifest = replace(manifest, profile=tuple(write_profile_models(cnns, dtype, out)))
    check_models(out, manifest, cnns)     # what ONNX Runtime would refuse, found here
    registry.backend(backend).add_files(out)
    rels = list(manifest.models) + [p.model for p in manifest.profile or ()] \
        + [c.reference for c in manifest.cnns.values() if c.reference]
    manifest = replace(manifest, files=files.digests(out, rels))
    mf.save(manifest, out)
    return manifest


def _tiled_groups(plan: Plan, cnns: dict[str, CNN]) -> dict[str, list]:
    """The plan's fused-tiled groups (key `tilings`), checked against the CNNs."""
    from csdf.tiling import check_group
    out: dict[str, list] = {}
    for cnn_name, groups in plan.tilings.items():
        if cnn_name not in cnns:
            raise InputError(f"plan: key 'tilings' names unknown CNN {cnn_name!r}")
        for group in groups:
            check_group(cnns[cnn_name], list(group.layers))
            out.setdefault(cnn_name, []).append(group)
    return out


def _primitive(plan: Plan, cnn: str, layer: str, ph: dict[str, int]) -> str | None:
    """The plan's primitive for a layer (key `primitives`, explore primitives), or None."""
    if not plan.primitives:
        return None
    from deploy.steps import primitives
    name = (plan.primitives.get(cnn) or {}).get(layer, primitives.DEFAULT)
    primitives.get(name)                      # InputError for an unknown name
    if ph.get(layer, 1) > 1 and name != primitives.DEFAULT:
        raise InputError(f"plan: layer {layer} runs by parts; primitive {name} is for whole layers")
    return name
