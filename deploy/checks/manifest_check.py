"""Is a deployment's manifest.json consistent with itself and with its step models? Checked
by `explore run` before anything is allocated or run, so a hand-edited or damaged deployment
is refused with one line (naming the file and the key, edge, step or model) instead of
reading or writing outside a buffer's region, or running with wrong outputs.

- layout: every buffer inside the arena; every edge inside its
  buffer (offset >= 0, slots * row bytes = its bytes, one row = N*C*W elements); every view
  a step binds inside its edge's region (slot within the ring); slot index vectors within
  the ring; edges that share bytes never live at the same time (lifetimes from the steps,
  judged by explorer.memory.lifetimes.conflict, the explorer's own rule; a whole edge stored by
  rows row by row, each row from the first to the last step touching it);
- paths: every model and reference file relative and inside the deployment directory (a
  deployment reads only its own directory) and present;
- digests: every file `explore deploy` recorded (key "files") has the SHA-256 it recorded,
  and every step model and reference is among them (deploy/checks/files.py `verify`);
- models: each step model parses, and its inputs and outputs (names, element types, shapes)
  are exactly the step's bindings, with at least one output: a missing, truncated or
  swapped model is refused;
- precision and quantization: data_bytes, precision and dtype agree, and an int8
  deployment's scale and zero point of every stored tensor are the ones its step models
  hold (deploy/checks/quant_entries.py);
- memory: the arena and output arrays fit this machine (deploy/arena.check_fits).
"""
from __future__ import annotations

from math import prod
from pathlib import Path
from typing import Any

import onnx
from onnx import TensorProto

from deploy.checks import files, layer_entries, quant_entries
from deploy.runtime import arena
from deploy.runtime.manifest_records import DTYPE_BYTES, Manifest, Step
from sdf3.errors import InputError

ELEM = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16, "uint8": TensorProto.UINT8,
        "int8": TensorProto.INT8}


class _Fail:
    def __init__(self, where: str):
        self.where = where

    def __call__(self, msg: str) -> None:
        raise InputError(f"{self.where}: {msg}")


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _shape(v: Any, n: int = 4) -> bool:
    return isinstance(v, list) and len(v) == n and all(_int(x) and x >= 1 for x in v)


def check(manifest: Manifest, deploy_dir: str | Path) -> None:
    """Raise InputError for the first inconsistency (see the module docstring). The types
    of its keys were checked as it was read (deploy/runtime/manifest_records.py)."""
    root = Path(deploy_dir)
    fail = _Fail(str(root / "manifest.json"))
    total = manifest.arena_bytes
    _buffers(manifest, total, fail)
    layer_entries.check(manifest, fail)
    _edges(manifest, fail)
    _cnns(manifest, root, fail)
    spans = _steps(manifest, root, fail)
    files.verify(manifest, root)
    _live_overlaps(manifest, spans, fail)
    outputs = sum(2 * prod(o.shape) * DTYPE_BYTES[manifest.dtype_of(n, o.layer)]
                  for n, c in manifest.cnns.items() for o in c.outputs)
    arena.check_fits(total + outputs, fail.where, "the arena and output arrays")
    _models(manifest, root, fail)


def _buffers(manifest: Manifest, total: int, fail) -> None:
    for i, b in enumerate(manifest.buffers):
        if b.offset < 0 or b.bytes < 0:
            fail(f"buffers[{i}]: negative offset or size ({b.offset}, {b.bytes})")
        if b.offset + b.bytes > total:
            fail(f"buffers[{i}]: ends at byte {b.offset + b.bytes}, past the arena's "
                 f"{total} bytes")
    # buffers may share bytes (offset planners place buffers of disjoint lifetimes over
    # each other): what must never share bytes is two live edges (_live_overlaps)


def _edges(manifest: Manifest, fail) -> None:
    bufs = manifest.buffers
    for name, e in manifest.edges.items():
        where = f"edges.{name}"
        n, c, h, w = e.shape
        size = DTYPE_BYTES[manifest.edge_dtype(e)]
        if not _shape(list(e.shape)):
            fail(f"{where}: expected a 4-D 'shape' and layout nchw, hncw or tile")
        if not 0 <= e.buffer < len(bufs):
            fail(f"{where}: buffer {e.buffer} is out of range (0..{len(bufs) - 1})")
        if e.layout == "tile":     # a tiled group's inner tensor: one tile region at a time
            if not 0 <= e.bytes <= n * c * h * w * size:
                fail(f"{where}: {e.bytes} bytes for a tile of a {list(e.shape)} tensor")
        elif e.row_bytes != n * c * w * size or e.bytes != e.slots * e.row_bytes:
            fail(f"{where}: {e.bytes} bytes in rows of {e.row_bytes} do not match shape "
                 f"{list(e.shape)} with {e.slots} slots")
        if e.layout != "tile" and (not 1 <= e.slots <= h or (e.layout == "nchw" and e.slots != h)):
            fail(f"{where}: {e.slots} slots for a tensor of {h} rows stored {e.layout}")
        b = bufs[e.buffer]
        if e.offset < b.offset or e.offset + e.bytes > b.offset + b.bytes:
            fail(f"{where}: bytes {e.offset}..{e.offset + e.bytes} lie outside its "
                 f"buffer {e.buffer} ({b.offset}..{b.offset + b.bytes})")


