"""A partition's schedule cut into region steps: consecutive firings of
layers by parts become one band, computed by one ONNX Runtime call (deploy/steps/regions.py).

The band height is not a gene of its own: it follows from the layers' genes (their phases),
the plan's schedule and its ring sizes. A band grows firing by firing along the schedule and
ends where ONE call could no longer do what the firings do one after another:

- a firing would write arena bytes that an earlier firing of the band read from before the
  band (a ring wrapping onto rows still to be read: inside one call ONNX Runtime may write
  before it reads), or bytes the band wrote already;
- a firing would read, from before the band, bytes the band wrote (another tensor's);
- the layer is not one a band computes (Input, Pad, opaque layers, whole layers, a fused-
  tiled group: their own steps, as before), or the band has MAX_FIRINGS firings;
- the band's intermediates would pass BAND_BYTES (every firing's result, as if none were
  freed, plus the largest window it gathers, in fp32): they are ONNX Runtime's workspace
  while the call runs (several copies: the gather, transposes, NCHWc reorders). Measured
  on YOLOv2-16's least-memory plan (608 columns, `explore run --threads 1`): bands of up to
  1 MiB 38.5 MiB footprint, 309 calls; 512 KiB 35.4 MiB, 496 calls; 256 KiB 33.8 MiB, 1,711
  calls; one call per firing 33.7 MiB, 2,015 calls. MobileNetV2's least-memory bands (112
  columns) stay under 512 KiB (174 calls either way). Before any bound, a YOLOv2-16 front
  point with parts of 38 rows held 104.6 MiB as bands against 65.2 one call per firing.

Tensors are compared by their exact bytes when they are the same stored tensor, and by
their whole region (per row for a whole tensor stored by rows) when they are different ones:
what `explore run`'s manifest check (deploy/checks/manifest_check.py) judges lifetimes by,
so a band never makes two tensors sharing bytes live in one step. The rings are the plan's,
unchanged; a band of one firing is that firing's ordinary step (its layer's part model).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Callable

import numpy as np
import onnx

from csdf.model import CNN, INPUT
from csdf.parts import part_rows, rows_per_phase
from deploy.runtime.manifest import stored_outputs
from deploy.runtime.manifest_records import StepModel, StoredEdge
from deploy.runtime.step_records import Binding, Step
from deploy.steps.parts import WINDOW_OPS, window_rows
from deploy.quant.stored import weights_of
from deploy.steps.regions import Firing, Read, fusable, key, pieces, region_model

MAX_FIRINGS = 256       # a bound on one model's size; real bands end at a ring far sooner
BAND_BYTES = 512 << 10   # a band's intermediates (see the module docstring)


def firing(cnn: CNN, name: str, p: int, ph: dict[str, int],
           copies: Callable[[str, str], list[str]], edges: dict[str, StoredEdge]) -> Firing | None:
    """Phase p of layer `name` as a band firing, or None when it runs as its own step."""
    layer = cnn.layer(name)
    phases = ph.get(name, 1)
    if phases <= 1 or layer.op == INPUT or not fusable(cnn, layer):
        return None
    height = int(layer.output_shape[2])
    k = rows_per_phase(height, phases)
    count = len(part_rows(height, phases, p))
    first = p * k
    reads = []
    for src in dict.fromkeys(layer.inputs):
        cp = tuple(copies(src, name))
        e = edges[cp[0]]
        if e.shape[2] == 1 and e.slots == 1 and e.layout in ("nchw", "hncw"):
            reads.append(Read(src, cp, (0,), whole=True))
            continue
        if e.layout != "hncw":
            return None                   # the step refuses it with its own line
        rows, real = window_rows(cnn, name, src, p, k, count)
        if layer.op in WINDOW_OPS:
            top = next((i for i, ok in enumerate(real) if ok), len(real))
            bottom = next((i for i, ok in enumerate(reversed(real)) if ok), len(real))
            inside = rows[top:len(rows) - bottom]
            if not inside or not all(real[top:len(rows) - bottom]):
                return None
            reads.append(Read(src, cp, tuple(inside), top, bottom))
        else:
            if rows != list(range(first, first + count)):
                return None
            reads.append(Read(src, cp, tuple(rows)))
    succ = [d for d in cnn.order() if cnn.graph.has_edge(name, d)]
    writes = stored_outputs(succ, lambda d: copies(name, d), edges)
    for cp, _ in writes:
        e = edges[cp[0]]
        if e.layout != "hncw" or first % e.slots + count > e.slots:
            return None
    return Firing(name, p, first, count, tuple(reads), tuple(tuple(cp) for cp, _ in writes),
                  cnn.graph.out_degree(name) == 0, tuple(tuple(rd) for _, rd in writes))


def _rows_read(cnn: CNN, reader: str, src: str, q: int, ph: dict[str, int]) -> range | list[int]:
    """Rows of `src` that phase q of `reader` reads (all of them when it runs whole)."""
    phases = ph.get(reader, 1)
    if phases <= 1:
        return range(int(cnn.edge_shape(src, reader)[2]))
    height = int(cnn.layer(reader).output_shape[2])
    k = rows_per_phase(height, phases)
    rows, real = window_rows(cnn, reader, src, q, k, len(part_rows(height, phases, q)))
    return [r for r, ok in zip(rows, real) if ok]


def prune(cnn: CNN, items: list, ph: dict[str, int], members: set[str]) -> list:
    """Bands whose firings write only what a later step reads: a row of a tensor that only
    firings of its own band read stays inside the band's call (no ring write, no transpose).
    `members`: the layers of this partition (a reader elsewhere reads every row)."""
    read_by: dict[tuple[str, str, int], set[int]] = {}     # (src, reader, row) -> steps
    for i, item in enumerate(items):
        pairs = [(f.layer, f.phase) for f in item] if isinstance(item, list) else [item]
        for layer, q in pairs:
            for src in dict.fromkeys(cnn.layer(layer).inputs):
                for r in _rows_read(cnn, layer, src, q, ph):
                    read_by.setdefault((src, layer, r), set()).add(i)
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, list):
            out.append(item)
            continue
        band = []
        for f in item:
            keep = [(w, rd) for w, rd in zip(f.writes, f.readers)
                    if any(d not in members for d in rd)
                    or any(read_by.get((f.layer, d, r), set()) - {i} for d in rd
                           for r in range(f.first, f.first + f.count))]
            band.append(replace(f, writes=tuple(w for w, _ in keep),
                                readers=tuple(rd for _, rd in keep)))
        out.append(_with_output(item, band))
    return out


def _with_output(full: list[Firing], band: list[Firing]) -> list[Firing]:
    """`band` (pruned) with the writes of its last firing that wrote anything when no firing
    of it writes a row or a CNN output: a band whose rows no later step reads (a stride-2
    1x1 conv after it skips its odd rows: ResNet-50's layer3_0 downsample reads rows 0, 2, ..
    of layer2_3_add) would be a model without outputs, which ONNX Runtime refuses to run. The
    band was cut with every write in it, so writing those ring slots clashes with nothing."""
    if any(f.writes or f.sink for f in band):
        return band
    for i in range(len(full) - 1, -1, -1):
        if full[i].writes:
            return band[:i] + [full[i]] + band[i + 1:]
    return band


def _spans(e: StoredEdge, rows: list[int]) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(exact bytes, region bytes) of these slots of stored edge `e`."""
    rb = e.row_bytes
    exact = [(e.offset + s * rb, e.offset + (s + 1) * rb) for s in rows]
    if e.layout == "hncw" and e.slots == e.shape[2]:
        return exact, exact
    return exact, [(e.offset, e.offset + e.bytes)]


