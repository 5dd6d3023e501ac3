"""MAFAT's memory predictor (its Algorithm 1) and configuration search (its Algorithm 2).

Farley & Gerstlauer, "MAFAT: Memory-Aware Fusing and Tiling of Neural Networks for
Accelerated Edge Inference" (UT-CERC-21-01 / arXiv 2107.06960), Section 4. A configuration
N1xN1/cut/N2xN2 fuses layers 0..cut-1 into one group tiled N1 x N1 and layers cut..n-1 into a
second group tiled N2 x N2 (no cut: one group). Algorithm 1 predicts a group's peak as the
largest, over its tiles t and layers l (tile regions from DeepThings' grid and traversal,
csdf/tiling.py), of

    scratch + output + 2 x input,   scratch = w_out * h_out * c_in * F_l^2 / S_l

(Darknet's im2col workspace), in elements of `data_bytes`; the prediction of a configuration
is the largest over its groups, plus the weights of the fused layers (resident throughout)
and a constant `bias` (31 MB on the paper's Raspberry Pi 3). Algorithm 2 walks cuts
{no cut, 12, 8} and first-group tilings 1x1 .. 5x5 with the second group at 2x2, and returns
the first configuration predicted under the limit, or the most even one (5x5/8/2x2).

Where the paper leaves a detail open, `Options` holds the choice; docs/tiling.md lists what
each changes. Defaults: weights of all fused layers once per Darknet network instance (the
authors' code, JacksonFarley/DeepThings `examples/test.c`, loads `yolo_cut.cfg` and its
weights into one device context per layer group), MB = 2^20 bytes, Algorithm 2's loops in
the printed order (cuts outer).
"""
from __future__ import annotations

from dataclasses import dataclass

from csdf.model import CNN, INPUT
from csdf.tiling import Tile, axes, tile_group

MB = 1 << 20
NO_CUT = None
PAPER_BIAS = 31 * MB
PAPER_CUTS: tuple[int | None, ...] = (NO_CUT, 12, 8)  # Algorithm 2's {16, 12, 8}; 16 = no cut
PAPER_TILES = (1, 2, 3, 4, 5)
PAPER_SECOND = 2                                       # LG_2: the second group at 2x2
PAPER_FALLBACK = (5, 8, 2)                             # "5x5 into 2x2 with a cut at layer 8"


@dataclass(frozen=True)
class Config:
    """N1 x N1 tiles on layers 0..cut-1, N2 x N2 on cut..n-1; cut None = one group."""

    n1: int
    cut: int | None = NO_CUT
    n2: int = PAPER_SECOND

    def __str__(self) -> str:
        top = f"{self.n1}x{self.n1}"
        return f"{top}/NoCut" if self.cut is None else f"{top}/{self.cut}/{self.n2}x{self.n2}"


@dataclass(frozen=True)
class Options:
    """The predictor's constants and the details the paper leaves open (docs/tiling.md)."""

    bias_bytes: int = PAPER_BIAS
    data_bytes: int = 4
    weight_copies: str = "per-network"   # "per-network" (x2 with a cut), "once", "none"
    pool_scratch: bool = True            # F^2/S scratch for pools too (Algorithm 1 as printed)
    order: str = "published"             # "published": cuts outer; "tiling-first": tiles outer


@dataclass(frozen=True)
class GroupPeak:
    """Algorithm 1's maximum for one group and where it occurs (tile i, j and layer)."""

    elements: int
    tile: tuple[int, int]
    layer: str


@dataclass(frozen=True)
class Prediction:
    config: Config
    peaks: tuple[GroupPeak, ...]
    weight_bytes: int
    bias_bytes: int
    data_bytes: int

    @property
    def tile_bytes(self) -> int:
        return max(p.elements for p in self.peaks) * self.data_bytes

    @property
    def bytes(self) -> int:
        return self.tile_bytes + self.weight_bytes + self.bias_bytes


