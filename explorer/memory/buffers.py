"""The memory model of the paper (Section 2.4, Equations 1-4) and the plain buffer type.

M = M_par + M_buf (Eq. 1). M_par = stored parameters x par_bytes (Eq. 2), summed over the
CNNs. M_buf = sum over buffers of size x data_bytes (Eq. 3), where a buffer's size is the
largest edge it ever holds (Eq. 4). Sizes are kept in elements until the last moment so the
paper's element figures (Tables 1, 8, 9) can be checked exactly.

The runtime's own bytes (workspace, sessions, bindings, outputs), which a deployment adds
to these, are explorer/throughput/runtime_costs.py's.

Parameters are the ones actually stored after BatchNorm folding (`CNN.param_count`): that is
what a TensorRT engine keeps and what reproduces the paper's MobileNetV2 figures (see
docs/memory.md).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from csdf.model import CNN
from explorer.memory.cache import RunCache


@dataclass
class Buffer:
    """One memory buffer: the edge uses it holds (names, in the order they were placed),
    its size in elements (the largest of them) and, when an offset planner placed it
    (explorer.memory.placement), its offset in the arena in elements; None = shared objects laid
    one after another."""
    edges: list[str] = field(default_factory=list)
    size: int = 0
    offset: int | None = None


def param_elements(cnn: CNN, cache: RunCache | None = None) -> int:
    """Parameters stored for `cnn` (folded), kept in `cache`: the search asks often."""
    if cache is None:
        return int(cnn.param_count)
    kept = cache.of(cnn)
    if kept.params is None:
        kept.params = int(cnn.param_count)
    return kept.params


def buffer_elements(buffers: Iterable[Buffer]) -> int:
    """Arena elements: the sum of buffer sizes (the bracket of Eq. 3) for shared objects;
    the largest offset + size once an offset planner placed every buffer."""
    buffers = list(buffers)
    if buffers and all(b.offset is not None for b in buffers):
        return max(b.offset + b.size for b in buffers)
    return sum(b.size for b in buffers)


def arena_offsets(buffers: list[Buffer]) -> list[int]:
    """Offset of every buffer in elements: its own, or one after another (shared objects)."""
    if buffers and all(b.offset is not None for b in buffers):
        return [int(b.offset) for b in buffers]
    out, at = [], 0
    for b in buffers:
        out.append(at)
        at += b.size
    return out


def memory_bytes(app, buffers: Iterable[Buffer], cache: RunCache | None = None,
                 layers=None) -> tuple[int, int, int]:
    """(param_bytes, buffer_bytes, total) of `app` with `buffers` (Eq. 1-4). With `layers`
    (explorer.app.layer_precision.LayerPrecisions) the buffers are sized in bytes already
    (explorer/memory/layer_bytes.py) and each layer's parameters count at its own bytes."""
    if layers is not None:
        params = layers.param_bytes(app.cnns)
        bufs = buffer_elements(buffers)
        return params, bufs, params + bufs
    params = sum(param_elements(cnn, cache) for cnn in app.cnns.values()) * app.precision.par_bytes
    bufs = buffer_elements(buffers) * app.precision.data_bytes
    return params, bufs, params + bufs


def naive(uses) -> list[Buffer]:
    """No reuse: one buffer per edge use (the paper's Table 1; a double-buffered pipeline
    edge is two uses and so two buffers)."""
    return [Buffer([u.name], u.size) for u in uses]
