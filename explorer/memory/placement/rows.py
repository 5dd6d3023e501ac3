"""Placement with row-by-row lifetimes ("staircases", explorer/memory/staircase.py): where two
buffers may sit relative to each other when one of them holds data only in a run of its
rows that moves with time.

Every use is, per partition, a list of segments (from step, to step, lo, hi): from step to
step (exclusive) it holds data in elements [lo, hi) of its region; a plain use is one
segment over its whole interval and region. Two uses i and j placed at o_i and o_j
collide when, at a step both hold data, [o_i + lo_i, o_i + hi_i) meets [o_j + lo_j,
o_j + hi_j), that is when d = o_i - o_j lies in the open interval (lo_j - hi_i, hi_j - lo_i).
The union of those intervals over the steps they share is what `forbidden` returns; for
two plain uses it is (-s_i, s_j), the usual rule, and uses of partitions that run in
parallel (one set of J) always get that one.

`fits` is TFLite's gap step (explorer/memory/placement/gaps.py: smallest fitting gap, or the
lowest, else above everything) over those forbidden intervals: the feasible offsets are
the closed runs between them, the "gap slack" of a run its length; for plain uses it gives
exactly the offsets of gaps.fits. This generalises the greedy-by-size planner of Pisarchyk
& Lee 2020 (as TFLite ships it) from rectangles to staircases; the buffer stays one
contiguous region at its offset, so the arena is still max(offset + size).

Speed: a placer visits each use under ten orders and fits, each time against all
its placed neighbours. `Geometry` therefore computes the forbidden intervals of a pair once
(the reverse pair is the mirror image: i and j collide at d exactly when j and i collide at
-d), keeps each use's intervals against all its neighbours as flat numpy arrays, and fits
with `fits_arrays`, the same scan as `fits` written with a running maximum. `FAST = False`
runs the plain definitions instead (tests compare the two).
"""
from __future__ import annotations

from collections import defaultdict
from itertools import groupby

import numpy as np

from explorer.memory.lifetimes import EdgeUse, group_index

FAST = True
MANY = 24        # neighbours from which numpy's per-call cost is repaid (measured, app 1)

Segment = tuple[int, int, int, int]          # from step, to step (exclusive), lo, hi


def segments(use: EdgeUse) -> dict[str, list[Segment]]:
    """Per partition, the segments of `use` in step order (adjacent equal ones merged)."""
    out: dict[str, list[Segment]] = {}
    for part, a, b in use.spans:
        if use.rows is None or len(use.spans) != 1:
            out[part] = [(a, b + 1, 0, use.size)]
            continue
        r = use.rows
        cuts = sorted({a, b + 1} | {t for t in r.first if a < t <= b}
                      | {t + 1 for t in r.last if a < t + 1 <= b})
        segs: list[Segment] = []
        for t0, t1 in zip(cuts, cuts[1:]):
            lo, hi = r.live(t0)
            if hi <= lo:
                continue
            if segs and segs[-1][1] == t0 and segs[-1][2:] == (lo * r.row, hi * r.row):
                segs[-1] = (segs[-1][0], t1, lo * r.row, hi * r.row)
            else:
                segs.append((t0, t1, lo * r.row, hi * r.row))
        out[part] = segs
    return out


