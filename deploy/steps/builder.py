"""The one ONNX graph builder every step model is made with (onnx.helper underneath): nodes
with numbered temporaries, constants and parameters stored once by name, and the opset and IR
version the step models share."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from csdf.model import Layer

OPSET = 13
IR_VERSION = 7
ONNX_TYPE = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16, "uint8": TensorProto.UINT8,
             "int8": TensorProto.INT8}


@dataclass
class Builder:
    dtype: str
    # an int8 step's scale of each stored tensor, by the layer whose output it is
    # (deploy/steps/storage.py)
    scales: Mapping | None = None
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
        """A layer's parameter as float32; one taken verbatim from an ONNX tensor is named by
        that tensor, so a tensor two layers share is one parameter in the measured bytes."""
        source = layer.param_sources.get(key)
        name = f"param:onnx:{source}" if source else f"param:{layer.name}:{key}"
        return self.const(name, layer.params[key].astype(np.float32))
