"""Buffer placement: where each edge use lives in memory, one planner per module behind one
protocol (planner.Planner), in the style of TensorFlow Lite's memory planners
(`MemoryPlanner`: records in, offsets out), kept in a registry (PLANNERS, `planner(name)`).

Every planner takes the edge uses of an application (explorer.memory.lifetimes: size in elements,
steps alive per partition) and the pipeline sets J, returns `explorer.memory.buffers.Buffer`s, and
says what it supports by property (`per_tensor`, `at_offsets`, `reorders`; planner.py):

- `shared-objects` (shared_objects.py): Algorithm 1 of the paper over edge uses; buffers carry
  no offset and are laid one after another, so the arena is the sum of buffer sizes (Eq. 3);
  topological order and demand-driven schedules, the paper's.
- `greedy-by-size` (greedy_size.py): TFLite's greedy-by-size offset planner (Pisarchyk &
  Lee 2020, "greedy by size for offset calculation").
- `offsets` (best_fit.py): several visiting orders x best/first fit, the least arena kept.
- `optimal` (milp.py): the exact MILP of the strip-packing-with-conflicts model (HiGHS), for
  small instances; larger ones get `offsets`.

The three offset planners store each tensor once, reorder layers and choose phase schedules
for total memory. Callers ask `planner(name)` for the object and then its properties; a
planner's name is compared nowhere else (tests/explorer/memory/placement/test_registry.py
greps the source tree for it).

Uses may carry row-by-row lifetimes (`EdgeUse.rows`, explorer/memory/staircase.py); the offset
planners then place by explorer/memory/placement/rows.py, which lets other buffers use a row's
bytes while it holds no data. Offset planners return one buffer per use with its `offset`; the arena is then the largest
`offset + size` (explorer.memory.buffers.buffer_elements). Two uses may overlap in memory only when
they never conflict (explorer.memory.lifetimes.conflict), which respects pipeline sets as Algorithm 1
does. The conflict graph is built once per call by a sweep (`conflict_graph`).
"""
from __future__ import annotations

from explorer.memory.lifetimes import EdgeUse
from explorer.memory.buffers import Buffer
from explorer.memory.cache import RunCache
from explorer.memory.placement.best_fit import BestFit
from explorer.memory.placement.conflicts import conflict_graph, live_bound
from explorer.memory.placement.greedy_size import GreedyBySize
from explorer.memory.placement.milp import Milp
from explorer.memory.placement.planner import Planner
from explorer.memory.placement.shared_objects import SharedObjects
from sdf3.errors import InputError

__all__ = ["DEFAULT", "NAMES", "PLANNERS", "Planner", "conflict_graph", "live_bound", "place",
           "planner"]

PLANNERS: dict[str, Planner] = {p.name: p for p in
                                (BestFit(), SharedObjects(), GreedyBySize(), Milp())}
NAMES = tuple(PLANNERS)              # `--placement`'s choices, the default first
DEFAULT = BestFit.name


def planner(name: str) -> Planner:
    """The planner called `name`; an unknown name is refused in one line naming the known."""
    found = PLANNERS.get(name)
    if found is None:
        raise InputError(f"placement {name!r}: expected one of {', '.join(NAMES)}")
    return found


def place(uses: list[EdgeUse], pipelines: list[list[str]], name: str = DEFAULT,
          cache: RunCache | None = None) -> list[Buffer]:
    """Buffers for `uses` by the planner called `name`. `cache` keeps the last few answers:
    during a search explorer.memory.policies places each candidate schedule's edges and then
    explorer.plan.derive places the winner's again, often the very same uses (same names, sizes,
    spans and order), which give the same buffers (planners are deterministic)."""
    if cache is None:
        return planner(name).place(uses, pipelines)
    key = (tuple(uses), tuple(tuple(g) for g in pipelines), name)
    hit = cache.placements.get(key)
    if hit is None:
        hit = cache.placements.put(key, planner(name).place(uses, pipelines))
    return [Buffer(list(b.edges), b.size, b.offset) for b in hit]
