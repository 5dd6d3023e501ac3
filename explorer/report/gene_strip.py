"""A chromosome as a strip of cells, one per gene, and the one notation of layers by parts.

Notation (everywhere a plan's granularity is written: the summary, report.html, pareto.csv,
`explore csdf`): `layer` is a layer run whole; `layer:k` runs it by parts of k output rows per
phase (csdf.parts: ceil(H / k) phases). In a strip a whole layer is a pale cell and a layer by
parts a darker one, the darker the fewer rows per part; each cell carries data-layer and
data-rows (0 = whole) and a tooltip in the notation.

>>> layer_notation("conv1", 0), layer_notation("conv1", 4)
('conv1', 'conv1:4')
"""
from __future__ import annotations

import html
import math

CELL, TALL = 7, 14


def layer_notation(layer: str, rows: int) -> str:
    """`layer` whole (rows 0), `layer:k` by parts of k rows."""
    return f"{layer}:{rows}" if rows else layer


def _shade(rows: int, height: int) -> str:
    if not rows:
        return "#e8eef5"
    depth = 1 - math.log2(max(rows, 1)) / max(math.log2(max(height, 2)), 1)   # 1 = row by row
    level = int(180 - 150 * depth)
    return f"rgb({level // 3},{level // 2 + 20},{level + 40})"


def gene_strip(cells: list[tuple[str, int, int]]) -> str:
    """An inline SVG of one chromosome: `cells` = (layer label, rows per part or 0 for whole,
    the layer's height in rows) in gene order."""
    esc = html.escape
    rects = "".join(
        f'<rect x="{i * CELL}" y="0" width="{CELL - 1}" height="{TALL}" '
        f'fill="{_shade(rows, height)}" data-layer="{esc(label)}" data-rows="{rows}">'
        f'<title>{esc(layer_notation(label, rows))}</title></rect>'
        for i, (label, rows, height) in enumerate(cells))
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="genes" width="{len(cells) * CELL}" '
            f'height="{TALL}">{rects}</svg>')


# a precision gene's cell (precision: auto, explorer/plan/precision_genes.py): the fewer bytes,
# the warmer
PRECISION_FILL = {"fp32": "#e8eef5", "fp16": "#f2b45a", "int8": "#c4452f"}


def precision_strip(cells: list[tuple[str, str]]) -> str:
    """An inline SVG of each layer's precision: `cells` = (layer label, fp32|fp16|int8), in
    gene order; each cell carries data-layer and data-precision and a tooltip "layer: int8"."""
    esc = html.escape
    rects = "".join(
        f'<rect x="{i * CELL}" y="0" width="{CELL - 1}" height="{TALL}" '
        f'fill="{PRECISION_FILL[p]}" data-layer="{esc(label)}" data-precision="{esc(p)}">'
        f'<title>{esc(label)}: {esc(p)}</title></rect>'
        for i, (label, p) in enumerate(cells))
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="precisions" '
            f'width="{len(cells) * CELL}" height="{TALL}">{rects}</svg>')
