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

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from csdf.model import Layer
from deploy.quant.stored import FP32, Weights, quantized, stored_low

OPSET = 13
IR_VERSION = 7
ONNX_TYPE = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16}

@dataclass
class Builder:
    dtype: str
    weights: Weights = FP32
    nodes: list = field(default_factory=list)
    inits: list = field(default_factory=list)
    count: int = 0
    names: set = field(default_factory=set)

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

    def param(self, layer: Layer, key: str) -> str:
        """The name of a layer's parameter as the float32 tensor the layer computes with; one
        taken verbatim from an ONNX tensor is named by that tensor, so a tensor two layers
        share is one parameter in the measured bytes. Stored at `weights.kind` (see the
        module's docstring), it is converted once per model, by a node whose output is
        named `<initializer>:float32`."""
        source = layer.param_sources.get(key)
        name = f"param:onnx:{source}" if source else f"param:{layer.name}:{key}"
        value = np.asarray(layer.params[key])
        if self.weights.kind == "float32" or not stored_low(value):
            return self.const(name, value.astype(np.float32))
        out = f"{name}:float32"
        if out in self.names:
            return out
        self.names.add(out)
        if self.weights.kind == "float16":
            self.const(name, value.astype(np.float16))
            self.nodes.append(helper.make_node("Cast", [name], [out], to=TensorProto.FLOAT))
            return out
        scale = self.weights.scales.get(f"{layer.name}:{key}") if source else None
        q, s, zp, axis = quantized(value.astype(np.float32), scale)
        ins = [self.const(name, q), self.const(f"{name}:scale", s)]
        if zp is not None:
            ins.append(self.const(f"{name}:zero_point", zp))
        attrs = {"axis": axis} if s.ndim == 1 else {}
        self.nodes.append(helper.make_node("DequantizeLinear", ins, [out], **attrs))
        return out
