"""Pictures of a plan's memory: one SVG per partition, the arena over the schedule.

x is the partition's flat schedule (one column per firing, step 0 on the left), y the arena's
offset in bytes (0 at the top). Each stored tensor is one rectangle: its buffer's offset, its
own bytes tall, from the first to the last step it holds data (explorer.memory.lifetimes:
a tensor alive across partitions is drawn in each partition it spans). A tensor held as a ring
of rows (fewer rows than the whole tensor: a by-parts producer or consumer) is drawn dashed
and has class "ring"; a whole tensor stored row after row is drawn pale, with each row's own
life (class "row") inside it, since other tensors may use a row's bytes before it is written
and after its last read. Every rectangle carries what it stands for as data- attributes:
data-tensor (the stored edge names, space separated), data-buffer (the index of plan.json's
buffer), data-offset and data-bytes (bytes), data-first and data-last (steps, inclusive), so
the report can be checked against plan.json and read by scripts.

Buffers of a shared-objects plan have no offsets: they are drawn one after another, as the
plan's memory counts them (the sum of their sizes).
"""
from __future__ import annotations

import html
from dataclasses import dataclass
from math import prod

from csdf.model import EdgeId
from explorer.app.units import format_bytes

WIDTH, HEIGHT, LEFT, TOP, BOTTOM = 640, 260, 70, 14, 34
COLORS = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1",
          "#ff9da7", "#9c755f", "#bab0ac")


@dataclass(frozen=True)
class Block:
    """One stored tensor's rectangle in one partition's picture."""
    tensor: tuple[str, ...]        # the plan's edge names stored in it
    buffer: int                    # index in plan.json's buffers
    offset: int                    # bytes
    size: int                      # bytes
    first: int                     # steps of the partition's flat schedule, inclusive
    last: int
    ring: bool
    # a whole tensor stored by rows (explorer/memory/staircase.py): bytes per row, and each
    # row's first and last step; other tensors may use a row's bytes outside them
    row_bytes: int = 0
    row_steps: tuple[tuple[int, int], ...] = ()


def blocks(plan, derived) -> dict[str, list[Block]]:
    """Partition name -> its rectangles, from the plan (explorer.plan.model.Plan: offsets,
    bytes, shapes) and its derivation (when each tensor holds data). Partitions with no
    stored tensor map to []."""
    data = plan.data_bytes
    uses = {u.name: u for u in derived.uses}
    out: dict[str, list[Block]] = {p.name: [] for p in plan.partitions}
    start = 0
    for i, (buf, placed) in enumerate(zip(plan.buffers, derived.buffers)):
        offset = buf.offset if buf.offset is not None else start
        start += buf.bytes
        for name in placed.edges:
            use = uses[name]
            stored = use.stored
            edge = plan.edges[EdgeId.parse(stored[0])]
            ring = edge.elements is not None and edge.shape is not None and \
                edge.elements < prod(edge.shape)
            rows = use.rows
            for part, first, last in use.spans:
                out.setdefault(part, []).append(Block(
                    tuple(stored), i, int(offset), int(use.size) * data, int(first), int(last),
                    ring, int(rows.row) * data if rows else 0,
                    tuple(zip(rows.first, rows.last)) if rows else ()))
    return out


def _ticks(extent: int) -> list[int]:
    """Five offsets from 0 to the extent, for the y axis's labels."""
    return sorted({round(extent * k / 4) for k in range(5)})


def partition_svg(name: str, rects: list[Block], steps: int, extent: int) -> str:
    """One partition's picture: `steps` columns, `extent` bytes of arena (the y scale, shared
    by every partition of one plan so pictures compare)."""
    esc = html.escape
    sx = WIDTH / max(steps, 1)
    sy = HEIGHT / max(extent, 1)
    items = []
    for k, b in enumerate(sorted(rects, key=lambda b: (b.offset, b.first, b.tensor))):
        label = " ".join(b.tensor)
        items.append(
            f'<rect class="tensor{" ring" if b.ring else ""}" x="{LEFT + b.first * sx:.3f}" '
            f'y="{TOP + b.offset * sy:.3f}" width="{(b.last - b.first + 1) * sx:.3f}" '
            f'height="{max(b.size * sy, 0.5):.3f}" fill="{COLORS[b.buffer % len(COLORS)]}"'
            + (' fill-opacity="0.55" stroke-dasharray="3 2"' if b.ring else
               ' fill-opacity="0.15"' if b.row_steps else ' fill-opacity="0.8"')
            + f' stroke="#333" stroke-width="0.4" data-tensor="{esc(label)}" '
            f'data-buffer="{b.buffer}" data-offset="{b.offset}" data-bytes="{b.size}" '
            f'data-first="{b.first}" data-last="{b.last}"><title>{esc(label)}: '
            f'{b.size} B at {b.offset}, steps {b.first}-{b.last}'
            f'{" (ring of rows)" if b.ring else " (stored by rows)" if b.row_steps else ""}'
            f'</title></rect>')
        items += [f'<rect class="row" x="{LEFT + a * sx:.3f}" y="{TOP + (b.offset + r * b.row_bytes) * sy:.3f}" '
                  f'width="{(z - a + 1) * sx:.3f}" height="{max(b.row_bytes * sy, 0.2):.3f}" '
                  f'fill="{COLORS[b.buffer % len(COLORS)]}" fill-opacity="0.8"/>'
                  for r, (a, z) in enumerate(b.row_steps)]
    ticks = "".join(
        f'<text x="{LEFT - 4}" y="{TOP + t * sy + 3:.1f}" text-anchor="end" font-size="9">'
        f'{format_bytes(t)}</text>' for t in _ticks(extent))
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="memory" data-partition="{esc(name)}" '
            f'data-steps="{steps}" data-extent="{extent}" width="{LEFT + WIDTH + 10}" '
            f'height="{TOP + HEIGHT + BOTTOM}" viewBox="0 0 {LEFT + WIDTH + 10} '
            f'{TOP + HEIGHT + BOTTOM}">'
            f'<rect class="arena" x="{LEFT}" y="{TOP}" width="{WIDTH}" height="{HEIGHT}" '
            f'fill="none" stroke="#999"/>{ticks}{"".join(items)}'
            f'<text x="{LEFT + WIDTH / 2}" y="{TOP + HEIGHT + 24}" text-anchor="middle" '
            f'font-size="11">{esc(name)}: {steps} steps of the schedule</text></svg>')


def plan_pictures(plan, derived) -> dict[str, str]:
    """Partition name -> its SVG, every picture on the scale of the plan's whole arena."""
    per = blocks(plan, derived)
    extent = max([b.offset + b.size for rects in per.values() for b in rects] + [1])
    return {p.name: partition_svg(p.name, per.get(p.name, []), len(plan.firings[p.name]), extent)
            for p in plan.partitions}
