"""ONNX models of one layer, whole or one part (a row slice with its window), rebuilt from
`csdf.model.Layer` hyper-parameters and folded params with onnx.helper (opset 13, so the
same files build TensorRT 8.2 engines on a Jetson TX2: no HardSwish, Gather indices int32).

Storage conventions (docs/deploy.md): an edge whose producer or consumer runs by parts is
stored height-outermost, [S, N, C, W] with S slots (a ring of rows, row r at slot r % S);
other edges are stored plainly [N, C, H, W]. A part model takes the whole ring of each
input plus an int32 index vector of the slots it reads, gathers and transposes to NCHW,
computes the part's output rows and writes them as [k, N, C, W] (k consecutive slots: a
ring holds whole parts of its producer, csdf.partition_analysis.ring_rows).

One part model per layer and part size serves every phase of that size (a layer of H rows
in parts of k has one model for k rows and, when k does not divide H, one for the last
part's H mod k): a window op gathers the whole window of input
rows, and where the window reaches into the layer's top or bottom padding the executor feeds
a 0/1 int32 row mask with the slot indices (padding rows point at any slot and are masked:
zero for Conv and AveragePool, the lowest float for MaxPool, and AveragePool without
count_include_pad rescales by the real rows). So a layer has one model and one copy of its
weights however its phases meet the borders (no top/middle/bottom variants).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from csdf.layer_attrs import ActivationAttrs, OpAttrs, PadAttrs, WeightParams, WindowAttrs
from csdf.model import CNN, OPAQUE, Layer
from csdf.onnx_qdq import inner_key
from csdf.parts import window
from deploy.quant.scales import DTYPES as INT8_TYPES, TensorScale
from deploy.quant.stored import FP32, Weights
from deploy.steps import primitives, storage
from deploy.steps.builder import IR_VERSION, ONNX_TYPE, OPSET, Builder
from sdf3.errors import InputError

WINDOW_OPS = {"Conv", "MaxPool", "AveragePool"}
UNARY_OPS = {"Relu", "Clip", "Sigmoid", "HardSigmoid", "HardSwish", "Swish", "LeakyRelu", "Identity"}
ELEMENTWISE_OPS = {"Add", "Mul", "Sub", "Div", "Max", "Min", "Sum", "BatchNormalization"} | UNARY_OPS


@dataclass(frozen=True)
class InPort:
    """One input of a step model. `rows` is None when the model reads the whole tensor,
    else how many slots it gathers from a ring (`slots` rows stored, height-outermost)."""
    name: str
    shape: tuple[int, int, int, int]     # the full tensor [N, C, H, W]
    layout: str                          # "nchw" | "hncw"
    slots: int                           # rows stored (H unless a ring)
    rows: int | None = None              # rows gathered per phase (by-parts consumer)
    masked: bool = False                 # also takes `<name>_mask`: 0 marks padding rows
    counted: bool = False                # also takes `<name>_count`: 1 marks rows an
                                         # AveragePool with count_include_pad divides by
    dtype: str | None = None             # its element type where not the step's own
                                         # (a plan with a precision per layer)

    @property
    def stored_shape(self) -> list[int]:
        n, c, h, w = self.shape
        return [n, c, h, w] if self.layout == "nchw" else [self.slots, n, c, w]


@dataclass(frozen=True)
class OutPort:
    name: str
    shape: tuple[int, int, int, int]     # full output tensor [N, C, H, W]
    layout: str                          # "nchw" | "hncw"
    part: bool = False                   # a part of `rows` rows ([rows, N, C, W]), not the whole
    rows: int = 1                        # output rows of the part

    @property
    def stored_shape(self) -> list[int]:
        n, c, h, w = self.shape
        if self.part:
            return [self.rows, n, c, w]
        return [n, c, h, w] if self.layout == "nchw" else [h, n, c, w]


LOWEST = -3.4e38      # a masked MaxPool row: below every real value


def _activations(b: Builder, layer: Layer, x: str) -> str:
    """Fused activations, in order, in opset 13 (HardSwish and Swish decomposed). In an int8
    step, a QDQ model's quantization points inside the layer (deploy/quant/scales.py
    "layer@act<i>", "layer@gate<i>") round there, QuantizeLinear -> DequantizeLinear, as the
    model does: ONNX Runtime then fuses the same groups into the same integer kernels."""
    a = ActivationAttrs.of(layer)
    for i, act in enumerate(a.activation):
        x = _point(b, layer, f"act{i}", x)
        if act == "Relu":
            x = b.node("Relu", [x])
        elif act == "Clip":
            lo, hi = a.clip
            lo_n = b.const(b.tmp("clip_lo"), np.array(-3.4e38 if lo is None else lo, np.float32))
            hi_n = b.const(b.tmp("clip_hi"), np.array(3.4e38 if hi is None else hi, np.float32))
            x = b.node("Clip", [x, lo_n, hi_n])
        elif act == "Sigmoid":
            x = b.node("Sigmoid", [x])
        elif act == "HardSigmoid":
            x = b.node("HardSigmoid", [x], alpha=a.alpha, beta=a.beta)
        elif act == "HardSwish":
            gate = b.node("HardSigmoid", [x], alpha=1.0 / 6, beta=0.5)
            x = b.node("Mul", [x, _point(b, layer, f"gate{i}", gate)])
        elif act == "Swish":
            x = b.node("Mul", [x, _point(b, layer, f"gate{i}", b.node("Sigmoid", [x]))])
        elif act == "LeakyRelu":
            x = b.node("LeakyRelu", [x], alpha=a.leaky_alpha)
        else:
            raise InputError(f"layer {layer.name}: fused activation {act!r} cannot be deployed")
    return x


def _point(b: Builder, layer: Layer, point: str, x: str) -> str:
    """`x` rounded at quantization point `point` of `layer` where the step's scales have one
    (csdf/onnx_qdq.py `inner_key`), else `x`."""
    name = inner_key(layer.name, point)
    return storage.rounded(b, x, name) if b.int8_data and name in b.scales else x


def layer_core(b: Builder, layer: Layer, xs: list[str], in_shapes: list, masks: list[str | None],
          part: bool, primitive: str | None = None, count: str | None = None,
          premasked: bool = False, rows: int = 1) -> str:
    """The layer's computation on NCHW float32 inputs `xs`; returns the NCHW output name.
    By parts (`part`), a window op computes its phase's output rows from the gathered window
    rows: vertical stride and dilation as in the layer, no vertical padding (padding rows
    are gathered too and masked by `masks`, float [1, 1, rows, 1] or None).
    `primitive`: a whole Conv written by that primitive of deploy/primitives. `count`: rows
    an AveragePool with count_include_pad divides by (float [1, 1, rows, 1]) when a window
    runs past the bottom padding (ceil_mode): ONNX leaves those rows out of the divisor.
    A Pad by parts with no input writes a row of its pad value (a phase in its padding).
    `premasked`: the window rows were masked already (step_model does it on the gathered
    rows, where it is cheap); `masks` still give AveragePool its divisor. `rows`: the output
    rows of the part (a per-pixel opaque layer computes exactly these)."""
    op, axis = layer.op, OpAttrs.of(layer).axis
    n, c_out, h_out, w_out = layer.output_shape
    if op == OPAQUE:
        from deploy.steps.opaque import opaque_core
        return opaque_core(b, layer, xs, list(dict.fromkeys(layer.inputs)), part, rows)
    if op == "Conv" and not part and primitive not in (None, *primitives.ORT_FORMS):
        spec = primitives.ConvSpec.of(layer, in_shapes[0])
        prim = primitives.get(primitive)
        why = prim.refuses(spec)
        if why:
            raise InputError(f"layer {layer.name}: primitive {primitive} refuses it: {why}")
        y = prim.build(b, layer, spec, xs[0])
    elif op in WINDOW_OPS:
        win = WindowAttrs.of(layer)
        kernel, strides, dil = list(win.kernel), list(win.stride), list(win.dilation)
        pads = list(win.pad)
        attrs: dict = {"kernel_shape": kernel}
        mask = masks[0] if part and masks else None
        if part:
            pads = [0, pads[1], 0, pads[3]]
        attrs.update(strides=strides, pads=pads)
        x = xs[0]
        if mask is not None and not premasked:
            x = _apply_mask(b, op, x, mask)
        if op == "Conv":
            attrs.update(dilations=dil, group=win.group)
            y = b.weighted("Conv", layer, x, **attrs)
        else:
            if win.ceil_mode is not None:
                attrs.update(ceil_mode=win.ceil_mode)
            if op == "MaxPool":
                attrs.update(dilations=dil)
            exclude = op == "AveragePool" and not win.counts_pad
            if op == "AveragePool" and win.count_include_pad is not None:
                attrs.update(count_include_pad=win.count_include_pad)
            y = b.node(op, [x], **attrs)
            rows = mask if exclude else count if op == "AveragePool" else None
            if part and rows is not None:   # divide by the real (or counted) rows, not the window's
                ones = b.const(b.tmp("ones"), np.ones([1, 1, kernel[0], 1], np.float32))
                real = b.node("Conv", [rows, ones], kernel_shape=[kernel[0], 1],
                              strides=[strides[0], 1], pads=[0, 0, 0, 0])
                scale = b.node("Div", [b.const(b.tmp("k"), np.array(float(kernel[0]), np.float32)),
                                       real])
                y = b.node("Mul", [y, scale])
    elif op in ELEMENTWISE_OPS:
        y = _elementwise(b, layer, xs)
    elif op == "Concat":
        axis = 1 if axis is None else axis
        y = b.node("Concat", xs, axis=axis + 4 if axis < 0 else axis)
    elif op == "Gemm":
        flat = b.node("Reshape", [xs[0], b.const(b.tmp("shape"), np.array([n, -1], np.int64))])
        g = b.weighted("Gemm", layer, flat, const_bias=True, transB=1)   # alpha, beta folded into W, B
        y = b.node("Reshape", [g, b.const(b.tmp("shape"), np.array(layer.output_shape, np.int64))])
    elif op in ("Flatten", "Reshape"):
        y = b.node("Reshape", [xs[0], b.const(b.tmp("shape"), np.array(layer.output_shape, np.int64))])
    elif op in ("GlobalAveragePool", "GlobalMaxPool"):
        y = b.node(op, [xs[0]])
    elif op == "Softmax":
        if h_out == 1 and w_out == 1:   # a 2-D [N, C] softmax seen as [N, C, 1, 1]
            flat = b.node("Reshape", [xs[0], b.const(b.tmp("shape"), np.array([n, c_out], np.int64))])
            s = b.node("Softmax", [flat], axis=1)
            y = b.node("Reshape", [s, b.const(b.tmp("shape"), np.array(layer.output_shape, np.int64))])
        else:
            y = b.node("Softmax", [xs[0]], axis=1 if axis is None else axis)
    elif op == "Pad":
        y = _pad(b, layer, xs, part)
    else:
        mode = "by parts" if part else "whole"
        raise InputError(f"layer {layer.name}: op {op} cannot be deployed {mode}")
    return _activations(b, layer, y)


def _pad(b: Builder, layer: Layer, xs: list[str], part: bool) -> str:
    """Pad whole, or one output row of it: a row of the input padded on every axis but the
    height, or (no input: a phase inside the vertical padding) a row of the pad value."""
    attrs = PadAttrs.of(layer)
    pads = list(attrs.pads)
    if len(pads) == 4:
        t, left, bottom, right = pads
        pads = [0, 0, t, left, 0, 0, bottom, right]
    value = attrs.value
    if part and not xs:
        n, c, _, w = layer.output_shape
        rows = attrs.fill_rows     # a part of k > 1 padding rows
        return b.node("ConstantOfShape", [b.const(b.tmp("shape"), np.array([n, c, rows, w], np.int64))],
                      value=helper.make_tensor("value", TensorProto.FLOAT, [1], [value]))
    if part:
        pads[2] = pads[6] = 0
    value_n = b.const(b.tmp("pad_value"), np.array(value, np.float32))
    return b.node("Pad", [xs[0], b.const(b.tmp("pads"), np.array(pads, np.int64)), value_n],
                  mode=attrs.mode)


def _apply_mask(b: Builder, op: str, x: str, mask: str) -> str:
    """Window rows times their 0/1 mask (broadcast over the other axes); for MaxPool padding
    rows never win: x*m + (m-1)*|lowest|."""
    x = b.node("Mul", [x, mask])
    if op == "MaxPool":
        low = b.node("Sub", [mask, b.const(b.tmp("one"), np.array(1.0, np.float32))])
        low = b.node("Mul", [low, b.const(b.tmp("lowest"), np.array(-LOWEST, np.float32))])
        x = b.node("Add", [x, low])
    return x


def _row_vector(b: Builder, graph_inputs: list, name: str, rows: int) -> str:
    """An int32 0/1 input per gathered row, as float [1, 1, rows, 1]."""
    graph_inputs.append(helper.make_tensor_value_info(name, TensorProto.INT32, [rows]))
    vec = b.node("Cast", [name], to=TensorProto.FLOAT)
    return b.node("Reshape", [vec, b.const(b.tmp("shape"), np.array([1, 1, rows, 1], np.int64))])


def _elementwise(b: Builder, layer: Layer, xs: list[str]) -> str:
    op, params = layer.op, layer.params
    if op in UNARY_OPS:
        inner = Layer(layer.name, op, {**layer.hyper, "activation": [op]})
        return xs[0] if op == "Identity" else _activations(b, inner, xs[0])
    if op == "BatchNormalization":   # inference form: a per-channel scale and shift
        if set(params) != {"scale", "B"}:
            raise InputError(f"layer {layer.name}: BatchNormalization needs params scale and B")
        bn = WeightParams.of(layer)
        c = bn.scale.size
        scale = b.const(f"param:{layer.name}:scale", bn.scale.astype(np.float32).reshape(1, c, 1, 1))
        shift = b.const(f"param:{layer.name}:B", bn.bias.astype(np.float32).reshape(1, c, 1, 1))
        return b.node("Add", [b.node("Mul", [xs[0], scale]), shift])
    ins = list(xs)
    const_input = OpAttrs.of(layer).const_input
    for key in sorted(params):   # constant operands (e.g. a Mul by a constant)
        at = len(ins) if key != "C" or const_input is None else const_input
        ins.insert(at, b.param(layer, key))
    if op == "Sum" or len(ins) > 2:
        y = ins[0]
        for other in ins[1:]:
            y = b.node("Add" if op in ("Add", "Sum") else op, [y, other])
        return y
    return b.node(op, ins)


def step_model(layer: Layer, inputs: list[InPort], outputs: list[OutPort], dtype: str,
               part: bool = False, primitive: str | None = None,
               weights: Weights = FP32, scales: Mapping[str, TensorScale] | None = None
               ) -> onnx.ModelProto:
    """The ONNX model of one step: layer `layer` whole, or (`part`) any phase of it;
    `primitive`: how a whole Conv is computed (deploy/steps/primitives).
    Inputs are named by `inputs[i].name` (a gathering input also takes `<name>_idx`,
    int32 slot indices, and when masked `<name>_mask`, int32 0/1 per gathered row); every
    output port gets the same result in its own layout; `weights`: how parameters are
    stored (deploy/quant/stored.py); `scales`: an int8 step's scale of each stored tensor by
    its layer (deploy/steps/storage.py); input i is layer.inputs' i-th distinct source."""
    b = Builder(dtype, weights, scales)
    sources = list(dict.fromkeys(layer.inputs))
    elem = ONNX_TYPE[dtype]
    b.stored.update({s: p.dtype for p, s in zip(inputs, sources) if p.dtype is not None})
    from deploy.steps import rowwise as parts_rowwise
    if parts_rowwise.applies(layer, inputs, outputs, part):   # 1x1 conv: no transposes
        port = inputs[0]
        graph_inputs = [helper.make_tensor_value_info(port.name, ONNX_TYPE[b.dtype_of(sources[0])],
                                                      port.stored_shape),
                        helper.make_tensor_value_info(f"{port.name}_idx", TensorProto.INT32,
                                                      [port.rows])]
        return _finish(b, layer, graph_inputs, outputs, elem,
                       parts_rowwise.build(b, layer, port, sources[0], _activations), rowwise=True)
    graph_inputs, xs, masks, in_shapes, counts = [], [], [], [], []
    premasked = False
    for port, source in zip(inputs, sources):
        read = b.dtype_of(source)
        graph_inputs.append(helper.make_tensor_value_info(port.name, ONNX_TYPE[read],
                                                          port.stored_shape))
        x, mask = port.name, None
        if port.rows is not None:
            idx = f"{port.name}_idx"
            graph_inputs.append(helper.make_tensor_value_info(idx, TensorProto.INT32, [port.rows]))
            x = b.node("Gather", [x, idx], axis=0)
            if port.masked:
                mask = _row_vector(b, graph_inputs, f"{port.name}_mask", port.rows)
                if not xs and read == "float32" and layer.op in WINDOW_OPS:
                    # masked on the gathered [rows, N, C, W]: one factor per contiguous row
                    # (measured on MobileNetV2's features_2_dw part of 8 rows: the Mul on
                    # the transposed [N, C, rows, W] window took 60 of 250 us)
                    by_row = b.node("Reshape", [mask, b.const(b.tmp("shape"), np.array(
                        [port.rows, 1, 1, 1], np.int64))])
                    x = _apply_mask(b, layer.op, x, by_row)
                    premasked = True
                elif not xs and b.scales is not None and read in INT8_TYPES \
                        and layer.op in WINDOW_OPS:
                    # int8: padding rows set to the stored zero before the DequantizeLinear,
                    # so DequantizeLinear -> Conv -> QuantizeLinear stays whole (QLinearConv)
                    x = storage.masked_rows(b, x, f"{port.name}_mask", port.rows, source, layer.op)
                    premasked = True
            x = b.node("Transpose", [x], perm=[1, 2, 0, 3])
            if port.counted:
                counts.append(_row_vector(b, graph_inputs, f"{port.name}_count", port.rows))
        elif port.layout == "hncw":
            x = b.node("Transpose", [x], perm=[1, 2, 0, 3])
        xs.append(storage.load(b, x, source))
        masks.append(mask)
        in_shapes.append(port.shape)
    rows = outputs[0].rows if part and outputs else 1
    y = layer_core(b, layer, xs, in_shapes, masks, part, primitive, counts[0] if counts else None,
                   premasked, rows)
    return _finish(b, layer, graph_inputs, outputs, elem, storage.store(b, y, layer.name))


