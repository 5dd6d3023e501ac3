"""The yardsticks the methodology is judged by (paper Section 8, Table 12), all computed on
the same edge uses:

- `none`: no reuse, one buffer per edge use (Table 1's naive allocation).
- `pisarchyk`: Pisarchyk & Lee 2020, "greedy by size for shared objects", in the form
  TFLite's GPU delegate ships it (GreedyBySizeDistPriorityAssignment): records are taken
  largest first, led by the positional maximums; each joins the non-overlapping shared
  object with the nearest usage interval, else opens one. Applied per CNN (no sharing
  across CNNs) over the CNN's whole schedule (its partitions' schedules concatenated) and
  blind to pipelines: a pipelined CNN is treated as sequential, so its crossing edges are
  not double-buffered and pipelined stages may share (the paper's throughput loss).
- `reuse`: Algorithm 1 (explorer.memory.reuse).
- `all_parts`: every layer that can runs by parts (the paper's [17]); schedules and edge
  sizes from csdf.partition_analysis, then Algorithm 1.
- `lower_bound`: the most elements alive at once under the schedules of `reuse`.

With a planner that reorders (app.placement, explorer.memory.placement: the offset planners,
the default) `reuse` and `all_parts` are derived as the search derives a plan
(explorer.plan.derive: layers reordered, phase schedules chosen for total memory, its
placement), and `all_parts_bound` is added: the lower bound of the all-parts schedules. A
planner that keeps the paper's order and schedules (`shared-objects`) gives the paper's
columns.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from csdf.partition_analysis import analyse_partition
from csdf.parts import all_parts as all_parts_phases
from csdf.model import edge_name
from explorer.app.model import Application, Partition
from explorer.memory.lifetimes import EdgeUse, edge_uses
from explorer.memory.buffers import Buffer, memory_bytes, naive
from explorer.memory.cache import RunCache
from explorer.memory.placement import planner
from explorer.memory.reuse import algorithm1

@dataclass
class Baseline:
    """One row of the baselines table."""
    name: str
    buffers: list[Buffer]
    param_bytes: int
    buffer_bytes: int
    total_bytes: int

    def as_json(self) -> dict[str, int]:
        return {"total_bytes": self.total_bytes, "param_bytes": self.param_bytes,
                "buffer_bytes": self.buffer_bytes, "buffers": len(self.buffers)}


# ---- Pisarchyk & Lee ----------------------------------------------------------------------
def _positional_maximums(records: list[tuple[int, int, int]]) -> list[int]:
    """Lower bounds on the size of each shared object: at every step, sort the alive
    records by size (largest first); the i-th maximum is the largest i-th size over steps."""
    steps = max(last for _, _, last in records) + 1
    alive: list[list[int]] = [[] for _ in range(steps)]
    for size, first, last in records:
        for t in range(first, last + 1):
            alive[t].append(size)
    out: list[int] = []
    for sizes in alive:
        sizes.sort(reverse=True)
        for i, s in enumerate(sizes):
            if i < len(out):
                out[i] = max(out[i], s)
            else:
                out.append(s)
    return out


def greedy_by_size(records: list[tuple[int, int, int]]) -> tuple[list[int], list[int]]:
    """Shared objects for tensor usage records (size, first_step, last_step): returns the
    object of each record and the objects' sizes. Pisarchyk & Lee's greedy by size with
    distance priority: repeatedly take the unassigned record with (leftmost positional
    maximum that still covers its size, then smallest positive distance to an object it
    may join, then largest size, then first listed) and put it in that object (growing it
    if needed), or in a new object if it overlaps every object."""
    if not records:
        return [], []
    pmax = _positional_maximums(records)
    position = []
    for size, _, _ in records:
        pos = 0
        while pos < len(pmax) and pmax[pos] >= size:
            pos += 1
        position.append(pos - 1)
    n = len(records)
    inf = float("inf")
    dist: list[list[float]] = [[] for _ in range(n)]   # per record, per object; inf = overlaps
    best_dist = [inf] * n
    best_obj = [-1] * n
    obj_of: list[int | None] = [None] * n
    sizes: list[int] = []
    for _ in range(n):
        pick, pick_key = -1, None
        for i in range(n):
            if obj_of[i] is None:
                key = (position[i], best_dist[i], -records[i][0])
                if pick_key is None or key < pick_key:     # first listed wins ties
                    pick, pick_key = i, key
        size, first, last = records[pick]
        new = best_dist[pick] == inf
        k = len(sizes) if new else best_obj[pick]
        if new:
            sizes.append(size)
        else:
            sizes[k] = max(sizes[k], size)
        obj_of[pick] = k
        for i in range(n):                 # distances of the unassigned records to object k
            if obj_of[i] is not None or (not new and dist[i][k] == inf):
                continue
            _, f, l = records[i]
            gap = first - l if l < first else (f - last if last < f else inf)
            if new:
                dist[i].append(gap)
            elif gap == inf:
                dist[i][k] = inf
                if best_obj[i] == k:       # its best object is gone: look again
                    best_dist[i], best_obj[i] = inf, -1
                    for j, d in enumerate(dist[i]):
                        if d < best_dist[i]:
                            best_dist[i], best_obj[i] = d, j
            else:
                dist[i][k] = min(dist[i][k], gap)
            if gap < best_dist[i]:
                best_dist[i], best_obj[i] = gap, k
    return [int(o) for o in obj_of], sizes


def sequential_uses(app: Application, schedules: dict[str, list[str]] | None = None,
                    sizes: dict[str, int] | None = None) -> dict[str, list[EdgeUse]]:
    """Edge uses per CNN as Pisarchyk & Lee see them: one partition per CNN whose schedule
    is its partitions' schedules one after the other; no pipelines, so no double buffers."""
    schedules = schedules or {}
    parts, scheds = [], {}
    for cnn in app.cnns:
        mine = app.partitions_of(cnn)
        name = f"{cnn}.sequential"
        parts.append(Partition(name, cnn, [x for p in mine for x in p.layers]))
        scheds[name] = [x for p in mine
                        for x in (schedules.get(p.name) or app.schedules.get(p.name) or p.layers)]
    flat = replace(app, partitions=parts, pipelines=[[p.name] for p in parts], schedules=scheds)
    out: dict[str, list[EdgeUse]] = {cnn: [] for cnn in app.cnns}
    for use in edge_uses(flat, scheds, sizes):
        out[use.cnn].append(use)
    return out


