"""One buffer per tensor: the edge uses of one produced tensor merged into one use.

The paper's memory model (Section 2.4) stores every (producer, consumer) edge in its own
buffer, so a tensor read by k layers (a residual input, a DenseNet feature map, an
Inception branch point) is stored k times. Per-tensor planners (TFLite's greedy-by-size,
Pisarchyk & Lee 2020; ONNX Runtime's memory patterns; TVM's USMP) store it once, alive from
its producer's first firing to its last reader's last. This module makes that use out of
the edge uses of explorer.memory.lifetimes:

- spans: per partition, the union of the edges' step intervals (a tensor read in its own
  partition and in a later stage lives from its producer to the end of its partition and
  from the start of the later one, as the crossing edge does);
- size: the edges' largest (the analysis gives every edge of one tensor the same ring,
  csdf/shared_rings.py, so they agree);
- rows: the staircase of a tensor stored by rows is its edges' staircase with each row
  freed after its last reader (elementwise max of the `last` steps); any edge without one
  makes the tensor a plain rectangle;
- a tensor with an edge double-buffered across a pipeline (copies "(1)" and "(2)") is
  double-buffered once: copy k holds every edge of the tensor, each under its name with
  "(k)", and every reader (inside the producer's partition too) reads the copy of its frame.

The use is named "cnn.src->*" (with "(k)" for a copy) and lists the plan's edge names it
stores in `EdgeUse.edges`. `--placement shared-objects` keeps the paper's per-edge uses
(explorer.plan.derive decides); the CSDF view keeps one channel per edge either way.
"""
from __future__ import annotations

from csdf.model import EdgeId, edge_name
from explorer.memory.lifetimes import EdgeUse, Rows, Span


def tensor_name(cnn: str, src: str, copy: int = 0) -> str:
    """The use of `src`'s output stored once for all its readers: "cnn.src->*" (csdf.model.EdgeId)."""
    return str(EdgeId(cnn, src, "*", copy))


def merged_spans(uses: list[EdgeUse]) -> tuple[Span, ...]:
    """Per partition (in order of first appearance) the union of the uses' intervals."""
    out: dict[str, list[int]] = {}
    for u in uses:
        for p, a, b in u.spans:
            got = out.get(p)
            if got is None:
                out[p] = [a, b]
            else:
                got[0], got[1] = min(got[0], a), max(got[1], b)
    return tuple((p, a, b) for p, (a, b) in out.items())


def merged_rows(uses: list[EdgeUse], spans: tuple[Span, ...]) -> Rows | None:
    """The staircase of one tensor read by every use: rows written when the first use has
    them written, freed after the last use's last read; None unless every use has one over
    the same single span's rows."""
    if len(spans) != 1 or any(u.rows is None for u in uses):
        return None
    first = uses[0].rows
    if any(u.rows.row != first.row or len(u.rows.first) != len(first.first) for u in uses):
        return None
    if len(uses) == 1:
        return first
    return Rows(first.row, tuple(map(min, *(u.rows.first for u in uses))),
                tuple(map(max, *(u.rows.last for u in uses))))


def merge(name: str, uses: list[EdgeUse], edges: tuple[str, ...]) -> EdgeUse:
    """One use named `name` storing `edges`, alive whenever any of `uses` is."""
    spans = merged_spans(uses)
    return EdgeUse(name, uses[0].cnn, max(u.size for u in uses), spans,
                   merged_rows(uses, spans), edges)


def tensor_uses(uses: list[EdgeUse]) -> list[EdgeUse]:
    """The per-tensor uses of per-edge `uses` (explorer.memory.lifetimes.edge_uses), in the
    order of each tensor's first edge (Algorithm 1's visiting order)."""
    groups: dict[tuple[str, str], list[tuple[EdgeUse, str, int]]] = {}
    for u in uses:
        e = EdgeId.parse(u.name)
        groups.setdefault((e.cnn, e.src), []).append((u, e.dst, e.copy))
    out: list[EdgeUse] = []
    for (cnn, src), members in groups.items():
        dsts = list(dict.fromkeys(dst for _, dst, _ in members))
        if len(dsts) == 1:                    # one reader: the edge's own use(s)
            out.extend(u for u, _, _ in members)
            continue
        if all(copy == 0 for _, _, copy in members):
            out.append(merge(tensor_name(cnn, src), [u for u, _, _ in members],
                             tuple(u.name for u, _, _ in members)))
            continue
        plain = [u for u, _, copy in members if copy == 0]
        for k in (1, 2):
            mine = plain + [u for u, _, copy in members if copy == k]
            out.append(merge(tensor_name(cnn, src, k), mine,
                             tuple(edge_name(cnn, src, d, k) for d in dsts)))
    return out
