"""Is a buffer plan valid? Every edge use sits in exactly one buffer that is large enough,
and no two uses that are alive together (`lifetimes.conflict`) share a buffer or, once
buffers have arena offsets (explorer.memory.placement), overlap in the arena.

Deliberately the plain pairwise check, independent of Algorithm 1's incremental one, so it
can judge Algorithm 1, the baselines and any plan a later stage builds. Uses with row-by-row
lifetimes (EdgeUse.rows) are judged step by step: at every step both hold data, the
elements each holds then must not meet (not through explorer/memory/placement/rows.py's intervals).
"""
from __future__ import annotations

import numpy as np

from explorer.memory.lifetimes import EdgeUse, conflict, group_index
from explorer.memory.buffers import Buffer, arena_offsets


def check_plan(uses: list[EdgeUse], buffers: list[Buffer], pipelines: list[list[str]]) -> list[str]:
    """Violations of the plan, one line each; empty means valid."""
    problems: list[str] = []
    by_name = {u.name: u for u in uses}
    if len(by_name) != len(uses):
        problems.append("edge use names are not unique")
    placed: dict[str, int] = {}
    for k, buf in enumerate(buffers):
        for name in buf.edges:
            if name not in by_name:
                problems.append(f"buffer {k}: unknown edge {name}")
            elif name in placed:
                problems.append(f"edge {name} is in buffers {placed[name]} and {k}")
            else:
                placed[name] = k
                if by_name[name].size > buf.size:
                    problems.append(f"buffer {k}: edge {name} of {by_name[name].size} elements "
                                    f"does not fit {buf.size}")
    problems += [f"edge {u.name} is in no buffer" for u in uses if u.name not in placed]
    group = group_index(pipelines)
    for k, buf in enumerate(buffers):
        inside = [by_name[n] for n in buf.edges if n in by_name]
        for i, a in enumerate(inside):
            for b in inside[i + 1:]:
                if conflict(a, b, group):
                    problems.append(f"buffer {k}: edges {a.name} and {b.name} are alive together")
    if any(b.offset is not None for b in buffers):
        problems += _overlaps(uses, buffers, placed, group)
    return problems


def _overlaps(uses: list[EdgeUse], buffers: list[Buffer], placed: dict[str, int],
              group: dict[str, int]) -> list[str]:
    """Uses alive together whose arena regions [offset, offset + size) of different buffers
    overlap (every pair checked)."""
    if any(b.offset is None or b.offset < 0 for b in buffers):
        return ["some buffers have no arena offset, or a negative one"]
    offsets = arena_offsets(buffers)
    where = [(u, offsets[placed[u.name]], placed[u.name]) for u in uses if u.name in placed]
    problems = []
    for i, (a, oa, ka) in enumerate(where):
        for b, ob, kb in where[i + 1:]:
            if ka != kb and oa < ob + b.size and ob < oa + a.size and conflict(a, b, group) \
                    and _collide(a, oa, b, ob, group):
                problems.append(f"edges {a.name} and {b.name} are alive together and overlap "
                                f"in the arena")
    return problems


def _held(use: EdgeUse, offset: int, steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Arena elements [start, end) holding `use`'s data at each of `steps` of its partition
    (EdgeUse.alive's rows, for every step at once)."""
    if use.rows is None:
        return (np.full(len(steps), offset, dtype=np.int64),
                np.full(len(steps), offset + use.size, dtype=np.int64))
    lo = np.searchsorted(use.rows.last, steps, side="left")
    hi = np.searchsorted(use.rows.first, steps, side="right")
    return offset + lo * use.rows.row, offset + hi * use.rows.row


def _collide(a: EdgeUse, oa: int, b: EdgeUse, ob: int, group: dict[str, int]) -> bool:
    """Conflicting uses whose regions overlap: do the elements they hold meet at some step?
    Plain uses (or uses of parallel partitions) always do. Every common step is judged, as
    arrays (a plan of 100,000 firings has long common spans)."""
    if (a.rows is None and b.rows is None) or len(a.spans) > 1 or len(b.spans) > 1:
        return True
    (pa, a0, a1), (pb, b0, b1) = a.spans[0], b.spans[0]
    if pa != pb:
        return True                       # parallel partitions: alive together throughout
    steps = np.arange(max(a0, b0), min(a1, b1) + 1)
    if not len(steps):
        return False
    x0, x1 = _held(a, oa, steps)
    y0, y1 = _held(b, ob, steps)
    return bool(np.any((x0 < x1) & (y0 < y1) & (x0 < y1) & (y0 < x1)))