def pisarchyk(uses_per_cnn: dict[str, list[EdgeUse]]) -> list[Buffer]:
    """Pisarchyk & Lee's shared objects, CNN by CNN; each use must have one span (see
    `sequential_uses`). Records are edges, as in the paper's memory model."""
    buffers: list[Buffer] = []
    for uses in uses_per_cnn.values():
        records = []
        for use in uses:
            if len(use.spans) != 1:
                raise ValueError(f"pisarchyk: edge use {use.name} spans several partitions; "
                                 f"build the uses with sequential_uses")
            records.append((use.size, use.spans[0][1], use.spans[0][2]))
        objects, sizes = greedy_by_size(records)
        mine = [Buffer([], s) for s in sizes]
        for use, k in zip(uses, objects):
            mine[k].edges.append(use.name)
        buffers += mine
    return buffers


# ---- lower bound ----------------------------------------------------------------------------
def lower_bound(uses: list[EdgeUse], pipelines: list[list[str]]) -> tuple[int, int]:
    """(elements, uses) alive together at the worst moment (uses with row-by-row lifetimes
    count the rows holding data at each step). Sets of J run one at a time;
    within a set the partitions run in parallel at any offset, so the worst moment of a set
    is every partition at its own worst step, plus the uses spread over several of its
    partitions (double buffers: alive throughout). Each partition's steps are one array per
    figure (numpy), every use added over its span at once, so a schedule of 100,000 firings
    costs what a few hundred do per step."""
    best = (0, 0)
    listed = {name for group in pipelines for name in group}
    alone = sorted({s[0] for u in uses for s in u.spans} - listed)
    for members in list(pipelines) + [[name] for name in alone]:
        inside = set(members)
        total, count = 0, 0
        mine_of = []
        for use in uses:
            mine = [s for s in use.spans if s[0] in inside]
            if not mine:
                continue
            if len({s[0] for s in mine}) > 1:
                total, count = total + use.size, count + 1
                continue
            mine_of.append((use, mine[0]))
        length = {p: 0 for p in members}
        for _, (p, _, b) in mine_of:
            length[p] = max(length[p], b + 1)
        held = {p: (np.zeros(n + 1, dtype=np.int64), np.zeros(n + 1, dtype=np.int64))
                for p, n in length.items()}
        for use, (p, a, b) in mine_of:
            if b < a:
                continue
            elements, alive = held[p]
            if use.rows is not None and len(use.spans) == 1:     # row by row (EdgeUse.rows)
                steps = np.arange(a, b + 1)
                rows = (np.searchsorted(use.rows.first, steps, side="right")
                        - np.searchsorted(use.rows.last, steps, side="left"))
                n = np.maximum(rows, 0) * use.rows.row
                elements[a:b + 1] += n
                alive[a:b + 1] += n != 0
            elif use.size:
                elements[a:b + 1] += use.size
                alive[a:b + 1] += 1
        for elements, alive in held.values():
            top = int(elements.max())
            total += top
            count += int(alive[elements == top].max()) if top else 0
        best = max(best, (total, count))
    return best