class _Band:
    """The accesses of a growing band: (tensor, exact spans, region spans) read from before
    the band and written by it, and the bytes of its intermediates."""

    def __init__(self, cnn: CNN, rep: dict[str, str], edges: dict[str, StoredEdge]):
        self.cnn, self.rep, self.edges = cnn, rep, edges
        self.results = self.window = 0
        self.firings: list[Firing] = []
        self.made: dict[str, list[tuple[int, int]]] = {}
        self.reads: list[tuple[str, list, list]] = []
        self.writes: list[tuple[str, list, list]] = []

    def _access(self, copies, slots_of) -> list[tuple[str, list, list]]:
        out = []
        for c in dict.fromkeys(copies):
            e = self.edges[c]
            exact, region = _spans(e, slots_of(e))
            out.append((self.rep.get(c, c), exact, region))
        return out

    def accesses(self, f: Firing):
        reads, writes = [], []
        for r in f.reads:
            if r.whole:
                reads += self._access(r.copies, lambda e: range(e.slots))
                continue
            old = [row for row in r.rows
                   if not any(a <= row < a + n for a, n in self.made.get(r.src, ()))]
            if old:
                reads += self._access(r.copies, lambda e, old=old: sorted({row % e.slots for row in old}))
        for cp in f.writes:
            writes += self._access(cp, lambda e: range(f.first % e.slots, f.first % e.slots + f.count))
        return reads, writes

    def _bytes(self, f: Firing) -> tuple[int, int]:
        """(result, window) bytes of firing f in fp32."""
        n, c, _, w = self.cnn.layer(f.layer).output_shape
        return 4 * f.count * n * c * w, _window_bytes(f.reads, self.edges)

    def admits(self, f: Firing) -> bool:
        result, window = self._bytes(f)
        if self.results + result + max(self.window, window) > BAND_BYTES:
            return False
        reads, writes = self.accesses(f)
        return not (_clash(writes, self.reads) or _clash(writes, self.writes)
                    or _clash(reads, self.writes) or _clash(writes, reads))

    def add(self, f: Firing) -> None:
        reads, writes = self.accesses(f)
        self.reads += reads
        self.writes += writes
        result, window = self._bytes(f)
        self.results += result
        self.window = max(self.window, window)
        self.firings.append(f)
        self.made.setdefault(f.layer, []).append((f.first, f.count))