def _finish(b: Builder, layer: Layer, graph_inputs: list, outputs: list[OutPort], elem: int,
            y: str, rowwise: bool = False) -> onnx.ModelProto:
    """The step model: `y` (NCHW, or already [k, N, C, W] when `rowwise`) written to every
    output port in its layout."""
    graph_outputs = []
    for port in outputs:
        if not rowwise and (port.layout == "hncw" or port.part):
            src = b.node("Transpose", [y], perm=[2, 0, 1, 3])
        else:
            src = y
        b.nodes.append(helper.make_node("Identity", [src], [port.name]))
        graph_outputs.append(helper.make_tensor_value_info(port.name, elem, port.stored_shape))
    graph = helper.make_graph(b.nodes, f"{layer.name}", graph_inputs, graph_outputs, b.inits)
    source = OpAttrs.of(layer)
    opsets = source.opset if layer.op == OPAQUE else None   # the source's own
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in
                                                    (opsets or [("", OPSET)])],
                              producer_name="memtrade.deploy")
    model.ir_version = (source.ir_version or IR_VERSION) if opsets else IR_VERSION
    return model


def window_rows(cnn: CNN, layer_name: str, src: str, p: int, rows_out: int = 1,
                count: int | None = None) -> tuple[list[int], list[bool]]:
    """Input rows of `src` that phase p of `layer_name` (output rows p*rows_out .., `count`
    of them, default rows_out: the last part may be shorter) reads, and whether each is a
    real row (False: top/bottom padding). A window op reads its whole window, padding rows
    included; other ops read their real rows only."""
    layer = cnn.layer(layer_name)
    in_h = int(cnn.edge_shape(src, layer_name)[2])
    win = window(cnn, layer, src)
    count = rows_out if count is None else count
    if layer.op not in WINDOW_OPS or win.stride == 0:
        rows = [r for q in range(p * rows_out, p * rows_out + count) for r in win.taps(q, in_h)]
        rows = list(dict.fromkeys(rows))
        return rows, [True] * len(rows)
    first = p * rows_out * win.stride - win.pad_top
    span = (count - 1) * win.stride + win.extent
    rows = list(range(first, first + span))
    return rows, [0 <= r < in_h for r in rows]