def chain(cnn: CNN) -> list[str]:
    """The CNN's layers in order without its Input: MAFAT's layers 0..n-1."""
    return [n for n in cnn.order() if cnn.layer(n).op != INPUT]


def tile_layer_elements(cnn: CNN, tile: Tile, k: int, pool_scratch: bool = True) -> int:
    """Algorithm 1, lines 7-11, for layer k of one tile: scratch + output + 2 x input."""
    lt = tile.layers[k]
    layer = cnn.layer(lt.layer)
    c_in = int(cnn.edge_shape(layer.inputs[0], layer.name)[1])
    c_out = int(layer.output_shape[1])
    h_out, w_out = lt.out_h.size, lt.out_w.size
    ah, _ = axes(layer)
    scratch = 0
    if layer.op == "Conv" or (pool_scratch and layer.op in ("MaxPool", "AveragePool")):
        scratch = w_out * h_out * c_in * ah.kernel ** 2 // ah.stride
    return scratch + w_out * h_out * c_out + 2 * lt.in_h.size * lt.in_w.size * c_in


def predict_group(cnn: CNN, layers: list[str], n: int, m: int, pool_scratch: bool = True) -> GroupPeak:
    """Algorithm 1 (predictLayerGroup) without the bias: the largest tile-layer count."""
    best = GroupPeak(-1, (0, 0), "")
    for tile in tile_group(cnn, layers, n, m):
        for k in reversed(range(len(layers))):     # from the bottom layer up, as printed
            e = tile_layer_elements(cnn, tile, k, pool_scratch)
            if e > best.elements:
                best = GroupPeak(e, (tile.i, tile.j), layers[k])
    return best


def groups(layers: list[str], config: Config) -> list[tuple[list[str], int]]:
    """The configuration's groups with their tiling: [(layers, N)]."""
    if config.cut is None:
        return [(layers, config.n1)]
    if not 0 < config.cut < len(layers):
        raise ValueError(f"cut {config.cut} outside 1..{len(layers) - 1}")
    return [(layers[:config.cut], config.n1), (layers[config.cut:], config.n2)]


def predict(cnn: CNN, config: Config, options: Options = Options(), layers: list[str] | None = None) -> Prediction:
    """predictMem of Algorithm 2: the largest group peak + fused weights + bias."""
    layers = chain(cnn) if layers is None else layers
    parts = groups(layers, config)
    peaks = tuple(predict_group(cnn, g, n, n, options.pool_scratch) for g, n in parts)
    params = sum(cnn.layer(name).param_count for name in layers)
    copies = {"none": 0, "once": 1, "per-network": len(parts)}[options.weight_copies]
    return Prediction(config, peaks, params * options.data_bytes * copies, options.bias_bytes,
                      options.data_bytes)


def search_order(cuts=PAPER_CUTS, tiles=PAPER_TILES, second: int = PAPER_SECOND,
                 order: str = "published") -> list[Config]:
    """The configurations Algorithm 2 tries, in its order (cuts outer as printed)."""
    if order == "published":
        return [Config(t, c, second) for c in cuts for t in tiles]
    if order == "tiling-first":
        return [Config(t, c, second) for t in tiles for c in cuts]
    raise ValueError(f"unknown order {order!r}")


def get_config(cnn: CNN, limit_bytes: float, options: Options = Options(), cuts=PAPER_CUTS,
               tiles=PAPER_TILES, second: int = PAPER_SECOND,
               fallback: Config = Config(*PAPER_FALLBACK)) -> tuple[Config, bool]:
    """Algorithm 2 (getConfig): the first configuration predicted under `limit_bytes`, and
    True; else the most even configuration and False."""
    cache: dict[Config, int] = {}
    for config in search_order(cuts, tiles, second, options.order):
        cache[config] = predict(cnn, config, options).bytes
        if cache[config] < limit_bytes:
            return config, True
    return fallback, False
