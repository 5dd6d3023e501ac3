"""Buffer placement: where each edge use lives in memory, one planner per module behind one
interface, in the style of TensorFlow Lite's memory planners (`MemoryPlanner`: records in,
offsets out).

Every planner takes the edge uses of an application (explorer.lifetimes: size in elements,
steps alive per partition) and the pipeline sets J, and returns `explorer.memory.Buffer`s:

- `shared-objects` (shared_objects.py): Algorithm 1 of the paper; buffers carry no offset
  and are laid one after another, so the arena is the sum of buffer sizes (Eq. 3).
- `greedy-by-size` (greedy_size.py): TFLite's greedy-by-size offset planner (Pisarchyk &
  Lee 2020, "greedy by size for offset calculation").
- `offsets` (best_fit.py): several visiting orders x best/first fit, the least arena kept.
- `optimal` (milp.py): the exact MILP of the strip-packing-with-conflicts model (HiGHS), for
  small instances; larger ones get `offsets`.

Uses may carry row-by-row lifetimes (`EdgeUse.rows`, explorer/staircase.py); the offset
planners then place by explorer/placement/rows.py, which lets other buffers use a row's
bytes while it holds no data. Offset planners return one buffer per use with its `offset`; the arena is then the largest
`offset + size` (explorer.memory.buffer_elements). Two uses may overlap in memory only when
they never conflict (explorer.lifetimes.conflict), which respects pipeline sets as Algorithm 1
does. The conflict graph is built once per call by a sweep (`conflict_graph`).
"""
from __future__ import annotations

from collections import defaultdict
from typing import Callable

from explorer.lifetimes import EdgeUse
from explorer.memory import Buffer

Planner = Callable[[list[EdgeUse], list[list[str]]], list[Buffer]]
NAMES = ("offsets", "shared-objects", "greedy-by-size", "optimal")
DEFAULT = "offsets"


def conflict_graph(uses: list[EdgeUse], pipelines: list[list[str]]) -> list[set[int]]:
    """Neighbours of every use: the pairs `lifetimes.conflict` refuses to share, found by a
    sweep over each partition's intervals plus the cross product of parallel partitions."""
    adj: list[set[int]] = [set() for _ in uses]
    by_part: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    for i, use in enumerate(uses):
        for p, a, b in use.spans:
            by_part[p].append((a, b, i))
    for spans in by_part.values():
        spans.sort()
        active: list[tuple[int, int]] = []
        for a, b, i in spans:
            active = [(e, j) for e, j in active if e >= a]
            for _, j in active:
                if j != i:
                    adj[i].add(j)
                    adj[j].add(i)
            active.append((b, i))
    for group in pipelines:
        members = [p for p in group if p in by_part]
        for x, p in enumerate(members):
            mine = {i for _, _, i in by_part[p]}
            for q in members[x + 1:]:
                for j in {j for _, _, j in by_part[q]}:
                    for i in mine:
                        if i != j:
                            adj[i].add(j)
                            adj[j].add(i)
    return adj


def live_bound(uses: list[EdgeUse], adj: list[set[int]]) -> int:
    """Elements holding data together at the worst step of any partition (row by row for
    uses with Rows, explorer/placement/rows.py), so no placement's arena is smaller. Cheap
    (a sweep per partition); explorer.baselines' lower_bound is the full one that pipeline
    sets need."""
    from explorer.placement.rows import alive_events
    best = 0
    for ev in alive_events(uses).values():
        ev.sort()
        now = 0
        for _, d in ev:
            now += d
            best = max(best, now)
    return best


def planner(name: str) -> Planner:
    """The planner called `name` (one of NAMES)."""
    if name == "shared-objects":
        from explorer.placement.shared_objects import place
    elif name == "greedy-by-size":
        from explorer.placement.greedy_size import place
    elif name == "offsets":
        from explorer.placement.best_fit import place
    elif name == "optimal":
        from explorer.placement.milp import place
    else:
        raise ValueError(f"unknown placement {name!r}; expected one of {', '.join(NAMES)}")
    return place


_RECENT: dict[tuple, list[Buffer]] = {}
RECENT_LIMIT = 8


def place(uses: list[EdgeUse], pipelines: list[list[str]], name: str = DEFAULT) -> list[Buffer]:
    """Buffers for `uses` by the planner called `name`. The last few answers are kept:
    during a search explorer.policies places each candidate schedule's edges and then
    explorer.derive places the winner's again, often the very same uses (same names, sizes,
    spans and order), which give the same buffers (planners are deterministic)."""
    key = (tuple(uses), tuple(tuple(g) for g in pipelines), name)
    hit = _RECENT.get(key)
    if hit is None:
        hit = _RECENT[key] = planner(name)(uses, pipelines)
        if len(_RECENT) > RECENT_LIMIT:
            del _RECENT[next(iter(_RECENT))]
    return [Buffer(list(b.edges), b.size, b.offset) for b in hit]
