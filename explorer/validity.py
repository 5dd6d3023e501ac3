"""Is a buffer plan valid? Every edge use sits in exactly one buffer that is large enough,
and no two uses that are alive together (`lifetimes.conflict`) share a buffer or, once
buffers have arena offsets (explorer.placement), overlap in the arena.

Deliberately the plain pairwise check, independent of Algorithm 1's incremental one, so it
can judge Algorithm 1, the baselines and any plan a later stage builds.
"""
from __future__ import annotations

from explorer.lifetimes import EdgeUse, conflict, group_index
from explorer.memory import Buffer, arena_offsets


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
            if ka != kb and oa < ob + b.size and ob < oa + a.size and conflict(a, b, group):
                problems.append(f"edges {a.name} and {b.name} are alive together and overlap "
                                f"in the arena")
    return problems
