"""What every planner needs about conflicts: which uses may never share bytes (a sweep
over each partition's intervals plus parallel partitions of J), and the live bound no
placement can beat."""
from __future__ import annotations

from collections import defaultdict

from explorer.memory.lifetimes import EdgeUse


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
    uses with Rows, explorer/memory/placement/rows.py), so no placement's arena is smaller. Cheap
    (a sweep per partition); explorer.report.baselines' lower_bound is the full one that pipeline
    sets need."""
    from explorer.memory.placement.rows import alive_events
    best = 0
    for ev in alive_events(uses).values():
        ev.sort()
        now = 0
        for _, d in ev:
            now += d
            best = max(best, now)
    return best
