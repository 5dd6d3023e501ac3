"""The one ONNX graph builder every step model is made with (onnx.helper underneath): nodes
with numbered temporaries, constants and parameters stored once by name, and the opset and IR
version the step models share.

Parameters are stored as the plan's precision says (deploy/quant/stored.py: `Weights`) and
converted to the fp32 tensor the layer computes with inside the step, so the deployment holds
the bytes the plan counts and the fp32 copy exists only while the step runs (its workspace;
docs/precision.md): an fp16 parameter through a Cast, an int8 one through a DequantizeLinear
of it and its scales.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from csdf.layer_attrs import WeightParams
from csdf.model import Layer
from deploy.quant.scales import DTYPES as INT8_TYPES
from deploy.quant.stored import FP32, Weights, quantized, stored_low

OPSET = 13
IR_VERSION = 7
ONNX_TYPE = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16, "uint8": TensorProto.UINT8,
             "int8": TensorProto.INT8}
# the largest fp32 copy of a stored weight a step makes at once (`Builder.weighted`): a
# MobileNetV2 classifier's whole copy was 4.9 MiB of workspace, 10 blocks of it 0.5 MiB
BLOCK_BYTES = 512 << 10
# blocks of output channels start at multiples of this: ONNX Runtime's NCHWc conv pads a
# weight's output channels to its block (8 with AVX2, 16 with AVX-512), so blocks of 113 and
# 15 channels held 128 and 16 (Table 13's mixed ResNet-50: 1.08x its parameters held)
CHANNEL_ALIGN = 16

@dataclass
class Builder:
    """`dtype`: the element type the step stores its layer's output in; `stored`: the
    element type of a tensor it reads, by the layer whose output it is, where that differs
    (a plan with a precision per layer; deploy/steps/storage.py reads it through `dtype_of`)."""
    dtype: str
    weights: Weights = FP32
    # an int8 step's scale of each stored tensor, by the layer whose output it is
    # (deploy/steps/storage.py)
    scales: Mapping | None = None
    nodes: list = field(default_factory=list)
    inits: list = field(default_factory=list)
    count: int = 0
    names: set = field(default_factory=set)
    stored: dict = field(default_factory=dict)

    def dtype_of(self, layer: str) -> str:
        """The element type the output of `layer` is stored in."""
        return self.stored.get(layer, self.dtype)

    @property
    def int8_data(self) -> bool:
        """The step stores its output as int8 (uint8) bytes with a scale: ONNX Runtime fuses
        its DequantizeLinear -> op -> QuantizeLinear into integer kernels."""
        return self.scales is not None and self.dtype in INT8_TYPES

    def tmp(self, hint: str) -> str:
        self.count += 1
        return f"{hint}_{self.count}"

    def node(self, op: str, inputs: list[str], hint: str | None = None, **attrs) -> str:
        out = self.tmp(hint or op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    def const(self, name: str, value: np.ndarray) -> str:
        """An initializer; a 0-d value stays 0-d (np.ascontiguousarray would make it [1]: a
        Gather index that turns a scalar into a 1-D result, as in torchvision's Swin-T)."""
        if name not in self.names:
            self.names.add(name)
            value = np.asarray(value)
            if not value.flags.c_contiguous:
                value = value.copy(order="C")
            self.inits.append(numpy_helper.from_array(value, name))
        return name

    def param(self, layer: Layer, key: str, rows: tuple[int, int] | None = None) -> str:
        """The name of a layer's parameter as the float32 tensor the layer computes with; one
        taken verbatim from an ONNX tensor is named by that tensor, so a tensor two layers
        share is one parameter in the measured bytes. Stored at `weights.kind` (see the
        module's docstring), it is converted once per model, by a node whose output is
        named `<initializer>:float32`. `rows`: only output channels [a, b) of it, stored as
        their own initializer (`weighted`)."""
        source = layer.param_sources.get(key)
        name = f"param:onnx:{source}" if source else f"param:{layer.name}:{key}"
        value = np.asarray(layer.params[key])
        if rows is not None:
            name += f":rows{rows[0]}_{rows[1]}"
        if self.weights.kind == "float32" or not stored_low(value):
            part = value if rows is None else value[rows[0]:rows[1]]
            return self.const(name, part.astype(np.float32))
        out = f"{name}:float32"
        if out in self.names:
            return out
        self.names.add(out)
        if self.weights.kind == "float16":
            part = value if rows is None else value[rows[0]:rows[1]]
            self.const(name, part.astype(np.float16))
            self.nodes.append(helper.make_node("Cast", [name], [out], to=TensorProto.FLOAT))
            return out
        scale = self.weights.scales.get(f"{layer.name}:{key}") if source else None
        q, s, zp, axis = quantized(value.astype(np.float32), scale)
        if rows is not None:           # `blocks` splits along axis 0 only
            q = q[rows[0]:rows[1]]
            if s.ndim == 1:
                s = s[rows[0]:rows[1]]
                zp = None if zp is None else zp[rows[0]:rows[1]]
        ins = [self.const(name, q), self.const(f"{name}:scale", s)]
        if zp is None and self.int8_data:
            zp = np.zeros(s.shape, q.dtype)   # ONNX Runtime fuses a Gemm into QGemm only with it
        if zp is not None:
            ins.append(self.const(f"{name}:zero_point", zp))
        attrs = {"axis": axis} if s.ndim == 1 else {}
        self.nodes.append(helper.make_node("DequantizeLinear", ins, [out], **attrs))
        return out

    def blocks(self, layer: Layer, key: str) -> list[tuple[int, int] | None]:
        """Output-channel ranges of parameter `key` whose fp32 copies are at most BLOCK_BYTES
        each, or [None] (the whole) when it is stored fp32 or its copy is that small."""
        value = np.asarray(layer.params[key])
        if self.weights.kind == "float32" or not stored_low(value) or 4 * value.size <= BLOCK_BYTES:
            return [None]
        scale = self.weights.scales.get(f"{layer.name}:{key}")
        if scale is not None and scale.axis not in (None, 0) and len(scale.scale) > 1:
            return [None]
        step = max(1, BLOCK_BYTES // (4 * (value.size // value.shape[0])))
        if step >= CHANNEL_ALIGN:     # whole NCHWc blocks: no padded channels in a block's copy
            step -= step % CHANNEL_ALIGN
        return [(a, min(a + step, value.shape[0])) for a in range(0, value.shape[0], step)]

    def weighted(self, op: str, layer: Layer, x: str, const_bias: bool = False, **attrs) -> str:
        """`op` (Conv, or Gemm with transB=1) of `x` with the layer's W and its B if any, in
        one node, or, for a W stored below fp32 whose fp32 copy would exceed BLOCK_BYTES,
        one node per block of output channels (`blocks`) joined by a Concat: each block's
        copy is freed before the next is made, so the step's workspace holds one block, not
        the whole weight. `const_bias`: B as a constant named `param:<layer>:B` (Gemm's),
        else through `param`.

        An int8 W with one scale per output channel and zero points 0 (`per_channel`, or a
        symmetric QDQ model) is applied in its integer form: op(x, Cast(q), B / scale) times
        the scale per channel, which is op(x, q * scale, B) (both are linear per output
        channel). ONNX Runtime folds the Cast of a constant and reorders the integer-valued
        weight for its NCHWc kernels, which a DequantizeLinear would keep from it;
        deploy/ort/optimize.py then stores it in int8 again.

        In an int8 step (`scales`: int8 data) W is one DequantizeLinear feeding the op:
        ONNX Runtime fuses DequantizeLinear -> Conv/Gemm -> QuantizeLinear into QLinearConv
        or QGemm, which compute on the int8 values (no fp32 copy of W), and which neither
        blocks nor the integer form would let it do. A step that is the only model of its
        layer pre-packs W (deploy/ort/weight_holders.py `sole_models`): MobileNetV2's classifier
        as QGemm, one thread, 31 us a call pre-packed, 239 us packing at every call, 350 us
        in fp32 blocks."""
        int8_data = self.int8_data
        split = int(attrs.get("group", 1)) == 1 and not int8_data
        parts = self.blocks(layer, "W") if split else [None]
        ys = []
        if int8_data and "B" in layer.params and not self._int32_bias(layer):
            # its bias beyond int32 at the fused kernel's scale: added after the op, which
            # keeps ONNX Runtime from fusing it (deploy/quant/bias_range.py)
            y = self.node(op, [x, self.param(layer, "W")], **attrs)
            bias = np.asarray(WeightParams.of(layer).bias, np.float32).reshape(-1)
            shape = [1, -1] + [1] * (2 if op == "Conv" else 0)
            return self.node("Add", [y, self.const(f"param:{layer.name}:B:apart",
                                                   bias.reshape(shape))])
        for rows in parts:
            integer = self._integer_form(layer, rows)
            w = integer[0] if integer else self.param(layer, "W", rows)
            ins = [x, w]
            if "B" in layer.params:
                tag = "" if rows is None else f":rows{rows[0]}_{rows[1]}"
                bias = np.asarray(WeightParams.of(layer).bias, np.float32).reshape(-1)
                bias = bias if rows is None else bias[rows[0]:rows[1]]
                if integer:
                    ins.append(self.const(f"param:{layer.name}:B{tag}:over_scale", bias / integer[1]))
                elif const_bias:
                    ins.append(self.const(f"param:{layer.name}:B{tag}", bias))
                else:
                    ins.append(self.param(layer, "B", rows))
            y = self.node(op, ins, **attrs)
            if integer:
                shape = [1, -1] + [1] * (2 if op == "Conv" else 0)
                y = self.node("Mul", [y, self.const(f"{w}:scale", integer[1].reshape(shape))])
            ys.append(y)
        return ys[0] if len(ys) == 1 else self.node("Concat", ys, axis=1)

    def _int32_bias(self, layer: Layer) -> bool:
        """Whether an int8 step's fused kernel holds `layer`'s bias in int32
        (deploy/quant/bias_range.py); True where the input's scale is not known here."""
        from deploy.quant.bias_range import bias_fits, weight_scales
        src = layer.inputs[0] if layer.inputs else None
        x_scale = self.scales.get(src) if self.int8_data and src else None
        if x_scale is None:
            return True
        params = WeightParams.of(layer)
        scale = self.weights.scales.get(f"{layer.name}:W") if params.weight_source else None
        return bias_fits(params.bias, x_scale.scale, weight_scales(params.weight, scale))

    def _integer_form(self, layer: Layer, rows: tuple[int, int] | None) -> tuple[str, np.ndarray] | None:
        """(name of the fp32 Cast of W's int8 values, its scale per output channel) for
        `weighted`, or None when W is not so stored (not int8, zero points, another axis),
        or when the data is int8 too: ONNX Runtime fuses DequantizeLinear -> Conv between
        quantized tensors into its integer kernels (QLinearConv), which this form would hide."""
        params = WeightParams.of(layer)
        value = np.asarray(params.weight)
        if self.weights.kind != "int8" or not stored_low(value) or self.dtype not in ("float32", "float16"):
            return None
        source = params.weight_source
        name = f"param:onnx:{source}" if source else f"param:{layer.name}:W"
        scale = self.weights.scales.get(f"{layer.name}:W") if source else None
        q, s, zp, axis = quantized(value.astype(np.float32), scale)
        if (zp is not None and zp.any()) or axis != 0 or q.dtype != np.int8:
            return None
        s = np.broadcast_to(s, (value.shape[0],)).astype(np.float32)
        if rows is not None:
            name += f":rows{rows[0]}_{rows[1]}"
            q, s = q[rows[0]:rows[1]], s[rows[0]:rows[1]]
        out = f"{name}:integers"
        if out not in self.names:
            self.names.add(out)
            self.const(name, q.astype(np.int8))
            self.nodes.append(helper.make_node("Cast", [name], [out], to=TensorProto.FLOAT))
        return out, np.ascontiguousarray(s)