def _inside(root: Path, rel: Any, what: str, fail) -> Path:
    """`rel` as a file inside the deployment directory (never an absolute or escaping path)."""
    if not isinstance(rel, str) or not rel or Path(rel).is_absolute():
        fail(f"{what}: {rel!r} is not a path relative to the deployment (a deployment reads "
             f"only its own directory)")
    path = root / rel
    if not files.inside(root, path):
        fail(f"{what}: {rel!r} leads outside the deployment directory")
    if not path.is_file():
        fail(f"{what}: {rel} is missing")
    return path


def _cnns(manifest: Manifest, root: Path, fail) -> None:
    for name, info in manifest.cnns.items():
        if not all(_shape(list(i.shape)) for i in info.inputs):
            fail(f"cnns.{name}.inputs: expected a list of 4-D shapes")
        if not all(_shape(list(o.shape)) for o in info.outputs):
            fail(f"cnns.{name}.outputs: expected 4-D shapes with layout nchw or hncw")
        if info.reference is not None:
            _inside(root, info.reference, f"cnns.{name}.reference", fail)


# A step's place in a partition's time is its index times PLACES, plus, in a chain step
# (deploy/build/chains.py), its member's index: members run one after another inside the call
PLACES = 1024


def _member(step: Step, b) -> int:
    """The member of a chain step that binding `b` belongs to (0 outside chain steps)."""
    if b.layer is None or not step.region:
        return 0
    return next((i for i, (layer, _) in enumerate(step.region) if layer == b.layer), 0)


def _views(manifest: Manifest, step: Step, parity: int, fail, where: str
           ) -> list[tuple[str, int, int, str, int]]:
    """(edge, first byte, end byte, role, member) of every arena view a step binds, and of
    every edge a chain step's member reads inside the call."""
    edges, size = manifest.edges, DTYPE_BYTES[manifest.dtype]
    out = []

    def edge_of(b):
        if not all(n in edges for n in b.edges):
            fail(f"{where}: binding {b.name or b.kind!r} names unknown edges {list(b.edges)!r}")
        return b.edges[parity], edges[b.edges[parity]]

    for b in step.bind:
        if b.kind == "frame":
            name, e = edge_of(b)
            if not e.whole:
                fail(f"{where}: the frame is copied whole into {name}, which holds {e.slots} rows")
            out.append((name, e.offset, e.offset + e.bytes, "write", 0))
        elif b.kind == "chained":
            name, e = edge_of(b)
            out.append((name, e.offset, e.offset + e.bytes, "read", _member(step, b)))
        elif b.kind == "edge":
            name, e = edge_of(b)
            if not 0 <= b.slot < e.slots or not _shape(list(b.shape)):
                fail(f"{where}: binding {b.name!r}: slot {b.slot!r} outside 0..{e.slots - 1} "
                     f"of {name}, or no 4-D shape")
            start = e.offset + b.slot * e.row_bytes
            end = start + prod(b.shape) * DTYPE_BYTES[manifest.edge_dtype(e)]
            if end > e.offset + e.bytes:
                fail(f"{where}: binding {b.name!r} reads or writes bytes {start}..{end}, past "
                     f"the end of {name} ({e.offset + e.bytes})")
            out.append((name, start, end, "write" if b.writes else "read", _member(step, b)))
        elif b.kind == "tile":
            name, e = edge_of(b)
            out.append((name, e.offset, e.offset + e.bytes, "tile", 0))
    for t in step.group.tiles if step.group else ():
        for m in t.mids:
            name = m.edges[parity]
            if name not in edges or not _shape(list(m.shape)):
                fail(f"{where}: a tile writes unknown edge {name!r}")
            e = edges[name]
            if prod(m.shape) * size > e.bytes:
                fail(f"{where}: a tile of {name} needs {prod(m.shape) * size} bytes, the edge "
                     f"has {e.bytes}")
    return out


