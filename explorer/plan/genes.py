"""The chromosome: what each gene means, in one place (the search only sees integer ranges).

One granularity gene per layer that Table 2 lets go by parts, CNN by CNN in the app's order
and each CNN's topological order. A gene is an index into its layer's ladder of output rows
per phase, ordered from whole to row by row:

    ladder(H) = (H, 2^j, ..., 4, 2, 1)   with 2^j < H, one entry per distinct phase count

Index 0 is the whole layer (one phase), the last index the paper's row by row (H phases);
between them a layer runs in Φ = ceil(H / k) phases of ceil(H / Φ) <= k rows (csdf.parts).
The paper's Equation 6 is the special case of the two-entry ladder (H, 1), which
`granularity: binary` selects: there gene 0 is whole and gene 1 by parts, exactly as in the
paper's chromosome. All-zeros is the reuse-only plan in both spaces.

A GeneSpace is the `Space` of explorer/search/problem.py: the search takes `upper` (each
gene's largest value), `labels`, `seeds` and `staged`; the evaluation `decode`.
"""
from __future__ import annotations

from dataclasses import dataclass

from csdf.parts import can_split, phases_of_rows
from explorer.app.model import GRANULARITIES

PREFIX_SHARES = (1 / 8, 1 / 4, 1 / 2, 3 / 4)   # binary seeds: this share of each CNN's genes by parts
Phases = dict[str, dict[str, int]]


def ladder(height: int, granularity: str = "ladder") -> tuple[int, ...]:
    """Rows per phase a layer of `height` output rows may take, whole first."""
    height = int(height)
    if granularity == "binary":
        return (height, 1)           # H = 1: a neutral gene, as in the paper's chromosome
    rungs, seen = [], set()
    k = height
    while True:
        n = phases_of_rows(height, k)
        if n not in seen:
            seen.add(n)
            rungs.append(-(-height // n))        # the balanced k for that phase count
        if k == 1:
            break
        k = 1 << (k.bit_length() - 1) if k & (k - 1) else k // 2   # next power of 2 below
    return tuple(rungs)


@dataclass(frozen=True)
class GeneSpace:
    """The genes of one application: which layer each is, and its ladder."""
    layers: tuple[tuple[str, str], ...]          # (cnn, layer), gene order
    ladders: tuple[tuple[int, ...], ...]         # rows per phase for each gene value
    phase_counts: tuple[tuple[int, ...], ...]    # Φ for each gene value
    granularity: str = "ladder"

    @property
    def upper(self) -> list[int]:
        """Largest value of each gene (its row-by-row end)."""
        return [len(r) - 1 for r in self.ladders]

    @property
    def labels(self) -> list[str]:
        return [f"{c}.{l}" for c, l in self.layers]

    @property
    def staged(self) -> bool:
        """Ladder genes with a rung between whole and row by row: the search runs the
        paper's binary search first (explorer.search.staged)."""
        return self.granularity == "ladder" and any(u > 1 for u in self.upper)

    def whole(self) -> tuple[int, ...]:
        return (0,) * len(self.layers)

    def row_by_row(self) -> tuple[int, ...]:
        return tuple(self.upper)

    def binary(self, bits) -> tuple[int, ...]:
        """The paper's binary chromosome in this space: 0 whole, 1 row by row (Eq. 6)."""
        return tuple(top if b else 0 for b, top in zip(bits, self.upper))

    def seeds(self) -> list[tuple[int, ...]]:
        """Chromosomes the search starts from besides all-whole and all-row-by-row (none
        for binary genes, so the paper's search is unchanged). Binary ones (Eq. 6) that
        hold the memory end of the front: in each CNN the first 1/8, 1/4, 1/2, 3/4 of the
        genes row by row and the rest whole (the large early tensors go by parts first);
        and ones spread along the front: every layer in 2^r parts (rung r, or row by row
        when its ladder is shorter), r = 1, 2, ..., one per rung of the longest ladder; then
        the same prefixes in parts of k = 1, 2, 4, ... rows (`at_rows`, the profile's ladder
        runs). Why the last: where a layer by parts costs session state of its own
        (measured, explorer/throughput/runtime_costs.py), parts save memory only as a chain of early
        layers in parts of several rows (MobileNetV2 on ONNX Runtime: its first 10 layers in
        parts of 4 rows, 19.6 MiB planned against 21.3 whole; ResNet-50's first 20, 110.2
        against 111.7), which neither a row-by-row prefix nor a uniform rung holds, nor
        one-gene mutations reach."""
        if self.granularity == "binary" or not self.layers:
            return []
        by_cnn: dict[str, list[int]] = {}
        for i, (cnn, _) in enumerate(self.layers):
            by_cnn.setdefault(cnn, []).append(i)
        out: list[tuple[int, ...]] = []
        prefixes = [{i for idx in by_cnn.values() for i in idx[:max(1, int(len(idx) * share))]}
                    for share in PREFIX_SHARES]
        for first in prefixes:
            out.append(self.binary([i in first for i in range(len(self.layers))]))
        for rung in range(1, max(self.upper)):
            out.append(tuple(min(rung, top) for top in self.upper))
        tallest = max(r[0] for r in self.ladders)
        for first in prefixes:          # the memory end where parts pay only in a chain
            k = 1
            while k < tallest:
                out.append(tuple(self.at_rows(i, k) if i in first else 0
                                 for i in range(len(self.layers))))
                k *= 2
        known = {self.whole(), self.row_by_row()}
        return [g for g in dict.fromkeys(out) if g not in known]

    def at_rows(self, i: int, k: int) -> int:
        """Gene `i`'s value for parts of at most `k` rows: its first rung of k rows or
        fewer (its last, row by row, when none)."""
        return next((g for g, rows in enumerate(self.ladders[i]) if g and rows <= k), self.upper[i])

    def decode(self, genes, base: Phases) -> Phases:
        """{cnn: {layer: Φ}} for every layer: `base` (every layer 1) with the genes' Φ."""
        if len(genes) != len(self.layers):
            raise ValueError(f"expected {len(self.layers)} genes, got {len(genes)}")
        out = {cnn: dict(ph) for cnn, ph in base.items()}
        for (cnn, layer), g, counts in zip(self.layers, genes, self.phase_counts):
            g = int(g)
            if not 0 <= g < len(counts):
                raise ValueError(f"gene {cnn}.{layer}: {g} is outside 0..{len(counts) - 1}")
            out[cnn][layer] = counts[g]
        return out

    def rows(self, phases: Phases, heights: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
        """Output rows per phase of every layer under `phases` (whole: its height)."""
        return {cnn: {layer: -(-heights[cnn][layer] // n) for layer, n in ph.items()}
                for cnn, ph in phases.items()}


def gene_space(app, granularity: str = "ladder") -> GeneSpace:
    """The GeneSpace of an application (explorer.app.model.Application)."""
    if granularity not in GRANULARITIES:
        raise ValueError(f"granularity must be one of {GRANULARITIES}, got {granularity!r}")
    layers, ladders, counts = [], [], []
    for name, cnn in app.cnns.items():
        for layer in cnn.order():
            lay = cnn.layer(layer)
            if not can_split(lay):
                continue
            height = int(lay.output_shape[2])
            rungs = ladder(height, granularity)
            layers.append((name, layer))
            ladders.append(rungs)
            counts.append(tuple(phases_of_rows(height, k) for k in rungs))
    return GeneSpace(tuple(layers), tuple(ladders), tuple(counts), granularity)
