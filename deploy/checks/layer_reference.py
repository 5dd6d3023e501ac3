"""The reference of a plan with a precision per layer (`precision: auto`,
explorer/app/layer_precision.py): the unmodified fp32 network with each stored tensor rounded
as that tensor's precision stores it and each layer's weights as its precision holds them.

It joins the two one-precision references: a tensor stored at fp16 passes a Cast to fp16 and
back (deploy/checks/rounding.py `cast_trip`), one stored at int8 QuantizeLinear ->
DequantizeLinear with its calibrated scale (deploy/checks/quantized.py's trip), one at fp32
nothing; an int8 layer's Conv/Gemm weight is its per-channel int8 form (`held_weights(...,
only=...)`), an fp16 layer's weights are rounded to fp16 (`with_held_weights(..., only=...)`).
With every layer at one precision it is that precision's reference
(tests/deploy/checks/test_layer_reference.py compares the outputs element by element).
Which precision a tensor is stored at is `LayerPrecisions.tensor`: its producer's, a CNN
input's the widest of its readers'.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from csdf.model import CNN
from csdf.onnx_inputs import with_shapes
from deploy.checks.quantized import held_weights
from deploy.checks.rounding import cast_trip, rounded, with_held_weights
from deploy.quant.calibration import stored
from deploy.quant.scales import ActivationScales
from explorer.app.layer_precision import LayerPrecisions

_INT = {"uint8": np.uint8, "int8": np.int8}


def layer_reference(model_path: str | Path, cnn: CNN, name: str, layers: LayerPrecisions,
                    scales: ActivationScales | None) -> onnx.ModelProto:
    """The reference of CNN `name` (`cnn`, csdf's import of the model at `model_path`) with
    each layer at its precision in `layers`; `scales` hold the int8 tensors' scales (keys
    "name/layer"; None when no tensor is stored at int8)."""
    model = onnx.load(str(model_path))
    with_shapes(model, dict(cnn.input_shapes))
    tensors = stored(cnn, model)                            # ONNX tensor -> layer
    at = {t: layers.tensor(cnn, name, layer).name for t, layer in tensors.items()}
    of = {p: [l.name for l in cnn.layers() if layers.name(name, l.name) == p] for p in ("fp16", "int8")}
    if of["int8"]:
        model = held_weights(model, cnn, only=of["int8"])
    if of["fp16"]:
        model, _ = with_held_weights(model, cnn, "float16", only=of["fp16"])
    half = cast_trip(TensorProto.FLOAT16)
    inits: list[onnx.TensorProto] = []

    def trip(tensor: str, src: str, dst: str) -> list[onnx.NodeProto]:
        if at[tensor] == "fp16":
            return half(tensor, src, dst)
        s = scales.of(name, tensors[tensor])
        scale, zero = dst + "_scale", dst + "_zero_point"
        inits.extend([numpy_helper.from_array(np.array(s.scale, np.float32), scale),
                      numpy_helper.from_array(np.array(s.zero_point, _INT[scales.dtype]), zero)])
        return [helper.make_node("QuantizeLinear", [src, scale, zero], [dst + "_q"]),
                helper.make_node("DequantizeLinear", [dst + "_q", scale, zero], [dst])]

    out = rounded(model, [t for t, p in at.items() if p != "fp32"], trip=trip)
    out.graph.initializer.extend(inits)
    return out
