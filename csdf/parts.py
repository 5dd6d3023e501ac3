"""Processing by parts: which layers may run in phases (paper Table 2), how many phases a
gene gives (Equation 6), and which input rows each phase of a layer reads.

A part is a slice of rows (full batch, channels and width). A layer by parts runs in Φ
phases of k = ceil(H / Φ) output rows each (the last may be shorter): Φ = H is the paper's
row by row, Φ = 1 whole, anything between a coarser part. Phase p writes output rows
[p*k, min((p+1)*k, H)) and reads, from each input, the rows of their windows: kernel rows
spaced by the dilation, moved by the stride and shifted up by the top padding, clipped to
the input (padding rows are not stored) — k*stride + halo rows for a part of k rows.
Only Φ = ceil(H / k) for some k is a valid phase count (`check_phases`), so Φ and k
determine each other. Element-wise layers, Concat on
channels/width, and Pad read one row (Pad shifted by its top padding); an input of height 1
broadcast over a taller output (squeeze-excite's Mul) is read by every phase.
See docs/parts.md.
"""
from __future__ import annotations

from dataclasses import dataclass

from csdf.model import CNN, INPUT, OPAQUE, Layer
from sdf3.errors import InputError

# Only ops that csdf.onnx_import makes layers of and deploy/parts_onnx builds row by row:
# whatever these rules let the search split, the deployment must build (tests/
# test_deploy_parts_ops.py walks every op named here). Other ops stay whole.
# Ops whose output row p depends on a window of input rows (Conv, pools).
WINDOW_OPS = {"Conv", "MaxPool", "AveragePool"}
# Ops whose output row p depends on input row p of every input (broadcast rows aside).
ROW_OPS = {"Add", "Mul", "Relu", "Clip", "Sigmoid", "HardSigmoid", "HardSwish", "LeakyRelu",
           "BatchNormalization"}
# Ops that always need the whole input (Table 2's FC and loss, and friends): one phase.
WHOLE_OPS = {"Gemm", "MatMul", "Flatten", "Reshape", "Softmax", "GlobalAveragePool",
             "GlobalMaxPool", "Transpose", "Squeeze", "Unsqueeze", "Resize", INPUT}


