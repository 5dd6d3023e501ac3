"""Fused tiling of a layer group: the tile regions of DeepThings' Fused Tile Partitioning.

Zhao et al., "DeepThings: Distributed Adaptive Deep Learning Inference on Resource-Constrained
IoT Edge Clusters" (IEEE TCAD 2018), Section IV-A, as MAFAT (Farley & Gerstlauer) uses it: the
output of a group of consecutive layers is split into an N x M grid (`grid`: DeepThings'
`grid()`, tiles of ceil(size / parts), the last one taking the remainder), and each tile is
traced backwards through the group (`traversal()`): the input region of a layer is the rows
and columns its output region reads — the window of every output position, moved by the
stride, shifted by the padding, clipped to the input. Neighbouring tiles' regions overlap (the
halo, recomputed by each tile); where a region reaches past the input's border the layer pads
there exactly as the whole layer does, so a tile's op is the layer's op with its own pads.

For Darknet's layers (odd kernels with pad k//2, pools with kernel = stride) this equals
DeepThings' `traversal` (conv: [o1*s - k/2, o2*s + k/2] clipped; pool: [o1*s, o2*s + s - 1]);
the general form here also covers even kernels, asymmetric pads and dilation.

A group is a chain: every layer but the first reads only the previous one, which nothing
outside the group reads (its intermediates exist only per tile). Residual blocks are not
tiled as one group (an Add reads two tensors); groups may sit between them.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import ceil

from csdf.model import CNN, Layer
from sdf3.errors import InputError

WINDOW_OPS = {"Conv", "MaxPool", "AveragePool"}
# Element-wise on one tensor: a tile's output region reads the same region of its input.
POINTWISE_OPS = {"Relu", "Clip", "Sigmoid", "HardSigmoid", "HardSwish", "LeakyRelu",
                 "BatchNormalization", "Identity"}
TILEABLE_OPS = WINDOW_OPS | POINTWISE_OPS | {"Add", "Mul"}   # Add/Mul only with a constant


@dataclass(frozen=True)
class Span:
    """Half-open index range [start, stop) along one axis."""

    start: int
    stop: int

    @property
    def size(self) -> int:
        return self.stop - self.start


@dataclass(frozen=True)
class Axis:
    """One spatial axis of a windowed op: kernel, stride, dilation, pads before/after."""

    kernel: int = 1
    stride: int = 1
    dilation: int = 1
    pad_before: int = 0
    pad_after: int = 0

    @property
    def extent(self) -> int:
        return (self.kernel - 1) * self.dilation + 1


@dataclass(frozen=True)
class LayerTile:
    """One layer of one tile: the output region it computes, the input region it reads and
    the pads [top, left, bottom, right] its op applies (non-zero only at the map's border)."""

    layer: str
    out_h: Span
    out_w: Span
    in_h: Span
    in_w: Span
    pads: tuple[int, int, int, int]

    def shape_key(self) -> tuple:
        return (self.in_h.size, self.in_w.size, self.pads, self.out_h.size, self.out_w.size)


@dataclass(frozen=True)
class Tile:
    """Task (i, j) of the grid: its layers in group order (first layer first)."""

    i: int
    j: int
    layers: tuple[LayerTile, ...]

    @property
    def in_h(self) -> Span:
        return self.layers[0].in_h

    @property
    def in_w(self) -> Span:
        return self.layers[0].in_w

    @property
    def out_h(self) -> Span:
        return self.layers[-1].out_h

    @property
    def out_w(self) -> Span:
        return self.layers[-1].out_w

    def shape_key(self) -> tuple:
        """Tiles with equal keys run the same tile model (same shapes and pads everywhere)."""
        return tuple(lt.shape_key() for lt in self.layers)


def grid(size: int, parts: int) -> list[Span]:
    """DeepThings' grid along one axis: `parts` tiles of ceil(size / parts), the last one
    up to the end. Raises ValueError when a tile would be empty (e.g. size 9 in 4 parts)."""
    if parts < 1 or parts > size:
        raise ValueError(f"cannot split {size} into {parts} tiles")
    step = ceil(size / parts)
    spans = [Span(k * step, (k + 1) * step if k < parts - 1 else size) for k in range(parts)]
    if any(s.size <= 0 for s in spans):
        raise ValueError(f"cannot split {size} into {parts} tiles of {step}")
    return spans


def axes(layer: Layer) -> tuple[Axis, Axis]:
    """(height axis, width axis) of a tileable layer; point-wise ops read 1 x 1 windows."""
    if layer.op not in WINDOW_OPS:
        return Axis(), Axis()
    h = layer.hyper
    k = list(h.get("kernel_shape", [1, 1]))
    s = list(h.get("strides", [1, 1]))
    d = list(h.get("dilations", [1, 1]) or [1, 1])
    p = list(h.get("pads", [0, 0, 0, 0]))
    return Axis(k[0], s[0], d[0], p[0], p[2]), Axis(k[1], s[1], d[1], p[1], p[3])


def input_span(out: Span, axis: Axis, size_in: int) -> tuple[Span, int, int]:
    """Input range read by output range `out` (clipped to [0, size_in)) and the padding the
    tile's op needs before and after it, so that (in + pads - extent) / stride + 1 = out."""
    first = out.start * axis.stride - axis.pad_before
    last = (out.stop - 1) * axis.stride - axis.pad_before + axis.extent - 1
    lo, hi = max(first, 0), min(last, size_in - 1)
    return Span(lo, hi + 1), lo - first, last - hi


def check_group(cnn: CNN, layers: list[str]) -> None:
    """InputError unless `layers` is a chain of tileable layers in order (see module doc)."""
    if not layers:
        raise InputError(f"{cnn.name}: empty layer group")
    for k, name in enumerate(layers):
        if name not in cnn.graph:
            raise InputError(f"{cnn.name}.{name}: no such layer (layer group)")
        layer = cnn.layer(name)
        if layer.op not in TILEABLE_OPS or len(layer.inputs) != 1:
            raise InputError(f"{cnn.name}.{name}: {layer.op} with {len(layer.inputs)} input(s) "
                             f"cannot be fused-tiled (expected one of {', '.join(sorted(TILEABLE_OPS))}, "
                             "one tensor input)")
        if layer.op in WINDOW_OPS and layer.hyper.get("ceil_mode", 0):
            raise InputError(f"{cnn.name}.{name}: ceil_mode pools cannot be fused-tiled")
        if k and layer.inputs[0] != layers[k - 1]:
            raise InputError(f"{cnn.name}.{name}: reads {layer.inputs[0]}, not the previous "
                             f"group layer {layers[k - 1]} (a group is a chain)")
        if k < len(layers) - 1:
            succ = list(cnn.graph.successors(name))
            if succ != [layers[k + 1]] or name in cnn.outputs:
                raise InputError(f"{cnn.name}.{name}: its output is read outside the group "
                                 f"({', '.join(succ) or 'CNN output'}); only the last layer's may be")


def in_hw(cnn: CNN, name: str) -> tuple[int, int]:
    """Height and width of the (single) input of layer `name`."""
    layer = cnn.layer(name)
    shape = cnn.edge_shape(layer.inputs[0], name)
    return int(shape[2]), int(shape[3])


def trace(cnn: CNN, layers: list[str], out_h: Span, out_w: Span, i: int = 0, j: int = 0) -> Tile:
    """DeepThings' backward traversal of one output region through the group."""
    out: list[LayerTile] = []
    for name in reversed(layers):
        ah, aw = axes(cnn.layer(name))
        hin, win = in_hw(cnn, name)
        sh, top, bottom = input_span(out_h, ah, hin)
        sw, left, right = input_span(out_w, aw, win)
        if sh.size <= 0 or sw.size <= 0:
            raise ValueError(f"{name}: tile ({i}, {j}) reads only padding")
        out.append(LayerTile(name, out_h, out_w, sh, sw, (top, left, bottom, right)))
        out_h, out_w = sh, sw
    return Tile(i, j, tuple(reversed(out)))


def tile_group(cnn: CNN, layers: list[str], n: int, m: int) -> list[Tile]:
    """The N x M tiles of a group (N along the height), row-major like DeepThings' task ids.
    ValueError if the group's output cannot be split so (a tile would be empty)."""
    check_group(cnn, layers)
    shape = cnn.layer(layers[-1]).output_shape
    rows, cols = grid(int(shape[2]), n), grid(int(shape[3]), m)
    return [trace(cnn, layers, rows[i], cols[j], i, j) for i in range(n) for j in range(m)]


def distinct_shapes(tiles: list[Tile]) -> dict[tuple, list[Tile]]:
    """Tiles grouped by shape key, in first-seen order: one tile model per key."""
    groups: dict[tuple, list[Tile]] = {}
    for t in tiles:
        groups.setdefault(t.shape_key(), []).append(t)
    return groups


@dataclass(frozen=True)
class Group:
    """A fused group: its layers (a chain, first to last) and its N x M grid."""

    layers: tuple[str, ...]
    n: int
    m: int

    @property
    def name(self) -> str:
        return f"{self.layers[0]}__{self.layers[-1]}"

    def internal_edges(self) -> list[tuple[str, str]]:
        """(layer k, layer k + 1): the tensors that exist per tile only."""
        return list(zip(self.layers[:-1], self.layers[1:]))


def tileable(cnn: CNN, name: str) -> bool:
    layer = cnn.layer(name)
    if layer.op not in TILEABLE_OPS or len(layer.inputs) != 1:
        return False
    if layer.op in ("Add", "Mul") and "C" not in layer.params:
        return False
    return not (layer.op in WINDOW_OPS and layer.hyper.get("ceil_mode", 0))


def segments(cnn: CNN, layers: list[str] | None = None) -> list[list[str]]:
    """Maximal chains of tileable layers (in `layers`, default all) that could be one group:
    each layer but the last feeds only the next one."""
    order = [n for n in (layers if layers is not None else cnn.order()) if tileable(cnn, n)]
    allowed = set(order)
    out: list[list[str]] = []
    for name in order:
        prev = cnn.layer(name).inputs[0]
        if out and out[-1][-1] == prev and prev in allowed and list(cnn.graph.successors(prev)) == [name] \
                and prev not in cnn.outputs:
            out[-1].append(name)
        else:
            out.append([name])
    return [s for s in out if len(s) >= 1]


def blocks(cnn: CNN, segment: list[str]) -> list[list[str]]:
    """A segment split after every layer that shrinks the map (pools, strided convs): MAFAT's
    cut candidates ("directly after max-pool layers", where the tensors are smallest)."""
    out: list[list[str]] = [[]]
    for name in segment:
        out[-1].append(name)
        ah, aw = axes(cnn.layer(name))
        if (ah.stride > 1 or aw.stride > 1) and name != segment[-1]:
            out.append([])
    return [b for b in out if b]


def tile_buffer_elements(cnn: CNN, group: Group) -> dict[tuple[str, str], int]:
    """Elements of each internal edge's per-tile buffer: the largest region of that tensor
    any tile computes (channels x rows x columns, batch included)."""
    tiles = tile_group(cnn, list(group.layers), group.n, group.m)
    out: dict[tuple[str, str], int] = {}
    for k, edge in enumerate(group.internal_edges()):
        n, c = (int(v) for v in cnn.layer(edge[0]).output_shape[:2])
        out[edge] = max(n * c * t.layers[k].out_h.size * t.layers[k].out_w.size for t in tiles)
    return out
