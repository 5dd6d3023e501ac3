"""One step of a deployment's schedule that runs one firing of one layer: a whole layer, or
phase p of a layer by parts (output rows p*k .. p*k + k - 1, k = ceil(H / phases), the last
part shorter). The step binds, for every input edge, the stored tensor (whole, or the ring
plus the int32 slots of the rows its window reads and, where the window meets padding, their
0/1 mask), and for every output edge the region it writes (the whole tensor, or slots
p*k % S .. of the ring); a sink writes the CNN's output array outside the arena. Every
binding lists two edges, those of even and odd frames (the same one twice when
single-buffered). The step's ONNX model (deploy/steps/parts.py) is written once per part
size and shared by every phase of that size.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import onnx

from csdf.layer_attrs import PadAttrs, with_hyper
from csdf.model import CNN, INPUT, Layer
from csdf.parts import part_rows, rows_per_phase
from deploy.runtime import manifest as mf
from deploy.runtime.manifest_records import StepModel, StoredEdge
from deploy.runtime.step_records import Binding, Step
from deploy.quant.stored import weights_of
from deploy.steps.parts import InPort, OutPort, counted_rows, step_model, window_rows
from sdf3.errors import InputError

Copies = Callable[[str, str], list[str]]      # (src, dst) -> the edge's names, even and odd frames


def safe_name(name: str) -> str:
    """A layer's or CNN's name as a file name."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


@dataclass(frozen=True)
class Part:
    """Which rows one firing of a layer computes: phase p of `phases`, k rows per phase,
    `count` of them in this one (the last may be shorter)."""
    p: int
    phases: int
    k: int
    count: int

    @classmethod
    def of(cls, layer: Layer, p: int, phases: int) -> Part:
        height = int(layer.output_shape[2])
        return cls(p, phases, rows_per_phase(height, phases), len(part_rows(height, phases, p)))

    @property
    def by_parts(self) -> bool:
        return self.phases > 1


def layer_step(cnn: CNN, name: str, p: int, ph: dict[str, int], copies: Copies,
               edges: dict[str, StoredEdge], dtype: str, out: Path, models: dict[str, StepModel],
               primitive: str | None = None, weights: str = "float32",
               scales: dict | None = None) -> Step:
    """The manifest step of firing p of layer `name` (module doc); `edges` are the
    manifest's placed edges, `models` the step models written so far (added to); `scales`:
    an int8 step's scales by layer (deploy/steps/storage.py)."""
    layer = cnn.layer(name)
    part = Part.of(layer, p, ph.get(name, 1))
    succ = [d for d in cnn.order() if cnn.graph.has_edge(name, d)]
    out_edges = [cp for cp, _ in mf.stored_outputs(       # each stored tensor once
        succ, lambda d: copies(name, d), edges)]
    if layer.op == INPUT:
        if part.by_parts:
            raise InputError(f"layer {name}: an Input by parts cannot be deployed")
        return Step(name, p, None, tuple(Binding("frame", edges=tuple(e)) for e in out_edges))
    _check_primitive(cnn, layer, primitive, part)
    in_ports, bind, fill = _input_binds(cnn, layer, part, copies, edges)
    out_ports, out_bind = _output_binds(cnn, layer, part, out_edges, edges)
    rel = _step_model(cnn, layer, part, fill, in_ports, out_ports, dtype, out, models, primitive,
                      weights, scales)
    return Step(name, p, rel, tuple(bind + out_bind), primitive)


def _check_primitive(cnn: CNN, layer: Layer, primitive: str | None, part: Part) -> None:
    """A primitive other than ONNX Runtime's own is for a whole Conv that it accepts."""
    if primitive is None:
        return
    if layer.op != "Conv" and primitive not in ("ort_nchw", "ort_nchwc"):
        raise InputError(f"plan: layer {layer.name}: primitive {primitive} is for Conv layers, "
                         f"not {layer.op}")
    if layer.op == "Conv" and not part.by_parts:
        from deploy.steps.primitives import ConvSpec, get
        in_shape = cnn.edge_shape(list(dict.fromkeys(layer.inputs))[0], layer.name)
        why = get(primitive).refuses(ConvSpec.of(layer, in_shape))
        if why:
            raise InputError(f"plan: layer {layer.name}: primitive {primitive} refuses it: {why}")


