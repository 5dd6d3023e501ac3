"""Processing by parts: which layers may run in phases (paper Table 2), how many phases a
gene gives (Equation 6), and which input rows each phase of a layer reads.

A part is a slice of rows (full batch, channels and width). A layer by parts runs one phase
per output row; phase p writes output row p and reads, from each input, the rows of its
window: kernel rows spaced by the dilation, moved by the stride and shifted up by the top
padding, clipped to the input (padding rows are not stored). Element-wise layers, Concat on
channels/width, and Pad read one row (Pad shifted by its top padding); an input of height 1
broadcast over a taller output (squeeze-excite's Mul) is read by every phase.
See docs/parts.md.
"""
from __future__ import annotations

from dataclasses import dataclass

from csdf.model import CNN, INPUT, Layer
from sdf3.errors import InputError

# Only ops that csdf.onnx_import makes layers of and deploy/parts_onnx builds row by row:
# whatever these rules let the search split, the deployment must build (tests/
# test_deploy_parts_ops.py walks every op named here). Other ops stay whole.
# Ops whose output row p depends on a window of input rows (Conv, pools).
WINDOW_OPS = {"Conv", "MaxPool", "AveragePool"}
# Ops whose output row p depends on input row p of every input (broadcast rows aside).
ROW_OPS = {"Add", "Mul", "Relu", "Clip", "Sigmoid", "HardSigmoid", "HardSwish",
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
    if op in WINDOW_OPS or op in ROW_OPS:
        return True
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
    """Table 2's H_min^out: rows one phase writes (1 by parts, else the whole height)."""
    layer = cnn.layer(name)
    return 1 if can_split(layer) else _height(layer.output_shape)


def table2_phases(layer: Layer) -> int:
    """Table 2's Φ: the output height for layers that may go by parts, else 1."""
    return _height(layer.output_shape) if can_split(layer) else 1


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


def phase_windows(cnn: CNN, name: str, src: str, phases: int) -> list[range]:
    """Rows of `src` read by each phase of layer `name` run in `phases` phases.
    One phase reads the whole input. A layer by parts must have one phase per output row;
    an `Input` layer by parts (rows arriving one at a time, the paper's Figure 3) reads nothing."""
    layer = cnn.layer(name)
    in_h = _height(cnn.edge_shape(src, name))
    if phases == 1:
        return [range(in_h)]
    check_phases(cnn, name, phases)
    win = window(cnn, layer, src)
    return [win.taps(p, in_h) for p in range(phases)]


def check_phases(cnn: CNN, name: str, phases: int) -> None:
    """A layer runs in 1 phase or, if it may go by parts, one per output row."""
    layer = cnn.layer(name)
    out_h = _height(layer.output_shape)
    if phases == 1:
        return
    splittable = can_split(layer) or layer.op == INPUT
    if not splittable:
        raise InputError(f"layer {name}: {layer.op} cannot be processed by parts (phases {phases})")
    if phases != out_h:
        raise InputError(f"layer {name}: expected 1 or {out_h} phases (its output height), "
                         f"got {phases}")
