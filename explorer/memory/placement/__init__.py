"""Buffer placement: where each edge use lives in memory, one planner per module behind one
interface, in the style of TensorFlow Lite's memory planners (`MemoryPlanner`: records in,
offsets out).

Every planner takes the edge uses of an application (explorer.memory.lifetimes: size in elements,
steps alive per partition) and the pipeline sets J, and returns `explorer.memory.buffers.Buffer`s:

- `shared-objects` (shared_objects.py): Algorithm 1 of the paper; buffers carry no offset
  and are laid one after another, so the arena is the sum of buffer sizes (Eq. 3).
- `greedy-by-size` (greedy_size.py): TFLite's greedy-by-size offset planner (Pisarchyk &
  Lee 2020, "greedy by size for offset calculation").
- `offsets` (best_fit.py): several visiting orders x best/first fit, the least arena kept.
- `optimal` (milp.py): the exact MILP of the strip-packing-with-conflicts model (HiGHS), for
  small instances; larger ones get `offsets`.

Uses may carry row-by-row lifetimes (`EdgeUse.rows`, explorer/memory/staircase.py); the offset
planners then place by explorer/memory/placement/rows.py, which lets other buffers use a row's
bytes while it holds no data. Offset planners return one buffer per use with its `offset`; the arena is then the largest
`offset + size` (explorer.memory.buffers.buffer_elements). Two uses may overlap in memory only when
they never conflict (explorer.memory.lifetimes.conflict), which respects pipeline sets as Algorithm 1
does. The conflict graph is built once per call by a sweep (`conflict_graph`).
"""
from __future__ import annotations

from typing import Callable

from explorer.memory.lifetimes import EdgeUse
from explorer.memory.buffers import Buffer
from explorer.memory.cache import RunCache
from explorer.memory.placement.conflicts import conflict_graph, live_bound

__all__ = ["DEFAULT", "NAMES", "Planner", "conflict_graph", "live_bound", "place", "planner"]

Planner = Callable[[list[EdgeUse], list[list[str]]], list[Buffer]]
NAMES = ("offsets", "shared-objects", "greedy-by-size", "optimal")
DEFAULT = "offsets"


def planner(name: str) -> Planner:
    """The planner called `name` (one of NAMES)."""
    if name == "shared-objects":
        from explorer.memory.placement.shared_objects import place
    elif name == "greedy-by-size":
        from explorer.memory.placement.greedy_size import place
    elif name == "offsets":
        from explorer.memory.placement.best_fit import place
    elif name == "optimal":
        from explorer.memory.placement.milp import place
    else:
        raise ValueError(f"unknown placement {name!r}; expected one of {', '.join(NAMES)}")
    return place


def place(uses: list[EdgeUse], pipelines: list[list[str]], name: str = DEFAULT,
          cache: RunCache | None = None) -> list[Buffer]:
    """Buffers for `uses` by the planner called `name`. `cache` keeps the last few answers:
    during a search explorer.memory.policies places each candidate schedule's edges and then
    explorer.plan.derive places the winner's again, often the very same uses (same names, sizes,
    spans and order), which give the same buffers (planners are deterministic)."""
    if cache is None:
        return planner(name)(uses, pipelines)
    key = (tuple(uses), tuple(tuple(g) for g in pipelines), name)
    hit = cache.placements.get(key)
    if hit is None:
        hit = cache.placements.put(key, planner(name)(uses, pipelines))
    return [Buffer(list(b.edges), b.size, b.offset) for b in hit]