def _steps(manifest: Manifest, root: Path, fail) -> dict[str, dict[str, list[int]]]:
    """Check every step's bindings; returns, per edge, per partition, the steps touching it
    and the first step writing it (for the lifetimes)."""
    edges, cnns = manifest.edges, manifest.cnns
    names = set()
    touched: dict[str, dict[str, list[int]]] = {}
    for part in manifest.partitions:
        pname = part.name
        if part.cnn not in cnns:
            fail(f"partitions.{pname}: unknown CNN {part.cnn!r} or no steps")
        names.add(pname)
        outs = {o.layer: o for o in cnns[part.cnn].outputs}
        for t, step in enumerate(part.steps):
            where = f"partitions.{pname}.steps[{t}] ({step.layer})"
            if step.model is not None:
                _inside(root, step.model, where, fail)
            for tile in step.group.tiles if step.group else ():
                _inside(root, tile.model, where, fail)
            for parity in (0, 1):
                for name, _, _, role, member in _views(manifest, step, parity, fail, where):
                    at = t * PLACES + member
                    rec = touched.setdefault(name, {}).setdefault(pname, [at, at, -1])
                    rec[0], rec[1] = min(rec[0], at), max(rec[1], at)
                    if role in ("write", "tile") and (rec[2] < 0 or at < rec[2]):
                        rec[2] = at
            ports: dict = {}
            for b in step.bind:
                ports.setdefault(b.name, b)
            for b in step.bind:
                if b.kind == "output":
                    o = outs.get(b.layer)
                    h = o.shape[2] if o else 0
                    if o is None or not 0 <= b.slot < max(h, 1) or not _shape(list(b.shape)):
                        fail(f"{where}: output binding for {b.layer!r} outside the CNN's outputs")
                if b.kind == "const" and str(b.name).endswith("_idx"):
                    src = ports.get(b.name[:-4])
                    slots = edges[src.edges[0]].slots if src is not None and src.edges else 0
                    if not all(0 <= v < slots for v in b.values):
                        fail(f"{where}: slot indices {list(b.values)!r} outside the ring of {slots} slots")
    for group in manifest.pipelines:
        for pname in group:
            if pname not in names:
                fail(f"pipelines: unknown partition {pname!r}")
    return touched


def _live_overlaps(manifest, touched, fail) -> None:
    """Edges whose bytes overlap must never be live together (explorer.memory.lifetimes.conflict)."""
    from explorer.memory.lifetimes import EdgeUse, conflict, group_index

    edges = manifest.edges
    touched, rep = _fold(edges, touched)
    parts = manifest.partitions
    length = {p.name: len(p.steps) * PLACES for p in parts}
    order = [p.name for p in parts]
    cnn_of = {p.name: p.cnn for p in parts}
    uses = {}
    for name, by_part in touched.items():
        where = sorted(by_part, key=order.index)
        if len(where) == 1:
            p = where[0]
            spans = ((p, by_part[p][0], by_part[p][1]),)
        else:
            writer = next((p for p in where if by_part[p][2] >= 0), where[0])
            lo, hi = order.index(where[0]), order.index(where[-1])
            spans = []
            for p in order[lo:hi + 1]:
                if cnn_of[p] != cnn_of[writer]:
                    continue
                if p == writer:
                    spans.append((p, by_part[p][2], length[p] - 1))
                elif p in by_part:
                    spans.append((p, 0, by_part[p][1]))
                else:
                    spans.append((p, 0, length[p] - 1))
            spans = tuple(spans)
        uses[name] = EdgeUse(name, "", 0, spans)
    group = group_index([list(g) for g in manifest.pipelines])
    regions = []
    rows = _row_steps(manifest, rep)
    for n, e in edges.items():
        if n not in uses or rep[n] != n:
            continue
        by_row = rows.get(n)
        if by_row is None or len(uses[n].spans) != 1:
            regions.append((e.offset, e.offset + e.bytes, n, uses[n]))
            continue
        part = uses[n].spans[0][0]
        for r, (t0, t1) in sorted(by_row.items()):     # a row holds data only while touched
            start = e.offset + r * e.row_bytes
            regions.append((start, start + e.row_bytes, n, EdgeUse(n, "", 0, ((part, t0, t1),))))
    regions.sort(key=lambda x: (x[0], x[1], x[2]))
    for i, (a0, a1, a, ua) in enumerate(regions):
        for b0, b1, b, ub in regions[i + 1:]:
            if b0 >= a1:
                break
            if a != b and b1 > b0 and a1 > a0 and conflict(ua, ub, group):
                fail(f"edges {a} and {b} share arena bytes while both are live")


def _fold(edges: dict, touched: dict) -> tuple[dict, dict[str, str]]:
    """Edges of one tensor in one buffer (explorer/memory/tensors.py: the producer writes
    it once, every reader binds the same bytes) are one stored tensor: `touched` merged
    under the first such edge's name, and edge -> that name."""
    from deploy.runtime.manifest import stored_as
    rep = stored_as(edges)
    out: dict[str, dict[str, list[int]]] = {}
    for n, by_part in touched.items():
        mine = out.setdefault(rep.get(n, n), {})
        for p, (t0, t1, w) in by_part.items():
            got = mine.get(p)
            if got is None:
                mine[p] = [t0, t1, w]
            else:
                got[0], got[1] = min(got[0], t0), max(got[1], t1)
                got[2] = w if got[2] < 0 else (got[2] if w < 0 else min(got[2], w))
    return out, rep