def _input_binds(cnn: CNN, layer: Layer, part: Part, copies: Copies,
                 edges: dict[str, StoredEdge]) -> tuple[list[InPort], list[Binding], bool]:
    """The input ports and their bindings; `fill`: a Pad's part that reads no input row (its
    rows all lie in the vertical padding)."""
    in_ports: list[InPort] = []
    bind: list[Binding] = []
    fill = False
    for i, src in enumerate(dict.fromkeys(layer.inputs)):
        names = copies(src, layer.name)
        e = edges[names[0]]
        port = f"in{i}"
        if part.by_parts and not (e.shape[2] == 1 and e.layout == "nchw"):
            got = _rows_input(cnn, layer, src, part, names, e, port)
            if got is None:
                fill = True
                continue
            in_ports.append(got[0])
            bind += got[1]
            continue
        if e.slots != e.shape[2]:
            raise InputError(f"plan: edge {names[0]} holds {e.slots} rows but {layer.name} "
                             f"reads it whole")
        in_ports.append(InPort(port, tuple(e.shape), e.layout, e.slots, None, dtype=e.dtype))
        bind.append(Binding("edge", port, tuple(names), 0, tuple(in_ports[-1].stored_shape)))
    return in_ports, bind, fill


def _rows_input(cnn: CNN, layer: Layer, src: str, part: Part, names: list[str], e: StoredEdge,
                port: str) -> tuple[InPort, list[Binding]] | None:
    """The port and bindings of an input read by rows from a ring: the slots of the rows its
    window reads, their mask where it meets padding and the counts of a counted window; None
    for a Pad's part that reads only padding rows."""
    name = layer.name
    rows, real = window_rows(cnn, name, src, part.p, part.k, part.count)
    if not any(real) and layer.op == "Pad":   # rows of its vertical padding only: no input
        return None
    if not any(real):
        raise InputError(f"layer {name}: phase {part.p} reads no row of {src}; "
                         f"{layer.op} by parts with padding rows cannot be deployed")
    if e.layout != "hncw":
        raise InputError(f"plan: edge {names[0]} feeds {name} by parts but is not stored by rows")
    masked = _needs_mask(cnn, name, src, part.phases, part.count)
    counted = counted_rows(cnn, name, src, part.p, part.k, part.count)
    in_port = InPort(port, tuple(e.shape), "hncw", e.slots, len(rows), masked,
                     counted is not None, e.dtype)
    bind = [Binding("edge", port, tuple(names), 0, tuple(in_port.stored_shape))]
    # padding rows are masked; they point at a real row of the same window (not slot 0), so
    # a step reads only rows still holding data (explorer/memory/staircase.py)
    anchor = next(r for r, ok in zip(rows, real) if ok) % e.slots
    bind.append(Binding("const", f"{port}_idx",
                        values=tuple(r % e.slots if ok else anchor for r, ok in zip(rows, real))))
    if masked:
        bind.append(Binding("const", f"{port}_mask", values=tuple(int(ok) for ok in real)))
    if counted is not None:
        bind.append(Binding("const", f"{port}_count", values=tuple(counted)))
    return in_port, bind


def _output_binds(cnn: CNN, layer: Layer, part: Part, out_edges: list[list[str]],
                  edges: dict[str, StoredEdge]) -> tuple[list[OutPort], list[Binding]]:
    """The output ports: one per stored tensor the layer writes, and the sink's array."""
    name, shape = layer.name, tuple(int(v) for v in layer.output_shape)
    out_ports: list[OutPort] = []
    bind: list[Binding] = []
    for j, names in enumerate(out_edges):
        e = edges[names[0]]
        port = OutPort(f"out{j}", shape, e.layout, part.by_parts, part.count)
        out_ports.append(port)
        slot = (part.p * part.k) % e.slots if part.by_parts else 0
        if part.by_parts and slot + part.count > e.slots:
            raise InputError(f"plan: edge {names[0]} holds {e.slots} rows, not whole parts "
                             f"of {part.k} rows of {name}")
        bind.append(Binding("edge", port.name, tuple(names), slot, tuple(port.stored_shape)))
    if cnn.graph.out_degree(name) == 0:
        port = OutPort("sink", shape, "hncw" if part.by_parts else "nchw", part.by_parts, part.count)
        out_ports.append(port)
        bind.append(Binding("output", "sink", slot=part.p * part.k if part.by_parts else 0,
                            shape=tuple(port.stored_shape), layer=name))
    return out_ports, bind