def counted_rows(cnn: CNN, layer_name: str, src: str, p: int, rows_out: int = 1,
                 count: int | None = None) -> list[int] | None:
    """For an AveragePool with count_include_pad whose last window runs past its bottom
    padding (ceil_mode), 1 for each gathered row of phase p (of `rows_out` output rows,
    `count` in this phase) inside the padded input (ONNX's divisor), else 0; None for
    every other layer (no such input)."""
    layer = cnn.layer(layer_name)
    win = WindowAttrs.of(layer)
    if layer.op != "AveragePool" or not win.counts_pad:
        return None
    in_h = int(cnn.edge_shape(src, layer_name)[2])
    top, bottom = win.pad[0::2]
    last = int(layer.output_shape[2]) - 1
    if max(window_rows(cnn, layer_name, src, last)[0]) < in_h + bottom:
        return None
    return [int(-top <= r < in_h + bottom)
            for r in window_rows(cnn, layer_name, src, p, rows_out, count)[0]]


def needs_mask(cnn: CNN, layer_name: str, src: str, rows_out: int = 1) -> bool:
    """True when some phase's window reaches into padding (its model takes a row mask)."""
    phases = -(-int(cnn.layer(layer_name).output_shape[2]) // rows_out)
    return any(not all(window_rows(cnn, layer_name, src, p, rows_out)[1])
               for p in (0, phases - 1))


def param_tensors(model: onnx.ModelProto) -> dict[str, int]:
    """Bytes of each weight a model holds (initializers named `param:layer:key`), for the
    measured parameter bytes."""
    return {t.name: numpy_helper.to_array(t).nbytes for t in model.graph.initializer
            if t.name.startswith("param:")}
