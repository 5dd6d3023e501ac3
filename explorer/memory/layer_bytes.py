"""Buffers at each tensor's own bytes, for plans whose layers run at different precisions
(explorer/app/layer_precision.py).

The memory model (explorer/memory/buffers.py) keeps sizes in elements and multiplies by one
`data_bytes` at the end, which is right while every tensor has the same width. With
precisions per layer two tensors of equal elements may differ in bytes, and a buffer shared
by both must hold the wider one. So a per-layer derivation turns each edge use into bytes
before placement (size and row size times its tensor's `data_bytes`), places in bytes, and
counts the arena with a `data_bytes` of 1; M_par is the sum of each layer's parameters at its
`par_bytes` (`LayerPrecisions.param_bytes`).

Schedules chosen for total memory (explorer/memory/policies.py) still compare candidates in
elements: the choice among them is the same as at one precision.
"""
from __future__ import annotations

from dataclasses import replace

from csdf.model import EdgeId
from explorer.app.layer_precision import LayerPrecisions
from explorer.memory.lifetimes import EdgeUse, Rows


def width(app, layers: LayerPrecisions, use: EdgeUse) -> int:
    """Bytes per element of the tensor `use` stores (its producer's precision)."""
    e = EdgeId.parse(use.name)
    return layers.tensor(app.cnns[e.cnn], e.cnn, e.src).data_bytes


def in_bytes(app, uses: list[EdgeUse], layers: LayerPrecisions) -> list[EdgeUse]:
    """`uses` with sizes (and row sizes) in bytes, each at its tensor's width."""
    out = []
    for u in uses:
        w = width(app, layers, u)
        rows = None if u.rows is None else Rows(u.rows.row * w, u.rows.first, u.rows.last)
        out.append(replace(u, size=int(u.size) * w, rows=rows))
    return out