@dataclass(frozen=True)
class Window:
    """Input rows read by output row p: p*stride - pad_top + i*dilation, i < kernel, clipped
    to [0, height). stride 0 is a broadcast (every phase reads the same rows)."""

    kernel: int = 1
    stride: int = 1
    pad_top: int = 0
    dilation: int = 1

    @property
    def extent(self) -> int:
        """Rows spanned by one window: H_min^in of Table 2 (dilated kernel height)."""
        return (self.kernel - 1) * self.dilation + 1

    def taps(self, p: int, height: int) -> range:
        """The real (non-padding) input rows read by output row p, in increasing order."""
        first = p * self.stride - self.pad_top
        skip = 0 if first >= 0 else -(first // self.dilation)   # taps above row 0
        lo = first + skip * self.dilation
        end = min(first + self.extent, height)
        return range(lo, end, self.dilation) if lo < end else range(0)


ELEMENTWISE = Window()
BROADCAST = Window(stride=0)


def _height(shape) -> int:
    return int(shape[2])


def _concat_axis(layer: Layer) -> int:
    axis = int(layer.hyper.get("axis", 1))
    return axis + 4 if axis < 0 else axis


def _pad_top(layer: Layer) -> int:
    """Top padding of a Pad layer: ONNX pads are [n, c, h, w begins, n, c, h, w ends];
    a 4-entry list is [top, left, bottom, right] as for Conv."""
    pads = list(layer.hyper.get("pads", [0, 0, 0, 0]))
    return int(pads[2]) if len(pads) == 8 else int(pads[0])


def can_split(layer: Layer) -> bool:
    """True when Table 2 lets the layer run by parts (one phase per output row)."""
    op = layer.op
    if op in ROW_OPS:   # a constant operand that varies by row would need a slice per phase
        return not any(p.ndim == 4 and p.shape[2] > 1 for p in layer.params.values() if p.ndim == 4)
    if op in WINDOW_OPS:
        return True
    if op == OPAQUE:    # a group proved per-pixel (csdf/onnx_opaque.py) goes like Add
        return bool(layer.hyper.get("per_pixel"))
    if op == "Concat":
        return _concat_axis(layer) != 2
    if op == "Pad":   # 'reflect'/'edge' padding rows copy input rows: kept whole
        return (len(layer.hyper.get("pads", [])) in (4, 8)
                and layer.hyper.get("mode", "constant") == "constant")
    if op == "Synthetic":   # sized-only layers (worked example): rows in, rows out
        return len(layer.inputs) > 0
    return False


def window(cnn: CNN, layer: Layer, src: str) -> Window:
    """The rows of input `src` that each phase of `layer` (by parts) reads."""
    in_h = _height(cnn.edge_shape(src, layer.name))
    out_h = _height(layer.output_shape)
    if in_h == 1 and out_h > 1:
        return BROADCAST
    hyper = layer.hyper
    if layer.op in WINDOW_OPS or (layer.op == "Synthetic" and "kernel_shape" in hyper):
        kernel = int(hyper.get("kernel_shape", [1, 1])[0])
        strides = hyper.get("strides") or [1, 1]
        pads = hyper.get("pads") or [0, 0, 0, 0]
        dilations = hyper.get("dilations") or [1, 1]
        return Window(kernel, int(strides[0]), int(pads[0]), int(dilations[0]))
    if layer.op == "Pad":
        return Window(pad_top=_pad_top(layer))
    if layer.op == "Synthetic" and in_h != out_h:   # sized only: read like a pooling
        step = -(-in_h // out_h)
        return Window(kernel=step, stride=step)
    return ELEMENTWISE


def h_min_in(cnn: CNN, name: str, src: str | None = None) -> int:
    """Table 2's H_min^in: rows of input `src` (default: the first) one phase reads."""
    layer = cnn.layer(name)
    src = src if src is not None else (layer.inputs[0] if layer.inputs else None)
    if src is None:
        return 0
    if not can_split(layer):
        return _height(cnn.edge_shape(src, name))
    return window(cnn, layer, src).extent


def h_min_out(cnn: CNN, name: str) -> int:
    """Table 2's H_min^out: rows one phase writes (1 row by row, else the whole height)."""
    layer = cnn.layer(name)
    return 1 if can_split(layer) else _height(layer.output_shape)


def table2_phases(layer: Layer) -> int:
    """Table 2's Φ: the output height for layers that may go by parts, else 1."""
    return _height(layer.output_shape) if can_split(layer) else 1


def rows_per_phase(height: int, phases: int) -> int:
    """k: output rows each phase of a layer of `height` rows in `phases` phases computes
    (the last phase computes the rest, between 1 and k rows)."""
    return -(-int(height) // max(1, int(phases)))


def phases_of_rows(height: int, rows: int) -> int:
    """Φ for k output rows per phase: ceil(H / k) (k >= H: one phase, whole)."""
    return -(-int(height) // max(1, min(int(rows), int(height))))


def part_rows(height: int, phases: int, p: int) -> range:
    """Output rows phase p of `phases` writes: [p*k, min((p+1)*k, H))."""
    k = rows_per_phase(height, phases)
    return range(p * k, min((p + 1) * k, height))


def valid_phases(height: int, phases: int) -> bool:
    """Φ is valid when it is ceil(H / k) for its own k = ceil(H / Φ): no phase is empty."""
    return 1 <= phases <= height and phases_of_rows(height, rows_per_phase(height, phases)) == phases


def phases_for_rows(cnn: CNN, rows: dict[str, int]) -> dict[str, int]:
    """Φ for every layer from output rows per phase {layer: k}: ceil(H / k) where the layer
    may go by parts, else 1. Layers missing from `rows` stay whole."""
    unknown = sorted(set(rows) - set(cnn.graph.nodes))
    if unknown:
        raise InputError(f"CNN {cnn.name}: unknown layer {unknown[0]!r} in rows per phase")
    out = {}
    for name in cnn.order():
        layer = cnn.layer(name)
        k = rows.get(name)
        if k is not None and int(k) < 1:
            raise InputError(f"layer {name}: rows per phase must be >= 1, got {k}")
        out[name] = (phases_of_rows(_height(layer.output_shape), int(k))
                     if k is not None and can_split(layer) else 1)
    return out


def phases_for(cnn: CNN, genes: dict[str, int]) -> dict[str, int]:
    """Equation 6: Φ = Table 2's value where the gene is 1, else 1, for every layer.
    Layers missing from `genes` count as gene 0."""
    unknown = sorted(set(genes) - set(cnn.graph.nodes))
    if unknown:
        raise InputError(f"CNN {cnn.name}: unknown layer {unknown[0]!r} in genes")
    return {name: table2_phases(cnn.layer(name)) if genes.get(name, 0) == 1 else 1
            for name in cnn.order()}


def all_parts(cnn: CNN) -> dict[str, int]:
    """The baseline of the paper's [17]: every layer that can, by parts."""
    return phases_for(cnn, {name: 1 for name in cnn.graph.nodes})


def part_window(win: Window, out: range, height: int) -> range:
    """Input rows read by the output rows `out` of one part: the taps of a single row, or,
    for k > 1 rows, every row from the first tap of the first to the last tap of the last
    (the contiguous slab a part model is fed: k*stride + halo rows), clipped to the input."""
    if len(out) == 1 or win.stride == 0:
        return win.taps(out[0], height) if len(out) else range(0)
    lo = max(0, out[0] * win.stride - win.pad_top)
    hi = min(height, (out[-1]) * win.stride - win.pad_top + win.extent)
    return range(lo, hi) if lo < hi else range(0)


def phase_windows(cnn: CNN, name: str, src: str, phases: int) -> list[range]:
    """Rows of `src` read by each phase of layer `name` run in `phases` phases.
    One phase reads the whole input; phase p of a layer by parts reads the window of its
    output rows `part_rows`. An `Input` layer by parts (rows arriving a part at a time, the
    paper's Figure 3) reads nothing."""
    layer = cnn.layer(name)
    in_h = _height(cnn.edge_shape(src, name))
    if phases == 1:
        return [range(in_h)]
    check_phases(cnn, name, phases)
    win = window(cnn, layer, src)
    out_h = _height(layer.output_shape)
    return [part_window(win, part_rows(out_h, phases, p), in_h) for p in range(phases)]


def check_phases(cnn: CNN, name: str, phases: int) -> None:
    """A layer runs in 1 phase or, if it may go by parts, in ceil(H / k) phases of k output
    rows (k = 1: one per output row)."""
    layer = cnn.layer(name)
    out_h = _height(layer.output_shape)
    if phases == 1:
        return
    splittable = can_split(layer) or layer.op == INPUT
    if not splittable:
        raise InputError(f"layer {name}: {layer.op} cannot be processed by parts (phases {phases})")
    if not valid_phases(out_h, phases):
        raise InputError(f"layer {name}: expected 1 to {out_h} phases of ceil({out_h}/k) for "
                         f"k output rows per phase, got {phases}")
