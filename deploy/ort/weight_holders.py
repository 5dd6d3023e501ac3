"""Which step models hold which layers' weights, and what follows for the sessions that
run them: one copy of each weight, in one form.

A layer's weights are in every model that computes it: its own step model (a whole layer,
or every part in one model), the models of its first, middle and last parts, the region
bands and the fused tiles that include it. The ONNX Runtime backend shares one array per
distinct weight tensor across those sessions (deploy/ort/backend.py `_shared_weights`), so
a layer's weights are held once when every model holds them alike.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

from deploy.ort.blocked_rings import NCHWC
from deploy.ort.providers import CPU
from deploy.runtime.footprint import HeapMeter, trim_heap
from deploy.runtime.manifest_records import Manifest

WEIGHTED = {"Conv", "FusedConv", "QLinearConv", "ConvInteger"}


def holders(manifest: Manifest) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(layer -> the models computing it, model -> the layers it computes); a tiled group's
    tile models count as one holder, `tiles:<step index>`."""
    by_layer: dict[str, set[str]] = {}
    by_model: dict[str, set[str]] = {}
    for i, (_, _, step) in enumerate(manifest.steps()):
        if not step.model and step.group is None:
            continue
        computed = {step.layer} | {layer for layer, _ in step.region or ()}
        if step.group is not None:
            computed |= set(step.group.layers)
        model = step.model or f"tiles:{i}"
        by_model.setdefault(model, set()).update(computed)
        for layer in computed:
            by_layer.setdefault(layer, set()).add(model)
    return by_layer, by_model


def sole_models(manifest: Manifest, root: Path, int8_only: bool = False) -> set[str]:
    """The step models that alone hold the weights of every layer they compute (a whole
    layer, or every part of a layer in one model, in no region band or fused tile): their
    weights are in no other session. An int8 step pre-packs those: ONNX Runtime's
    QLinearConv otherwise packs its weight at every call (measured on MobileNetV2's
    features_18, one thread: 584 us a call unpacked, 150 us pre-packed), and a pre-packed
    copy of weights no other session holds is one packed copy per weight. The models of a
    layer's first, middle and last parts, of a region's bands and of fused tiles hold the
    same weights in several sessions, so they do not pre-pack (one packed copy each).
    A pre-packing session gets its weights inside its model rather than as shared arrays:
    ONNX Runtime then owns them and keeps the packed copy alone (measured on MobileNetV2's
    int8 reuse-only deployment, one thread: footprint 16.2 MiB with the arrays shared as well,
    14.0 without). `int8_only` (a deployment with a precision per layer): only the models
    whose layers are all int8."""
    by_layer, by_model = holders(manifest)
    return {str(root / m) for m, layers in by_model.items()
            if not m.startswith("tiles:") and all(by_layer[layer] == {m} for layer in layers)
            and (not int8_only or all(manifest.layer_precisions.get(manifest.models[m].cnn, {})
                                      .get(layer) == "int8" for layer in layers))}


def one_form_per_layer(manifest: Manifest, blocked: dict[str, onnx.ModelProto]) -> set[str]:
    """The step models to run with plain kernels so that no layer's weights are held both
    NCHWc-reordered and plain. `blocked`: each model's graph as ONNX Runtime optimises it
    with its NCHWc rewrite. ONNX Runtime reorders a conv's weight into blocks only where it
    runs the NCHWc kernel; a 1x1 conv by rows reading an int8 weight through
    DequantizeLinear, or a conv ONNX Runtime leaves plain, keeps it as it is. When the models
    computing one layer do both, the weight is held twice (measured: Table 13's mixed
    ResNet-50 at 1.09-1.10x the plan's parameter bytes); then every model of that layer runs
    plain, and every model of a layer those models compute, until no layer is mixed."""
    kinds = {m: _kinds(g) for m, g in blocked.items()}
    by_layer, by_model = holders(manifest)
    plain: set[str] = set()
    changed = True
    while changed:
        changed = False
        for layer, models in by_layer.items():
            if models <= plain:
                continue
            seen = set()
            for m in models:
                seen |= {"plain"} if m in plain else kinds.get(m, set())
            if {"nchwc", "plain"} <= seen:
                plain |= {m for m in models if not m.startswith("tiles:")}
                changed = True
    return plain & set(kinds)


def _kinds(graph: onnx.ModelProto) -> set[str]:
    """"nchwc" when the graph runs a conv as ONNX Runtime's NCHWc kernel, "plain" when it
    runs one otherwise."""
    out = set()
    for node in graph.graph.node:
        if node.op_type in WEIGHTED:
            out.add("nchwc" if node.domain == NCHWC else "plain")
    return out


def weightless_state(model: onnx.ModelProto, path: Path, arrays: dict[str, np.ndarray],
                     opts: ort.SessionOptions, heap: HeapMeter) -> int:
    """The heap a session of pre-packing step `model` keeps beyond its weights, measured on
    a second build that holds none of them: `arrays` handed in, nothing pre-packed (`opts`
    as a plain step's); `model` is written to `path`, beside the side file its weights
    refer to. The pre-packing build's own growth cannot tell: ONNX Runtime keeps a packed
    copy on the heap (QGemm: int8 MobileNetV2's classifier grew it by 1314 KiB for 1255 KiB
    of weights) or in the shared arena, which the heap meter counts as in use from the start
    (QLinearConv: features_18 grew it by 60 KiB for 406 KiB), so less its weights 13 of that
    network's 66 sessions came out below zero."""
    onnx.save(model, str(path))
    values = {name: ort.OrtValue.ortvalue_from_numpy(a) for name, a in arrays.items()}
    for name, value in values.items():     # ONNX Runtime keeps pointers: `values` keeps them
        opts.add_initializer(name, value)
    trim_heap()
    before = heap.in_use()
    session = ort.InferenceSession(str(path), opts, providers=CPU)
    trim_heap()
    grown = heap.in_use() - before
    del session, values
    path.unlink()
    return grown
