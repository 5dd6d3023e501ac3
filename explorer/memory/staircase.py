"""Row-by-row lifetimes of whole tensors stored by rows (docs/memory.md,
"Row-by-row lifetimes").

A plan holds an edge whole when its ring would need every row (its producer is whole and
its consumer runs by parts, as for the graph input read by the first convolution; or its
producer runs by parts and its consumer is whole, as at the end of a by-parts segment).
The buffer is one contiguous region stored rows outermost (deploy's "hncw" layout, row r
at slot r), yet it does not hold data all the time: row r is written by the producer
firing that computes it and is dead once the consumer has passed the last window that
reads it. Offset planners that see only rectangles (size x first..last step: TFLite's
greedy-by-size, Pisarchyk & Lee 2020; Liberis & Lane's tensor lifetimes) keep the whole
region from the first write to the last read. Here each row keeps its own [first, last]
step, the same rule `csdf.partition_analysis.edge_occupancy` uses to size rings (a row is
freed at the end of the consumer phase after which neither it nor an earlier row is read
again), so the rows alive at a step form one run [lo, hi) of the region: a "staircase".
explorer/memory/placement/rows.py places such buffers; the buffer itself stays contiguous at one
offset, so deployment views and part models are unchanged.
"""
from __future__ import annotations

from itertools import accumulate

from csdf.model import CNN, edge_name
from csdf.to_csdf import edge_windows, production_rates, token_size
from explorer.memory.lifetimes import Rows

Edge = tuple[str, str]


def edge_rows(prod: list[int], cons: list[int], windows: list[range], height: int
              ) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(first, last) step of every row of one edge: `prod` the producer's steps (one per
    phase, writing production_rates' rows), `cons` the consumer's steps, `windows[p]` the
    rows its phase p reads. Rows written by a whole producer share its one step."""
    rates = production_rates(height, len(prod))
    first = [step for step, n in zip(prod, rates) for _ in range(n)]
    read = [-1] * height
    for step, rows in zip(cons, windows):
        for r in rows:
            if 0 <= r < height:
                read[r] = step
    last = [max(a, b) for a, b in zip(first, accumulate(read, max))]
    return tuple(first), tuple(last)


def row_lives(cnn: CNN, layers: list[str], phases: dict[str, int], firings: list[str],
              rows: dict[Edge, int], tensors: bool = False,
              windows: dict[Edge, list[range]] | None = None) -> dict[Edge, Rows]:
    """Rows of every edge inside the partition `layers` that is held whole (`rows[e]` its
    height), stored by rows (one end by parts, height > 1), under the schedule `firings`.
    `tensors`: one buffer per tensor (explorer/memory/tensors.py), stored by rows when its
    producer or any reader runs by parts, so every edge of such a tensor gets its rows.
    `windows`: csdf.to_csdf.edge_windows of the partition, when the caller has them."""
    steps: dict[str, list[int]] = {}
    for t, name in enumerate(firings):
        steps.setdefault(name, []).append(t)
    inside = set(layers)
    order = [x for x in cnn.order() if x in inside]
    ph = {x: int(phases.get(x, 1)) for x in order}
    out: dict[Edge, Rows] = {}
    by_rows = {src for src, dst in rows if ph.get(src, 1) > 1 or ph.get(dst, 1) > 1} \
        if tensors else set()
    for (src, dst), held in rows.items():
        height = int(cnn.edge_shape(src, dst)[2])
        if held != height or height <= 1 or (ph.get(src, 1) == 1 and ph.get(dst, 1) == 1
                                             and src not in by_rows):
            continue
        if windows is None:
            windows = edge_windows(cnn, order, ph)
        first, last = edge_rows(steps[src], steps[dst], windows[(src, dst)], height)
        out[(src, dst)] = Rows(token_size(cnn, src, dst), first, last)
    return out


def app_row_lives(app, firings: dict[str, list[str]], phases: dict[str, dict[str, int]],
                  rows: dict[str, dict[Edge, int]], tensors: bool = False) -> dict[str, Rows]:
    """Edge name -> Rows over every partition of `app` (`rows`: per partition, internal
    edge -> rows held)."""
    out: dict[str, Rows] = {}
    for part in app.partitions:
        cnn = app.cnns[part.cnn]
        lives = row_lives(cnn, part.layers, phases.get(part.cnn, {}), firings[part.name],
                          rows.get(part.name, {}), tensors)
        for (src, dst), life in lives.items():
            out[edge_name(cnn.name, src, dst)] = life
    return out
