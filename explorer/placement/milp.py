"""Exact offset placement as a mixed-integer program, solved by HiGHS (highspy), to measure
how far the heuristics are from optimal on small instances.

The model is the standard one for dynamic storage allocation with a conflict graph (e.g.
Sekiyama et al. 2018, Section 4; Lamprakos et al. 2023): offsets o_i >= 0, arena A >= o_i +
s_i, and for every conflicting pair i < j one binary z_ij choosing which lies below:
    o_i + s_i <= o_j + U z_ij,     o_j + s_j <= o_i + U (1 - z_ij),
with U the best heuristic arena (best_fit.py), which also starts the solver. Minimise A.
Instances with more than LIMIT uses, or that HiGHS does not close within SECONDS, keep the
best solution found (never worse than the heuristic's).
"""
from __future__ import annotations

from dataclasses import dataclass

import highspy
import numpy as np

from explorer.lifetimes import EdgeUse
from explorer.memory import Buffer
from explorer.placement import conflict_graph, live_bound
from explorer.placement.best_fit import best_offsets
from explorer.placement.greedy_size import buffers, extent

LIMIT = 60
SECONDS = 10.0


@dataclass
class Solved:
    offsets: list[int]
    arena: int
    optimal: bool            # HiGHS proved it (or the heuristic met the clique bound)
    bound: int               # HiGHS' dual bound on the arena


def solve(sizes: list[int], adj: list[set[int]], start: list[int], seconds: float = SECONDS,
          floor: int = 0) -> Solved:
    """Least-arena offsets for records of `sizes` with conflict graph `adj`, from `start`;
    `floor` is a known lower bound (a start that meets it is returned as optimal)."""
    n = len(sizes)
    upper = extent(sizes, start)
    if upper <= floor:
        return Solved(list(start), upper, True, upper)
    pairs = [(i, j) for i in range(n) for j in adj[i] if i < j]
    if not pairs:
        return Solved([0] * n, max(sizes, default=0), True, max(sizes, default=0))
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", float(seconds))
    h.setOptionValue("random_seed", 0)
    h.setOptionValue("threads", 1)
    inf = highspy.kHighsInf
    for i in range(n):                                   # o_i in [0, U - s_i]
        h.addVar(0.0, float(upper - sizes[i]))
    h.addVar(float(max(sizes)), float(upper))            # A
    a = n
    for k in range(len(pairs)):                          # z_ij
        h.addVar(0.0, 1.0)
    h.changeColsIntegrality(len(pairs), np.arange(n + 1, n + 1 + len(pairs), dtype=np.int32),
                            np.full(len(pairs), highspy.HighsVarType.kInteger))
    h.changeColCost(a, 1.0)
    for i in range(n):                                   # A - o_i >= s_i
        h.addRow(float(sizes[i]), inf, 2, np.array([a, i], dtype=np.int32), np.array([1.0, -1.0]))
    for k, (i, j) in enumerate(pairs):
        z = n + 1 + k
        # o_j - o_i + U z >= s_i ;  o_i - o_j - U z >= s_j - U
        h.addRow(float(sizes[i]), inf, 3, np.array([j, i, z], dtype=np.int32),
                 np.array([1.0, -1.0, float(upper)]))
        h.addRow(float(sizes[j] - upper), inf, 3, np.array([i, j, z], dtype=np.int32),
                 np.array([1.0, -1.0, -float(upper)]))
    sol = highspy.HighsSolution()
    col = [float(o) for o in start] + [float(upper)]
    col += [0.0 if start[i] + sizes[i] <= start[j] else 1.0 for i, j in pairs]
    sol.col_value = col
    sol.value_valid = True
    h.setSolution(sol)
    h.run()
    info = h.getInfo()
    values = list(h.getSolution().col_value)
    found = [int(round(v)) for v in values[:n]] if len(values) >= n else start
    arena = extent(sizes, found)
    if arena > upper or not _valid(sizes, adj, found):
        found, arena = start, upper
    proved = h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    bound = int(np.ceil(info.mip_dual_bound - 1e-6)) if proved or info.mip_dual_bound > 0 else 0
    return Solved(found, arena, proved, min(bound, arena))


def _valid(sizes: list[int], adj: list[set[int]], off: list[int]) -> bool:
    return all(off[i] >= 0 and (off[i] + sizes[i] <= off[j] or off[j] + sizes[j] <= off[i])
               for i in range(len(sizes)) for j in adj[i])


def place(uses: list[EdgeUse], pipelines: list[list[str]]) -> list[Buffer]:
    adj = conflict_graph(uses, pipelines)
    start = best_offsets(uses, adj)
    if len(uses) > LIMIT:
        return buffers(uses, start)
    return buffers(uses, solve([u.size for u in uses], adj, start,
                               floor=live_bound(uses, adj)).offsets)