def _window_bytes(reads, edges: dict[str, StoredEdge]) -> int:
    """The rows a firing's reads gather, in fp32 bytes."""
    return 4 * sum(len(r.rows) * int(np.prod(edges[r.copies[0]].shape)) //
                   edges[r.copies[0]].shape[2] for r in reads)


def _clash(a: list, b: list) -> bool:
    for ta, ea, ra in a:
        for tb, eb, rb in b:
            if _overlap(ea, eb) if ta == tb else _overlap(ra, rb):
                return True
    return False


def _overlap(xs: list[tuple[int, int]], ys: list[tuple[int, int]]) -> bool:
    return any(x0 < y1 and y0 < x1 for x0, x1 in xs for y0, y1 in ys)


def bands(cnn: CNN, firings: list[str], ph: dict[str, int],
          copies: Callable[[str, str], list[str]], edges: dict[str, StoredEdge],
          rep: dict[str, str], skip: set[str] = frozenset()) -> list[tuple[str, int] | list[Firing]]:
    """The partition's firings (layer names in schedule order) as its steps: (layer, phase)
    for a step of its own, a list of two or more Firings for a band. `rep`: stored tensor of
    each edge (deploy.runtime.manifest.stored_as); `skip`: layers never banded (tiled groups)."""
    out: list = []
    seen: dict[str, int] = {}
    band = _Band(cnn, rep, edges)

    def close() -> None:
        nonlocal band
        if len(band.firings) == 1:
            out.append((band.firings[0].layer, band.firings[0].phase))
        elif band.firings:
            out.append(band.firings)
        band = _Band(cnn, rep, edges)

    for name in firings:
        p = seen.get(name, 0)
        seen[name] = p + 1
        f = firing(cnn, name, p, ph, copies, edges) if name not in skip and name in cnn.graph else None
        if f is None:
            close()
            out.append((name, p))
            continue
        if len(band.firings) >= MAX_FIRINGS or not band.admits(f):
            close()
        band.add(f)
    close()
    return out


def shared(cnn: CNN, items: list, edges: dict[str, StoredEdge]) -> list:
    """`items` (bands' output) with each band whose model no other band shares run as its
    firings' own steps. Why: a band model's session holds ONNX Runtime's state for all its
    nodes (~20 KiB a model, ~2.6 KiB a node), and where layers' phase counts differ the
    bands' shapes rarely repeat: MobileNetV2's least-memory plan (phases 4 to 112) made 41
    bands of 19 models, 12 of them run once, holding 2.8 MiB more than its one call per
    firing (26.3 MiB footprint against 23.2). A firing's own step shares its layer's part
    model with every phase."""
    def shape(band: list[Firing]) -> tuple:
        merged = merge(cnn, band, edges)
        return key(merged, pieces(merged, edges)[0])
    shapes = [shape(item) if isinstance(item, list) else None for item in items]
    count = Counter(s for s in shapes if s is not None)
    out: list = []
    for item, s in zip(items, shapes):
        if s is not None and count[s] == 1:
            out.extend((f.layer, f.phase) for f in item)
        else:
            out.append(item)
    return out


def merge(cnn: CNN, band: list[Firing], edges: dict[str, StoredEdge]) -> list[Firing]:
    """Adjacent firings of one layer in a band as one firing over all their rows: one Conv
    of many rows instead of many of a few (a layer whose producer is whole fires all its
    phases in a row: MobileNetV2's front plans had bands of 13 one-row convs of one layer).
    The same result: the windows of consecutive output rows are consecutive input rows, so
    their union is the window of the merged rows, with the first's top padding and the
    last's bottom padding. Not merged: windows with a gap between them (a stride longer
    than the kernel), a write that would wrap round its ring, a window over BAND_BYTES / 4."""
    out: list[Firing] = []
    for f in band:
        joined = _joined(cnn, out[-1], f, edges) if out else None
        if joined is None:
            out.append(f)
        else:
            out[-1] = joined
    return out


