"""Schedules chosen for total memory: per partition, several firing orders are built and the
one whose edge buffers take the least arena after placement is kept.

The demand-driven schedule of csdf.partition_analysis keeps every edge at its fewest rows,
but not the sum: on MobileNetV2 with every layer by parts it keeps 477,344 elements alive at
once where a self-timed one keeps far fewer. So, for a partition under given phases:

- `demand`: csdf.partition_analysis's schedule (topological priority), the paper's;
- `asap`: csdf.schedule_policies.asap_schedule, self-timed sweeps;
- `reordered`: whole layers in the least-peak order of explorer.memory.reorder (Liberis & Lane);
  with layers by parts, the demand-driven schedule with that order as its priority, which
  reorders the branches.

Each candidate's rows come from the row replay (`csdf.partition_analysis.row_buffers`), with
one ring per tensor read by several layers (csdf/shared_rings.py), its
edges become uses alive from the producer's first firing to the consumer's last (as
explorer.memory.lifetimes has them; whole edges stored by rows row by row, explorer/memory/staircase.py)
merged into one use per tensor (explorer/memory/tensors.py) and are placed by the app's planner; the least arena wins, the
earlier candidate on ties. Edges that cross partitions hold whole tensors under every
candidate and are left out of the comparison.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from csdf.model import edge_name
from csdf.partition_analysis import PartitionAnalysis, demand_schedule, row_buffers
from csdf.schedule_policies import asap_schedule
from csdf.shared_rings import share_rings
from csdf.to_csdf import edge_windows
from explorer.memory.lifetimes import EdgeUse, Rows
from explorer.memory.buffers import buffer_elements
from explorer.memory.cache import RunCache
from explorer.memory.placement import live_bound, place
from explorer.memory.reorder import partition_order
from explorer.memory.staircase import row_lives
from explorer.memory.tensors import tensor_uses

Edge = tuple[str, str]


@dataclass
class Candidate:
    policy: str
    firings: list[str]
    rows: dict[Edge, int]
    elements: dict[Edge, int]
    arena: int = 0               # elements, internal edges only, after placement
    lives: dict[Edge, Rows] = field(default_factory=dict)   # whole edges stored by rows


def _firings(app, part_name: str, a: PartitionAnalysis, cache: RunCache | None
             ) -> list[tuple[str, list[str]]]:
    whole = all(n == 1 for n in a.phases.values())
    order = partition_order(app, part_name, kept=cache).order
    out = [("demand", list(a.firings))]
    if whole:
        if order != a.firings:
            out.append(("reordered", order))
        return out
    seen = [a.firings]
    for policy, make in (("asap", lambda: asap_schedule(a.graph, a.layers)),
                         ("reordered", lambda: demand_schedule(a.graph, order))):
        if policy == "reordered" and order == a.layers:
            continue
        firings = make()
        if all(firings != f for f in seen):     # the same schedule twice is judged once
            seen.append(firings)
            out.append((policy, firings))
    return out


def uses_of(part_name: str, cnn: str, firings: list[str], elements: dict[Edge, int],
            lives: dict[Edge, Rows] | None = None) -> list[EdgeUse]:
    """The partition's internal edges under `firings` as uses (`lives`: row-by-row lifetimes
    of whole edges stored by rows, explorer/memory/staircase.py)."""
    lives = lives or {}
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for i, name in enumerate(firings):
        first.setdefault(name, i)
        last[name] = i
    return [EdgeUse(edge_name(cnn, s, d), cnn, n, ((part_name, first[s], last[d]),),
                    lives.get((s, d)))
            for (s, d), n in elements.items()]


def read_outside(app, part_name: str) -> set[str]:
    """Layers of the partition whose tensor is also read in another partition: a crossing
    edge holds it whole, so its one buffer keeps every row."""
    part = app.partition(part_name)
    cnn = app.cnns[part.cnn]
    inside = set(part.layers)
    return {x for x in part.layers if any(d not in inside for d in cnn.graph.successors(x))}


def tensor_rows(app, part_name: str, a: PartitionAnalysis, firings: list[str],
                rows: dict[Edge, int], windows=None, cache: RunCache | None = None
                ) -> tuple[dict[Edge, int], dict[Edge, int], dict[Edge, Rows]]:
    """(rows, elements, lives) of the partition's internal edges under `firings` with one
    buffer per tensor: `rows` (per edge) shared per tensor, and every edge of a tensor
    stored by rows given its row lives."""
    cnn = app.cnns[app.partition(part_name).cnn]
    row = {(ch.src, ch.dst): ch.token_size for ch in a.graph.channels if ch.src != ch.dst}
    analysis = None if cache is None else cache.analysis
    windows = windows or a.windows or edge_windows(cnn, a.layers, a.phases, analysis)
    rows = share_rings(a.graph, windows, firings, rows, read_outside(app, part_name), analysis)
    elements = {e: rows[e] * row[e] for e in rows}
    return rows, elements, row_lives(cnn, a.layers, a.phases, firings, rows, tensors=True,
                                     windows=windows)


def candidates(app, part_name: str, a: PartitionAnalysis, cache: RunCache | None = None
               ) -> list[Candidate]:
    """Every policy's schedule with its rows, elements and arena. A candidate whose live
    bound (explorer.memory.placement.live_bound: no placement goes below it) already reaches the
    least arena of the earlier ones cannot win (ties go to the earlier), so it is not
    placed and its `arena` is that bound."""
    cnn = app.partition(part_name).cnn
    analysis = None if cache is None else cache.analysis
    windows = a.windows or edge_windows(app.cnns[cnn], a.layers, a.phases, analysis)
    out: list[Candidate] = []
    made = _firings(app, part_name, a, cache)
    for policy, firings in made:
        if policy == "demand":
            rows = a.edge_rows
        else:
            rows, _ = row_buffers(a.graph, windows, firings, analysis)
        rows, elements, lives = tensor_rows(app, part_name, a, firings, rows, windows, cache)
        c = Candidate(policy, firings, rows, elements, 0, lives)
        if len(made) > 1:
            uses = tensor_uses(uses_of(part_name, cnn, firings, elements, lives))
            least = min((o.arena for o in out), default=None)
            c.arena = live_bound(uses, []) if least is not None else 0
            if least is None or c.arena < least:
                c.arena = buffer_elements(place(uses, [[part_name]], app.placement, cache))
        out.append(c)
    return out


def choose(app, part_name: str, a: PartitionAnalysis, cache: RunCache | None = None
           ) -> Candidate:
    """The candidate with the least arena (the first on ties); `cache`: explorer.memory.cache."""
    return min(candidates(app, part_name, a, cache), key=lambda c: c.arena)
