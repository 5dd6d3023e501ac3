"""ONNX Runtime's own Conv in plain NCHW (its MLAS kernels: im2col-free for 1x1, a bounded
im2col working buffer otherwise), with ONNX Runtime's NCHWc rewrite switched off for the
step, so the layer reads and writes NCHW. Refuses nothing."""
from __future__ import annotations

from csdf.layer_attrs import WeightParams
from deploy.steps.primitives.base import ConvSpec, conv_weight, weights


class OrtConv:
    name = "ort_nchw"
    layout = "nchw"
    nchwc_kernels = False

    def refuses(self, spec: ConvSpec) -> str | None:
        return None

    def build(self, b, layer, spec: ConvSpec, x: str) -> str:
        attrs = dict(kernel_shape=[spec.kh, spec.kw], strides=list(spec.stride),
                     pads=list(spec.pads), dilations=list(spec.dilation), group=spec.group)
        ins = [x, weights(b, layer, "W", conv_weight(b, layer))]
        if "B" in layer.params:
            ins.append(weights(b, layer, "B", WeightParams.of(layer).bias))
        return b.node("Conv", ins, **attrs)