def _step_model(cnn: CNN, layer: Layer, part: Part, fill: bool, in_ports: list[InPort],
                out_ports: list[OutPort], dtype: str, out: Path, models: dict[str, StepModel],
                primitive: str | None, weights: str = "float32", scales: dict | None = None) -> str:
    """The step's model file (relative to `out`), written the first time it is asked for:
    one part model per part size serves every phase of that size (a Pad's phases in its
    vertical padding: another; a Pad's part of k > 1 rows meeting it: one per border)."""
    by_parts, k, count = part.by_parts, part.k, part.count
    tag = "whole" if not by_parts else ("part" if k == 1 else f"part{count}")
    if by_parts and fill:
        tag += "_fill"
    pad_rows = _pad_part(cnn, layer, part.p, k, count) if by_parts and layer.op == "Pad" and k > 1 \
        else None
    if pad_rows and any(pad_rows):
        tag += f"_t{pad_rows[0]}_b{pad_rows[1]}"
    rel = f"models/{safe_name(cnn.name)}/{safe_name(layer.name)}.{tag}.onnx"
    if rel in models:
        return rel
    built, part_model = layer, by_parts
    if pad_rows and (fill or any(pad_rows)):   # a Pad part of k > 1 rows meeting its padding
        built, part_model = _pad_layer(layer, pad_rows, count, fill), fill
    model = step_model(built, in_ports, out_ports, dtype, part_model,
                       primitive if layer.op == "Conv" and not by_parts else None,
                       weights_of(weights, cnn), scales)
    (out / rel).parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(out / rel))
    models[rel] = StepModel(cnn.name, layer.name, tag, tuple(p_.name for p_ in in_ports),
                            tuple(p_.name for p_ in out_ports), primitive=primitive)
    return rel


def _needs_mask(cnn: CNN, name: str, src: str, n_phases: int, count: int) -> bool:
    """True when a phase of `count` rows of `name` reads padding rows of `src`: its part
    model (shared by every phase of that size) takes a row mask."""
    height = int(cnn.layer(name).output_shape[2])
    k = rows_per_phase(height, n_phases)
    return any(not all(window_rows(cnn, name, src, q, k, count)[1]) for q in range(n_phases)
               if len(part_rows(height, n_phases, q)) == count)


def _pad_part(cnn: CNN, layer: Layer, p: int, k: int, count: int) -> tuple[int, int]:
    """Output rows of a Pad's part (rows p*k ..) that lie in its top and bottom padding."""
    from csdf.parts import window
    src = list(dict.fromkeys(layer.inputs))[0]
    in_h = int(cnn.edge_shape(src, layer.name)[2])
    top = window(cnn, layer, src).pad_top
    rows = [p * k + i - top for i in range(count)]
    return sum(1 for r in rows if r < 0), sum(1 for r in rows if r >= in_h)


def _pad_layer(layer: Layer, pad_rows: tuple[int, int], count: int, fill: bool) -> Layer:
    """The Pad of one part of k > 1 rows: its real rows padded by the part's padding rows
    (built as a whole Pad of the gathered rows), or `count` rows of the pad value."""
    if fill:
        return with_hyper(layer, fill_rows=count)
    pads = list(PadAttrs.of(layer).pads)
    if len(pads) == 4:
        pads = [pad_rows[0], pads[1], pad_rows[1], pads[3]]
    else:
        pads[2], pads[6] = pad_rows
    return with_hyper(layer, pads=pads)