def _merge(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Union of open intervals (lo, hi), sorted and disjoint (touching ones stay apart: the
    shared end point is allowed)."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(intervals):
        if hi <= lo:
            continue
        if out and lo < out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def forbidden(si: dict[str, list[Segment]], size_i: int, sj: dict[str, list[Segment]],
              size_j: int, parallel: set[tuple[str, str]]) -> list[tuple[int, int]]:
    """Open intervals of d = o_i - o_j at which uses i and j (their segments) collide."""
    out: list[tuple[int, int]] = []
    for p, a in si.items():
        for q, b in sj.items():
            if p != q:
                if (p, q) in parallel:
                    out.append((-size_i, size_j))
                continue
            x = y = 0
            while x < len(a) and y < len(b):
                a0, a1, alo, ahi = a[x]
                b0, b1, blo, bhi = b[y]
                if a0 < b1 and b0 < a1:
                    out.append((blo - ahi, bhi - alo))
                if a1 <= b1:
                    x += 1
                else:
                    y += 1
    return _merge(out)


def fits(intervals: list[tuple[int, int]]) -> tuple[int, int]:
    """Offsets >= 0 outside every forbidden open interval: (the start of the feasible run
    with least slack, the lowest one), from one scan; above them all when none is free."""
    at, choice, slack, first = 0, -1, None, -1
    for lo, hi in sorted(intervals):
        if hi <= at:
            continue
        if lo >= at:
            if first < 0:
                first = at
            if slack is None or lo - at < slack:
                choice, slack = at, lo - at
        at = max(at, hi)
    return (choice, first) if choice >= 0 else (at, at)


def fits_arrays(lo: np.ndarray, hi: np.ndarray) -> tuple[int, int]:
    """`fits` over intervals given as two integer arrays: after sorting, the scan's cursor
    before interval k is max(0, hi of every earlier one), a running maximum; a run is free
    where an interval starts at or after its cursor."""
    if lo.size == 0:
        return 0, 0
    order = np.lexsort((hi, lo))
    lo, hi = lo[order], hi[order]
    at = np.empty_like(hi)
    at[0] = 0
    np.maximum.accumulate(hi[:-1], out=at[1:])
    np.maximum(at, 0, out=at)
    free = np.flatnonzero((lo >= at) & (hi > at))
    if free.size == 0:
        end = int(max(hi.max(), 0))
        return end, end
    slack = lo[free] - at[free]
    return int(at[free[int(np.argmin(slack))]]), int(at[free[0]])


class Geometry:
    """Forbidden displacements of every conflicting pair of `uses`, computed on demand and
    kept (a placer visits each pair up to ten times)."""

    def __init__(self, uses: list[EdgeUse], adj: list[set[int]], pipelines: list[list[str]]):
        self.uses, self.adj = uses, adj
        self.sizes = [u.size for u in uses]
        self.segs = [segments(u) for u in uses]
        group = group_index(pipelines)
        self.parallel = {(p, q) for p in group for q in group if p != q and group[p] == group[q]}
        self.plain = [u.rows is None for u in uses]
        self._pairs: dict[tuple[int, int], list[tuple[int, int]]] = {}
        self._flat: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._visits: dict[int, int] = {}

    def between(self, i: int, j: int) -> list[tuple[int, int]]:
        """Forbidden o_i - o_j."""
        if self.plain[i] and self.plain[j]:
            return [(-self.sizes[i], self.sizes[j])]
        key = (i, j)
        got = self._pairs.get(key)
        if got is None:
            mirror = self._pairs.get((j, i)) if FAST else None
            got = self._pairs[key] = (
                [(-hi, -lo) for lo, hi in reversed(mirror)] if mirror is not None else
                forbidden(self.segs[i], self.sizes[i], self.segs[j], self.sizes[j], self.parallel))
        return got

    def offsets(self, i: int, off: list[int], arr: np.ndarray | None = None) -> tuple[int, int]:
        """(best fit, first fit) offsets of use i among its placed neighbours (`off`, -1 =
        not placed; `arr` the same as an array, if the caller keeps one)."""
        if FAST and len(self.adj[i]) > MANY and self._visits.get(i, 0):
            # a second visit (another order) among many neighbours: arrays pay
            who, lo, hi = self._neighbours(i)
            at = (arr if arr is not None else np.asarray(off))[who]
            placed = at >= 0
            return fits_arrays(at[placed] + lo[placed], at[placed] + hi[placed])
        self._visits[i] = 1
        return fits([(off[j] + lo, off[j] + hi) for j in self.adj[i] if off[j] >= 0
                     for lo, hi in self.between(i, j)])

    def _neighbours(self, i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Use i's forbidden intervals against every neighbour j, flat: (j, lo, hi) arrays."""
        got = self._flat.get(i)
        if got is None:
            rows = [(j, lo, hi) for j in sorted(self.adj[i]) for lo, hi in self.between(i, j)]
            flat = np.array(rows, dtype=np.int64).reshape(-1, 3)
            got = self._flat[i] = (flat[:, 0], flat[:, 1], flat[:, 2])
        return got


def has_rows(uses: list[EdgeUse]) -> bool:
    return any(u.rows is not None for u in uses)


def alive_events(uses: list[EdgeUse]) -> dict[str, list[tuple[int, int]]]:
    """Per partition, (step, +-elements) events of data held: a plain use for its whole
    interval, a use with rows row by row."""
    events: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for u in uses:
        if u.rows is not None and len(u.spans) == 1:
            ev, row = events[u.spans[0][0]], u.rows.row
            ev += [(f, row * len(list(g))) for f, g in groupby(u.rows.first)]
            ev += [(t + 1, -row * len(list(g))) for t, g in groupby(u.rows.last)]
            continue
        for p, a, b in u.spans:
            events[p] += [(a, u.size), (b + 1, -u.size)]
    return events