# ---- processing by parts everywhere --------------------------------------------------------
def all_parts_inputs(app: Application) -> tuple[dict[str, list[str]], dict[str, int]]:
    """Schedules and edge sizes with every layer that can by parts (csdf.parts.all_parts),
    from csdf.partition_analysis; crossing edges stay whole."""
    schedules: dict[str, list[str]] = {}
    sizes: dict[str, int] = {}
    for part in app.partitions:
        cnn = app.cnns[part.cnn]
        phases = all_parts_phases(cnn)
        result = analyse_partition(cnn, part.layers, {x: phases[x] for x in part.layers})
        schedules[part.name] = result.firings
        for (src, dst), elements in result.edge_elements.items():
            sizes[edge_name(cnn.name, src, dst)] = elements
    return schedules, sizes


# ---- the table ------------------------------------------------------------------------------
def _row(app: Application, name: str, buffers: list[Buffer]) -> Baseline:
    return Baseline(name, buffers, *memory_bytes(app, buffers))


def _bound_row(app: Application, name: str, uses: list[EdgeUse]) -> Baseline:
    elements, count = lower_bound(uses, app.pipelines)
    params, _, _ = memory_bytes(app, [])
    lb = elements * app.precision.data_bytes
    return Baseline(name, [Buffer([], 0)] * count, params, lb, params + lb)


def baselines(app: Application, with_all_parts: bool = True, cache: RunCache | None = None,
              all_parts_bound: bool = True) -> dict[str, Baseline]:
    """Every baseline for `app` under its schedules (explicit, else topological; with a
    planner that reorders, the schedules the search would choose). `cache`: the search's
    RunCache (explorer/memory/cache.py), so the derivations reuse the partitions, layer
    orders and placements the search already made; `all_parts_bound=False` leaves out the
    bound of the all-parts schedules (a sweep over its many steps)."""
    if planner(app.placement).reorders:
        return _placed_baselines(app, with_all_parts, cache, all_parts_bound)
    uses = edge_uses(app)
    rows = {"none": _row(app, "none", naive(uses)),
            "pisarchyk": _row(app, "pisarchyk", pisarchyk(sequential_uses(app))),
            "reuse": _row(app, "reuse", algorithm1(uses, app.pipelines))}
    if with_all_parts:
        schedules, sizes = all_parts_inputs(app)
        rows["all_parts"] = _row(app, "all_parts", algorithm1(edge_uses(app, schedules, sizes),
                                                              app.pipelines))
    elements, count = lower_bound(uses, app.pipelines)
    params, _, _ = memory_bytes(app, [])
    lb = elements * app.precision.data_bytes
    rows["lower_bound"] = Baseline("lower_bound", [Buffer([], 0)] * count, params, lb, params + lb)
    return rows


def _placed_baselines(app: Application, with_all_parts: bool, cache: RunCache | None = None,
                      all_parts_bound: bool = True) -> dict[str, Baseline]:
    """The table under an offset planner: `none` and `pisarchyk` as always, `reuse` and
    `all_parts` derived (explorer.plan.derive), each bound under its own schedules."""
    from explorer.plan.derive import derive, uniform_phases

    uses = edge_uses(app)
    rows = {"none": _row(app, "none", naive(uses)),
            "pisarchyk": _row(app, "pisarchyk", pisarchyk(sequential_uses(app)))}
    whole = derive(app, uniform_phases(app, False), cache)
    rows["reuse"] = _row(app, "reuse", whole.buffers)
    if with_all_parts:
        parts = derive(app, uniform_phases(app, True), cache)
        rows["all_parts"] = _row(app, "all_parts", parts.buffers)
        if all_parts_bound:
            rows["all_parts_bound"] = _bound_row(app, "all_parts_bound", parts.uses)
    rows["lower_bound"] = _bound_row(app, "lower_bound", whole.uses)
    return rows
