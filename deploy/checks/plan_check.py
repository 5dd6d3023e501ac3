"""Is a plan.json read back by `explore deploy` one the explorer could have written? A plan
is a file a user may edit or damage; a wrong one must be refused with one line before any
model is written, never deployed into a run that reads rows before they exist or overwrites
rows still needed (docs/deploy.md, "Plans read back").

The file's shape (keys, edge names) is checked as explorer/plan/plan_file.py reads it into a
Plan. Checked here, in order: the values (types, known CNNs, layers, partitions and edges,
buffer indices in range), the phases (csdf.parts.check_phases), the partitions (every layer in
exactly one, producers' partitions before their consumers'), every partition's firings
(each layer as many times as its phases say, nothing outside the partition), the
schedule's precedence and ring sizes replayed row by row (no row read before its producer
wrote it, none overwritten in its ring slot before its last read; a crossing edge holds the
whole tensor), and the buffers as the explorer checks them (explorer.memory.validity.check_plan
over the lifetimes of the plan's own firings: every edge in one buffer that holds it, no
two live edges in one buffer).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

from csdf.model import CNN, EdgeId
from csdf.parts import check_phases, part_rows
from csdf.to_csdf import edge_windows, internal_edges
from deploy.runtime import arena
from explorer.memory.placement import planner
from explorer.plan.model import Plan, PlanEdge, PlanPartition
from sdf3.errors import InputError


def check(plan: Plan, cnns: dict[str, CNN], where: str = "plan.json") -> None:
    """Raise InputError naming `where` and the key, layer or edge of the first problem
    (the file's shape was checked as it was read: explorer/plan/plan_file.py)."""
    def fail(msg: str) -> None:
        raise InputError(f"{where}: {msg}")

    phases = _phases(plan, cnns, fail)
    parts = _partitions(plan, cnns, fail)
    firings = _firings(plan, parts, phases, fail)
    edges = _edges(plan, cnns, fail)
    tilings = _tilings(plan, cnns, fail)
    inner = {EdgeId(c, a, b) for c, groups in tilings.items() for g in groups
             for a, b in g.internal_edges()}
    _rings(cnns, parts, phases, firings, edges, inner, fail)
    _buffers(plan, cnns, parts, firings, edges, tilings, inner, fail)
    param = plan.param_bytes if _int(plan.param_bytes) else 0
    bufs = plan.buffers
    need = max(b.offset + b.bytes for b in bufs) if plan.placed() else sum(b.bytes for b in bufs)
    arena.check_fits(need + param, where, "the arena and the weights")


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _phases(plan, cnns, fail) -> dict[str, dict[str, int]]:
    raw = plan.phases
    if not isinstance(raw, dict):
        fail("key 'phases' must map each CNN to {layer: phases}")
    out: dict[str, dict[str, int]] = {name: {} for name in cnns}
    for cnn_name, layers in raw.items():
        if cnn_name not in cnns:
            fail(f"phases: unknown CNN {cnn_name!r} (the app has {', '.join(sorted(cnns))})")
        if not isinstance(layers, dict):
            fail(f"phases.{cnn_name}: expected {{layer: phases}}")
        cnn = cnns[cnn_name]
        for layer, n in layers.items():
            if layer not in cnn.graph:
                fail(f"phases.{cnn_name}: unknown layer {layer!r}")
            if not _int(n) or n < 1:
                fail(f"phases.{cnn_name}.{layer}: expected a positive integer, got {n!r}")
            try:
                check_phases(cnn, layer, n)
            except InputError as err:
                fail(f"phases.{cnn_name}: {err}")
            out[cnn_name][layer] = n
    return out


def _partitions(plan: Plan, cnns, fail) -> tuple[PlanPartition, ...]:
    raw = plan.partitions
    owner: dict[tuple[str, str], str] = {}
    names: set[str] = set()
    for part in raw:
        name, cnn_name = part.name, part.cnn
        if name in names:
            fail(f"partitions: {name!r} appears twice")
        names.add(name)
        if cnn_name not in cnns:
            fail(f"partitions.{name}: unknown CNN {cnn_name!r}")
        for layer in part.layers:
            if not isinstance(layer, str) or layer not in cnns[cnn_name].graph:
                fail(f"partitions.{name}: unknown layer {layer!r} of CNN {cnn_name}")
            if (cnn_name, layer) in owner:
                fail(f"partitions: layer {cnn_name}.{layer} is in {owner[(cnn_name, layer)]} and {name}")
            owner[(cnn_name, layer)] = name
    for cnn_name, cnn in cnns.items():
        for layer in cnn.order():
            if (cnn_name, layer) not in owner:
                fail(f"partitions: layer {cnn_name}.{layer} is in no partition")
    index = {p.name: i for i, p in enumerate(raw)}
    for cnn_name, cnn in cnns.items():
        for src, dst in cnn.edges():
            a, b = owner[(cnn_name, src)], owner[(cnn_name, dst)]
            if index[a] > index[b]:
                fail(f"partitions: {b} reads edge {EdgeId(cnn_name, src, dst)} from {a}, "
                     f"which comes after it")
    pipes = plan.pipelines
    if not isinstance(pipes, list) or not all(isinstance(g, list) for g in pipes):
        fail("key 'pipelines' must be a list of lists of partition names")
    seen: set[str] = set()
    for group in pipes:
        for name in group:
            if name not in names:
                fail(f"pipelines: unknown partition {name!r}")
            if name in seen:
                fail(f"pipelines: partition {name} is in two sets")
            seen.add(name)
    return raw


def _firings(plan, parts, phases, fail) -> dict[str, list[str]]:
    raw = plan.firings
    if not isinstance(raw, dict):
        fail("key 'firings' must map each partition to its list of layer firings")
    out = {}
    for part in parts:
        name, cnn_name = part.name, part.cnn
        fired = raw.get(name)
        if not isinstance(fired, (list, tuple)) or not all(isinstance(x, str) for x in fired):
            fail(f"firings: no list of layer firings for partition {name}")
        counts = Counter(fired)
        for layer in counts:
            if layer not in part.layers:
                fail(f"firings.{name}: layer {layer!r} is not in the partition")
        for layer in part.layers:
            want = phases[cnn_name].get(layer, 1)
            if counts[layer] != want:
                fail(f"firings.{name}: layer {layer} fires {counts[layer]} times, its phases say {want}")
        out[name] = fired
    unknown = sorted(set(raw) - {p.name for p in parts})
    if unknown:
        fail(f"firings: unknown partition {unknown[0]!r}")
    return out


def _edges(plan: Plan, cnns, fail) -> dict[EdgeId, PlanEdge]:
    raw = plan.edges
    for key, e in raw.items():
        if key.cnn not in cnns or key.copy not in (0, 1, 2):
            fail(f"edges: key {str(key)!r} is not 'cnn.src->dst' of a CNN of the app")
        if not cnns[key.cnn].graph.has_edge(key.src, key.dst):
            fail(f"edges: {key} is not an edge of CNN {key.cnn}")
        if not _int(e.buffer) or not _int(e.rows):
            fail(f"edges.{key}: expected integer 'buffer' and 'rows'")
        if not 0 <= e.buffer < len(plan.buffers):
            fail(f"edges.{key}: buffer {e.buffer} is out of range (0..{len(plan.buffers) - 1})")
        height = int(cnns[key.cnn].edge_shape(key.src, key.dst)[2])
        if not 1 <= e.rows <= height:
            fail(f"edges.{key}: rows {e.rows} outside 1..{height} (the tensor's height)")
    return raw


def _tilings(plan: Plan, cnns, fail) -> dict[str, tuple]:
    """The plan's fused-tiled groups (explorer/tiling/fused.py): a group runs as one step whose
    inner edges are per-tile buffers, not rings of rows."""
    for cnn_name, groups in plan.tilings.items():
        for g in groups:
            if cnn_name not in cnns or any(x not in cnns[cnn_name].graph for x in g.layers):
                fail(f"tilings.{cnn_name}: unknown CNN or layer in group {list(g.layers)}")
    return plan.tilings


def _copies(edges: dict[EdgeId, Any], cnn: str, src: str, dst: str) -> list[EdgeId]:
    """The plan's names of edge src -> dst: the edge itself, or its copies (1) and (2)."""
    one = EdgeId(cnn, src, dst)
    return [one] if one in edges else [one.with_copy(k) for k in (1, 2) if one.with_copy(k) in edges]


def _rings(cnns, parts, phases, firings, edges, inner, fail) -> None:
    """Replay every partition's firings row by row against the plan's ring sizes (edges
    `inner` to a tiled group are per-tile buffers: not replayed)."""
    owner = {(p.cnn, layer): p.name for p in parts for layer in p.layers}
    for cnn_name, cnn in cnns.items():
        for src, dst in cnn.edges():
            names = _copies(edges, cnn_name, src, dst)
            if not names:
                fail(f"edges: no entry for edge {EdgeId(cnn_name, src, dst)}")
            if owner[(cnn_name, src)] != owner[(cnn_name, dst)]:
                height = int(cnn.edge_shape(src, dst)[2])
                for name in names:
                    if edges[name].rows != height:
                        fail(f"edges.{name}: crosses partitions but holds {edges[name].rows} "
                             f"of its {height} rows")
    for part in parts:
        cnn = cnns[part.cnn]
        ph = phases[cnn.name]
        order = [x for x in cnn.order() if x in set(part.layers)]
        windows = edge_windows(cnn, order, {x: ph.get(x, 1) for x in order})
        steps: dict[str, list[int]] = {x: [] for x in order}
        for t, layer in enumerate(firings[part.name]):
            steps[layer].append(t)
        for src, dst in internal_edges(cnn, order):
            name = _copies(edges, cnn.name, src, dst)[0]
            if name in inner:
                continue
            _ring(name, edges[name].rows, steps[src], ph.get(src, 1),
                  int(cnn.layer(src).output_shape[2]), steps[dst], windows[(src, dst)],
                  int(cnn.edge_shape(src, dst)[2]), part.name, fail)


def _ring(name, slots, prod_steps, prod_phases, out_h, cons_steps, reads, height, part, fail):
    """Row r lives in slot r % slots: it must be written before any read, and row r + slots
    must not be written before the last read of row r."""
    written = [-1] * height
    for p, t in enumerate(prod_steps):
        for r in part_rows(out_h, prod_phases, p):
            if r < height:
                written[r] = t
    last = [-1] * height
    for q, t in enumerate(cons_steps):
        for r in reads[q]:
            if written[r] < 0 or written[r] >= t:
                fail(f"firings.{part}: step {t} reads row {r} of {name} before its producer "
                     f"writes it")
            last[r] = max(last[r], t)
    for r in range(slots, height):
        if last[r - slots] >= written[r]:
            fail(f"edges.{name}: a ring of {slots} rows is too small: row {r} overwrites row "
                 f"{r - slots} (step {written[r]}) before its last read (step {last[r - slots]})")


def _buffers(plan: Plan, cnns, parts, firings, edges, tilings, inner, fail) -> None:
    """explorer.memory.validity.check_plan over the lifetimes of the plan's own firings."""
    from explorer.app.model import Application, Partition
    from explorer.memory.lifetimes import edge_uses
    from explorer.memory.buffers import Buffer
    from explorer.memory.validity import check_plan

    buffers = plan.buffers
    data = plan.data_bytes
    for k, b in enumerate(buffers):
        if not _int(b.elements) or not _int(b.bytes):
            fail(f"buffers[{k}]: expected {{edges, elements, bytes}}")
        if b.bytes < b.elements * data:
            fail(f"buffers[{k}]: {b.bytes} bytes cannot hold {b.elements} elements of {data} bytes")
        for name in b.edges:
            if name not in edges or edges[name].buffer != k:
                fail(f"buffers[{k}]: lists edge {str(name)!r}, whose entry in 'edges' names another buffer")
    app = Application(plan.name, cnns, [Partition(p.name, p.cnn, list(p.layers)) for p in parts],
                      [list(g) for g in plan.pipelines])
    sizes: dict[str, int] = {}
    for name, e in edges.items():
        n, c, _, w = cnns[name.cnn].edge_shape(name.src, name.dst)
        sizes[str(name)] = e.rows * n * c * w
        if name in inner:                 # a per-tile buffer: the plan's largest tile region
            if not _int(e.elements) or e.elements < 1:
                fail(f"edges.{name}: expected integer 'elements'")
            sizes[str(name)] = e.elements
    uses = edge_uses(app, firings, {str(k): sizes[str(k)] for k in edges if not k.copy},
                     _row_lives(plan, app, firings, edges, tilings))
    if tilings:
        from explorer.tiling.fused import stretch_groups
        uses = stretch_groups(uses, app, firings, tilings)
    uses = [replace(u, size=sizes.get(u.name, u.size)) for u in uses]
    if plan.layer_precisions:      # sizes in bytes, each tensor at its producer's width
        from explorer.app.layer_precision import LayerPrecisions
        from explorer.memory.layer_bytes import in_bytes
        uses = in_bytes(app, uses, LayerPrecisions.of(plan.layer_precisions))
    uses, stored_in = _tensors(uses, edges, fail)
    placed = plan.placed()
    for k, b in enumerate(buffers if placed else []):
        if not _int(b.offset) or b.offset < 0 or b.offset % data:
            fail(f"buffers[{k}]: offset {b.offset!r} is not a non-negative multiple of {data} bytes")
    problems = check_plan(uses, [Buffer(list(dict.fromkeys(stored_in[n] for n in b.edges)),
                                        b.elements, b.offset // data if placed else None)
                                 for b in buffers], app.pipelines)
    if problems:
        fail(problems[0])


def _tensors(uses: list, edges: dict[EdgeId, PlanEdge], fail) -> tuple[list, dict[EdgeId, str]]:
    """The plan's stored tensors as uses: edges of one tensor in one buffer
    (explorer/memory/tensors.py) are one use, alive while any of them is, and must hold the
    same rows (one ring: slot r % rows for every reader); every other edge is its own use.
    Returns the uses and plan edge -> the name of the use storing it."""
    from explorer.memory.tensors import merge, tensor_name
    by_name = {u.name: u for u in uses}
    groups: dict[tuple, list[EdgeId]] = {}
    for name in edges:
        if str(name) not in by_name and not (name.copy and str(name.with_copy(0)) in by_name):
            fail(f"edges: {name} is not an edge use of this plan's partitions")
        groups.setdefault((name.cnn, name.src, name.copy, edges[name].buffer), []).append(name)
    out, stored_in, covered = [], {}, set()
    for (cnn, src, copy, _), names in groups.items():
        base = [by_name.get(str(n)) or by_name[str(n.with_copy(0))] for n in names]
        covered.update(u.name for u in base)
        if len(names) == 1 and base[0].name == str(names[0]):
            out.append(base[0])
            stored_in[names[0]] = str(names[0])
            continue
        if len({edges[n].rows for n in names}) > 1:
            fail(f"edges.{names[0]} and edges.{names[1]} store one tensor in buffer "
                 f"{edges[names[0]].buffer} but hold {edges[names[0]].rows} and "
                 f"{edges[names[1]].rows} rows")
        use = merge(tensor_name(cnn, src, copy) + f"@{edges[names[0]].buffer}", base,
                    tuple(str(n) for n in names))
        out.append(use)
        stored_in.update({n: use.name for n in names})
    return out + [u for u in uses if u.name not in covered], stored_in


def _row_lives(plan: Plan, app, firings, edges, tilings) -> dict:
    """Row-by-row lifetimes of the whole edges stored by rows (explorer/memory/staircase.py) of an
    offset plan of a per-tensor planner (explorer.memory.placement), from its own firings and
    phases; none for the paper's per-edge buffers or tiled plans."""
    if tilings or not planner(plan.placement).per_tensor or not plan.placed():
        return {}
    from explorer.memory.staircase import app_row_lives
    where = {(p.cnn, layer): p.name for p in app.partitions for layer in p.layers}
    rows: dict[str, dict[tuple[str, str], int]] = {}
    for name, e in edges.items():
        if name.copy or where.get((name.cnn, name.src)) != where.get((name.cnn, name.dst)):
            continue
        rows.setdefault(where[(name.cnn, name.src)], {})[(name.src, name.dst)] = int(e.rows)
    phases = {c: {k: int(v) for k, v in ph.items()} for c, ph in plan.phases.items()}
    return app_row_lives(app, firings, phases, rows, tensors=True)