def _joined(cnn: CNN, a: Firing, b: Firing, edges: dict[str, StoredEdge]) -> Firing | None:
    if a.layer != b.layer or b.phase != a.phase + len(a.phases) or b.first != a.first + a.count:
        return None
    reads = []
    for ra, rb in zip(a.reads, b.reads):
        if ra.src != rb.src or ra.whole != rb.whole:
            return None
        if ra.whole:
            reads.append(ra)
            continue
        rows = sorted(set(ra.rows) | set(rb.rows))
        if ra.pad_bottom or rb.pad_top or rows != list(range(rows[0], rows[-1] + 1)) \
                or rows[0] != ra.rows[0] or rows[-1] != rb.rows[-1]:
            return None
        reads.append(Read(ra.src, ra.copies, tuple(rows), ra.pad_top, rb.pad_bottom))
    count = a.count + b.count
    # what either writes (prune may have dropped one firing's write: writing those rows too
    # is what the band was cut for before pruning, so it clashes with nothing)
    extra = [(w, rd) for w, rd in zip(b.writes, b.readers) if w not in a.writes]
    writes = a.writes + tuple(w for w, _ in extra)
    for cp in writes:
        e = edges[cp[0]]
        if a.first % e.slots + count > e.slots:
            return None
    if _window_bytes(reads, edges) > BAND_BYTES // 4:
        return None
    return replace(a, count=count, reads=tuple(reads), writes=writes,
                   readers=a.readers + tuple(rd for _, rd in extra),
                   parts=tuple(c for _, c in a.phases) + tuple(c for _, c in b.phases))


def band_step(cnn: CNN, band: list[Firing], edges: dict[str, StoredEdge], dtype: str, out: Path,
              models: dict[str, StepModel], keys: dict, safe: Callable[[str], str],
              weights: str = "float32", scales: dict | None = None, layers=None) -> Step:
    """The manifest step of a band: its model (one per distinct band shape, `keys`) and its
    bindings (rings gathered, slot indices, ring slots and CNN output rows written). Its
    `region` lists every plan firing it computes, (layer, phase), in the plan's order;
    `weights`: the parameters' storage type (deploy/quant/stored.py WEIGHT_TYPES); `scales`:
    an int8 band's scales by layer; `layers`: each layer's types of a plan with a precision
    per layer (deploy/build/layer_storage.py)."""
    band = merge(cnn, band, edges)
    split, ports = pieces(band, edges)
    shape = (cnn.name, key(band, split))
    rel = keys.get(shape)
    if rel is None:
        rel = f"models/{safe(cnn.name)}/{safe(band[0].layer)}.region{len(keys)}.onnx"
        keys[shape] = rel
        own = None if layers is None else (
            layers.tensors[cnn.name],
            {l: weights_of(k, cnn) for l, k in layers.weights[cnn.name].items()})
        model = region_model(cnn, band, split, edges, dtype, weights_of(weights, cnn), scales, own)
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        onnx.save(model, str(out / rel))
        models[rel] = StepModel(cnn.name, band[0].layer, "region",
                                tuple(i.name for i in model.graph.input),
                                tuple(o.name for o in model.graph.output),
                                tuple(dict.fromkeys(f.layer for f in band)))
    binds: list[Binding] = []
    for port in ports:
        binds.append(Binding("edge", port.port, port.copies, 0, port.shape))
        if port.slots is not None:
            binds.append(Binding("const", f"{port.port}_idx", values=port.slots))
    n_out = n_sink = 0
    for f in band:
        n, c, _, w = (int(v) for v in cnn.layer(f.layer).output_shape)
        for cp in f.writes:
            e = edges[cp[0]]
            binds.append(Binding("edge", f"out{n_out}", tuple(cp), f.first % e.slots,
                                 (f.count, n, c, w)))
            n_out += 1
        if f.sink:
            binds.append(Binding("output", f"sink{n_sink}", slot=f.first, shape=(f.count, n, c, w),
                                 layer=f.layer))
            n_sink += 1
    # each firing's work (weights x output pixels, the multiply-adds of a conv, plus its
    # outputs, what an elementwise layer costs): how a profile shares the band's one
    # measured time among its layers (deploy/profile/ladder.py)
    work = []
    for f in band:
        n, c, _, w = (int(v) for v in cnn.layer(f.layer).output_shape)
        work += [(cnn.layer(f.layer).param_count + c) * n * rows * w for _, rows in f.phases]
    return Step(band[0].layer, band[0].phase, rel, tuple(binds),
                region=tuple((f.layer, p) for f in band for p, _ in f.phases), work=tuple(work))
