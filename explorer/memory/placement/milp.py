"""Exact offset placement as a mixed-integer program, solved by HiGHS (highspy), to measure
how far the heuristics are from optimal on small instances.

The model is the standard one for dynamic storage allocation with a conflict graph (e.g.
Sekiyama et al. 2018, Section 4; Lamprakos et al. 2023): offsets o_i >= 0, arena A >= o_i +
s_i, and for every conflicting pair i < j one binary z_ij choosing which lies below:
    o_i + s_i <= o_j + U z_ij,     o_j + s_j <= o_i + U (1 - z_ij),
with U the best heuristic arena (best_fit.py), which also starts the solver. Minimise A.
A pair with row-by-row lifetimes (explorer/memory/placement/rows.py) may sit at any displacement
d = o_i - o_j outside its forbidden open intervals (a_1, b_1) .. (a_k, b_k): one binary per
allowed run (-inf, a_1], [b_1, a_2], .., [b_k, inf), exactly one chosen, each run's bounds
relaxed by 2U when not chosen (the same big-M disjunction with more than two sides).
Instances with more than LIMIT uses, or that HiGHS does not close within SECONDS, keep the
best solution found (never worse than the heuristic's).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer.memory.lifetimes import EdgeUse
from explorer.memory.buffers import Buffer
from explorer.memory.placement.conflicts import conflict_graph, live_bound
from explorer.memory.placement.best_fit import best_offsets
from explorer.memory.placement.greedy_size import buffers, extent
from explorer.memory.placement.rows import Geometry, has_rows

LIMIT = 60
SECONDS = 10.0


@dataclass
class Solved:
    offsets: list[int]
    arena: int
    optimal: bool            # HiGHS proved it (or the heuristic met the clique bound)
    bound: int               # HiGHS' dual bound on the arena


def solve(sizes: list[int], adj: list[set[int]], start: list[int], seconds: float = SECONDS,
          floor: int = 0, geometry: Geometry | None = None) -> Solved:
    """Least-arena offsets for records of `sizes` with conflict graph `adj`, from `start`;
    `floor` is a known lower bound (a start that meets it is returned as optimal);
    `geometry` gives pairs with row-by-row lifetimes their forbidden displacements."""
    import highspy          # here, not at the top: the registry imports every planner module
    n = len(sizes)
    upper = extent(sizes, start)
    if upper <= floor:
        return Solved(list(start), upper, True, upper)
    pairs = [(i, j) for i in range(n) for j in adj[i] if i < j]
    runs: dict[tuple[int, int], list[tuple[float, float]]] = {}
    if geometry is not None:
        for i, j in pairs:
            if not (geometry.plain[i] and geometry.plain[j]):
                runs[(i, j)] = _runs(geometry.between(i, j), -(upper - sizes[j]), upper - sizes[i])
        pairs = [pair for pair in pairs if pair not in runs]
    if not pairs and not runs:
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
    if pairs:
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
    big = 2.0 * upper
    col_runs: list[float] = []
    for (i, j), pieces in runs.items():
        if len(pieces) == 1:                         # one run: plain bounds on o_i - o_j
            lo, hi = pieces[0]
            h.addRow(lo, hi, 2, np.array([i, j], dtype=np.int32), np.array([1.0, -1.0]))
            continue
        first = h.getNumCol()
        d0 = start[i] - start[j]
        chosen = next((k for k, (lo, hi) in enumerate(pieces) if lo <= d0 <= hi), 0)
        for k in range(len(pieces)):
            h.addVar(0.0, 1.0)
            col_runs.append(1.0 if k == chosen else 0.0)
        zs = np.arange(first, first + len(pieces), dtype=np.int32)
        h.changeColsIntegrality(len(pieces), zs, np.full(len(pieces), highspy.HighsVarType.kInteger))
        h.addRow(1.0, 1.0, len(pieces), zs, np.ones(len(pieces)))
        for z, (lo, hi) in zip(zs, pieces):        # lo - big (1 - z) <= o_i - o_j <= hi + big (1 - z)
            idx = np.array([i, j, z], dtype=np.int32)
            if lo > -inf:
                h.addRow(lo - big, inf, 3, idx, np.array([1.0, -1.0, -big]))
            if hi < inf:
                h.addRow(-inf, hi + big, 3, idx, np.array([1.0, -1.0, big]))
    sol = highspy.HighsSolution()
    col = [float(o) for o in start] + [float(upper)]
    col += [0.0 if start[i] + sizes[i] <= start[j] else 1.0 for i, j in pairs]
    col += col_runs
    sol.col_value = col
    sol.value_valid = True
    h.setSolution(sol)
    h.run()
    info = h.getInfo()
    values = list(h.getSolution().col_value)
    found = [int(round(v)) for v in values[:n]] if len(values) >= n else start
    arena = extent(sizes, found)
    if arena > upper or not _valid(sizes, adj, found, geometry):
        found, arena = start, upper
    proved = h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    bound = int(np.ceil(info.mip_dual_bound - 1e-6)) if proved or info.mip_dual_bound > 0 else 0
    return Solved(found, arena, proved, min(bound, arena))


def _runs(forbidden: list[tuple[int, int]], low: float, high: float) -> list[tuple[float, float]]:
    """The closed runs of d in [low, high] outside the open `forbidden` intervals (sorted);
    infinite ends stay infinite."""
    import highspy
    inf = highspy.kHighsInf
    out, at = [], -inf
    for a, b in forbidden:
        if a >= at:
            out.append((at, float(a)))
        at = max(at, float(b))
    out.append((at, inf))
    return [(lo, hi) for lo, hi in out if lo <= high and hi >= low and lo <= hi]


def _valid(sizes: list[int], adj: list[set[int]], off: list[int],
           geometry: Geometry | None = None) -> bool:
    if any(o < 0 for o in off):
        return False
    for i in range(len(sizes)):
        for j in adj[i]:
            if geometry is not None and not (geometry.plain[i] and geometry.plain[j]):
                d = off[i] - off[j]
                if any(a < d < b for a, b in geometry.between(i, j)):
                    return False
            elif not (off[i] + sizes[i] <= off[j] or off[j] + sizes[j] <= off[i]):
                return False
    return True


def place(uses: list[EdgeUse], pipelines: list[list[str]]) -> list[Buffer]:
    adj = conflict_graph(uses, pipelines)
    start = best_offsets(uses, adj, pipelines)
    if len(uses) > LIMIT:
        return buffers(uses, start)
    geometry = Geometry(uses, adj, pipelines) if has_rows(uses) else None
    return buffers(uses, solve([u.size for u in uses], adj, start,
                               floor=live_bound(uses, adj), geometry=geometry).offsets)


class Milp:
    """The exact MILP up to LIMIT uses (best fit above it): offsets in one arena, over tensor
    uses under reordered layers and schedules chosen for total memory."""
    name = "optimal"
    per_tensor = True
    at_offsets = True
    reorders = True

    def place(self, uses: list[EdgeUse], pipelines: list[list[str]]) -> list[Buffer]:
        return place(uses, pipelines)
