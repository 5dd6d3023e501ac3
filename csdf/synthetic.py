"""CNNs given by sizes alone: the paper's worked example has layers and edge sizes but no
weights. Such a CNN has `Synthetic` layers (`Input` for layers without producers) and no
parameters; a layer may carry window hyper-parameters (kernel_shape, strides, pads,
dilations) so processing by parts knows how many rows a phase reads.

Form (inside an app file's `model:`)::

    synthetic:
      layers: [l1, l2, l3]                 # or a mapping name -> hyper, e.g. l2: {kernel_shape: [5, 5]}
      edges: {l1->l2: [1, 3, 32, 32], l2->l3: [1, 8, 32, 32]}
      outputs: {l3: [1, 8, 32, 32]}        # output shape of sink layers (default: their input's)

A layer's output shape is the shape of its outgoing edges (all must agree).
"""
from __future__ import annotations

from typing import Any

from csdf.model import CNN, INPUT, Layer
from sdf3.errors import InputError

HYPER_KEYS = ("kernel_shape", "strides", "pads", "dilations")
KEYS = {"layers", "edges", "outputs"}


def _shape(value: Any, where: str) -> tuple[int, int, int, int]:
    if not (isinstance(value, list) and len(value) == 4
            and all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in value)):
        raise InputError(f"{where}: expected a shape [N, C, H, W] of 4 positive integers, got {value!r}")
    return tuple(value)  # type: ignore[return-value]


def _ints(value: Any, n: int, where: str) -> list[int]:
    if not (isinstance(value, list) and len(value) == n
            and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in value)):
        raise InputError(f"{where}: expected a list of {n} non-negative integers, got {value!r}")
    return list(value)


def _layers(spec: Any, where: str) -> dict[str, dict[str, Any]]:
    """Layer name -> hyper, in the order given."""
    if isinstance(spec, list) and all(isinstance(n, str) for n in spec):
        spec = {n: {} for n in spec}
    if not isinstance(spec, dict) or not spec:
        raise InputError(f"{where}.layers: expected a list of layer names or a mapping name -> hyper-parameters")
    if len(spec) != len(set(spec)):
        raise InputError(f"{where}.layers: layer names must be unique")
    out = {}
    for name, hyper in spec.items():
        key = f"{where}.layers.{name}"
        hyper = hyper or {}
        if not isinstance(name, str) or not name or "." in name or "->" in name:
            raise InputError(f"{key}: layer names must be non-empty and contain no '.' or '->'")
        if not isinstance(hyper, dict):
            raise InputError(f"{key}: expected a mapping of hyper-parameters ({', '.join(HYPER_KEYS)})")
        unknown = set(hyper) - set(HYPER_KEYS)
        if unknown:
            raise InputError(f"{key}: unknown key {sorted(unknown)[0]!r}; expected {', '.join(HYPER_KEYS)}")
        out[name] = {k: _ints(v, 4 if k == "pads" else 2, f"{key}.{k}") for k, v in hyper.items()}
    return out


def build_synthetic(spec: Any, name: str, where: str = "synthetic") -> CNN:
    """The CNN `name` from a synthetic spec; `where` prefixes error messages (file and key)."""
    if not isinstance(spec, dict):
        raise InputError(f"{where}: expected a mapping with keys layers, edges, outputs")
    unknown = set(spec) - KEYS
    if unknown:
        raise InputError(f"{where}: unknown key {sorted(unknown)[0]!r}; expected layers, edges, outputs")
    layers = _layers(spec.get("layers"), where)
    edges = spec.get("edges") or {}
    if not isinstance(edges, dict):
        raise InputError(f"{where}.edges: expected a mapping 'src->dst': [N, C, H, W]")
    inputs: dict[str, list[str]] = {n: [] for n in layers}
    out_shape: dict[str, tuple[int, int, int, int]] = {}
    for key, value in edges.items():
        parts = str(key).split("->")
        if len(parts) != 2 or any(p.strip() not in layers for p in parts):
            raise InputError(f"{where}.edges.{key}: expected 'src->dst' naming two listed layers")
        src, dst = (p.strip() for p in parts)
        shape = _shape(value, f"{where}.edges.{key}")
        if out_shape.setdefault(src, shape) != shape:
            raise InputError(f"{where}.edges.{key}: layer {src} has outgoing edges of different shapes "
                             f"{list(out_shape[src])} and {list(shape)}")
        inputs[dst].append(src)
    outputs = spec.get("outputs") or {}
    if not isinstance(outputs, dict):
        raise InputError(f"{where}.outputs: expected a mapping layer: [N, C, H, W]")
    for layer, value in outputs.items():
        if layer not in layers:
            raise InputError(f"{where}.outputs.{layer}: layer {layer!r} is not listed in layers")
        if layer in out_shape:
            raise InputError(f"{where}.outputs.{layer}: layer {layer!r} has outgoing edges; outputs are for sinks")
        out_shape[layer] = _shape(value, f"{where}.outputs.{layer}")
    cnn = CNN(name, original_param_count=0)
    pending = dict(layers)
    while pending:   # add in the listed order, producers first
        ready = [n for n in pending if all(src not in pending for src in inputs[n])]
        if not ready:
            raise InputError(f"{where}.edges: the edges form a cycle through {sorted(pending)[0]!r}")
        for n in ready:
            shape = out_shape.get(n) or (cnn.layer(inputs[n][0]).output_shape if inputs[n] else None)
            if shape is None:
                raise InputError(f"{where}.layers.{n}: layer has no edges; give its shape in outputs")
            cnn.add_layer(Layer(n, "Synthetic" if inputs[n] else INPUT, dict(pending.pop(n)),
                                inputs=inputs[n], output_shape=shape))
    cnn.outputs = [n for n in cnn.order() if cnn.graph.out_degree(n) == 0]
    return cnn