def _row_steps(manifest: Manifest, rep: dict[str, str] | None = None
               ) -> dict[str, dict[int, tuple[int, int]]]:
    """Whole edges stored by rows (layout hncw, a slot per row) touched in one partition:
    per row, the first and last step that writes or reads it (the slot indices a step
    gathers, the slots a part writes, every row for the frame or a whole read). Offset
    plans let other buffers use a row's bytes outside that run (explorer/memory/staircase.py)."""
    edges = manifest.edges
    out: dict[str, dict[int, list[int]]] = {}
    where: dict[str, set[str]] = {}
    for part, t, step in manifest.steps():
        consts = {b.name: b.values for b in step.bind if b.kind == "const"}
        for parity in (0, 1):
            for b in step.bind:
                if b.kind not in ("frame", "edge"):
                    continue
                name = b.edges[parity]
                e = edges[name]
                name = (rep or {}).get(name, name)
                if e.layout != "hncw" or not e.whole:
                    continue
                where.setdefault(name, set()).add(part.name)
                if b.kind == "frame":
                    touched = range(e.slots)
                elif f"{b.name}_idx" in consts and not b.writes:
                    touched = consts[f"{b.name}_idx"]
                else:
                    touched = range(b.slot, b.slot + b.shape[0])
                rows = out.setdefault(name, {})
                at = t * PLACES + _member(step, b)
                for r in touched:
                    got = rows.setdefault(int(r), [at, at])
                    got[0], got[1] = min(got[0], at), max(got[1], at)
    return {n: {r: (a, b) for r, (a, b) in rows.items()} for n, rows in out.items()
            if len(where[n]) == 1}


def _signature(step: Step, manifest: Manifest, cnn: str) -> dict[str, tuple[int, list[int]]]:
    """What a step of CNN `cnn` binds: port name -> (element type, shape)."""
    sig = {}
    for b in step.bind:
        if b.kind == "edge":
            e = manifest.edges.get(b.edges[0])
            own = manifest.edge_dtype(e) if e is not None else manifest.dtype
            sig[b.name] = (ELEM[own], list(b.shape))
        elif b.kind == "output":
            sig[b.name] = (ELEM[manifest.dtype_of(cnn, b.layer)], list(b.shape))
        elif b.kind == "const":
            sig[b.name] = (TensorProto.INT32, [len(b.values)])
    return sig


def _models(manifest: Manifest, root: Path, fail) -> None:
    """Every step model parses and declares exactly the tensors its steps bind; the
    quantization scales the models hold agree with the manifest's (deploy/checks/quant_entries.py)."""
    seen: dict[str, dict] = {}
    scales: dict[str, dict] = {}
    for part, _, step in manifest.steps():
        for tile in step.group.tiles if step.group else ():
            if tile.model not in scales:
                scales[tile.model] = _declared(root / tile.model, tile.model, fail)[1]
        rel = step.model
        if rel is None:
            continue
        sig = _signature(step, manifest, part.cnn)
        if rel not in seen:
            seen[rel], scales[rel] = _declared(root / rel, rel, fail)
        declared = seen[rel]
        if declared != sig:
            extra = sorted(set(declared) ^ set(sig))
            name = extra[0] if extra else next(k for k in sig if declared[k] != sig[k])
            fail(f"model {rel}: its tensor {name!r} is "
                 f"{_say(declared.get(name))}, the step of {step.layer} binds "
                 f"{_say(sig.get(name))}")
    quant_entries.check(manifest, scales, fail)


def _say(entry) -> str:
    if entry is None:
        return "absent"
    return f"{TensorProto.DataType.Name(entry[0]).lower()} {entry[1]}"


def _declared(path: Path, rel: str, fail) -> tuple[dict[str, tuple[int, list[int]]], dict]:
    """(port name -> (element type, shape), the quantization initializers it holds)."""
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as err:   # noqa: BLE001 - protobuf raises several types for damaged files
        fail(f"model {rel}: not a readable ONNX model ({type(err).__name__})")
    inits = {t.name for t in model.graph.initializer}
    out = {}
    for v in list(model.graph.input) + list(model.graph.output):
        if v.name in inits:
            continue
        t = v.type.tensor_type
        out[v.name] = (t.elem_type, [d.dim_value if d.HasField("dim_value") else -1 for d in t.shape.dim])
    if not model.graph.node:
        fail(f"model {rel}: not a readable ONNX model (no graph nodes)")
    if not model.graph.output:
        fail(f"model {rel}: it has no output, so ONNX Runtime cannot run its steps")
    return out, quant_entries.held(model.graph)
