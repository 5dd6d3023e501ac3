"""A deployment's declared precision and an int8 deployment's quantization entries
(manifest keys "precision", "data_bytes", "dtype", "quantization") cross-checked against
each other and against the scales its step models hold, when it is loaded.

The run takes the manifest's entries where no step model speaks: the frame is quantized on
its way into the arena with the input's entry, the outputs are dequantized with the output
layer's, the verdict's int8 tolerance is six steps of the output's scale, and the reference
weights follow the precision. The step models hold the same figures as initializers
(`scale:<layer>`, `zero_point:<layer>`, deploy/steps/storage.py), written at deploy from
the same scales. So an entry edited after deploy (a scale doubled, a zero point shifted, a
type swapped, an entry removed) would run with the model and the manifest disagreeing, and
could PASS: each is refused here instead, in one line naming the tensor and the model.
An entry no step model holds (a tensor a chain step keeps inside its call,
deploy/build/chains.py) is read by nothing at run time: editing it changes nothing run.

Equal means bit-equal: the manifest holds the scale as a float64 of the fp32 the model
holds, so float32(entry) == the model's value exactly.
"""
from __future__ import annotations

from typing import Callable, Mapping

import numpy as np
from onnx import TensorProto

from deploy.quant.scales import key
from deploy.runtime.manifest_records import DTYPE_BYTES, QUANT_DTYPES, Manifest

SCALE, ZERO = "scale:", "zero_point:"
ZERO_TYPES = {TensorProto.UINT8: "uint8", TensorProto.INT8: "int8"}


def held(graph) -> dict[str, tuple[int, np.ndarray]]:
    """The scale and zero point initializers of a step model's graph: name -> (ONNX element
    type, value)."""
    from onnx import numpy_helper
    return {t.name: (t.data_type, numpy_helper.to_array(t)) for t in graph.initializer
            if t.name.startswith((SCALE, ZERO))}


def check(manifest: Manifest, models: Mapping[str, dict[str, tuple[int, np.ndarray]]],
          fail: Callable[[str], None]) -> None:
    """`fail(line)` at the first disagreement. `models`: step model path -> `held(graph)`."""
    from explorer.app.model import PRECISIONS
    dtype = manifest.dtype
    if manifest.data_bytes != DTYPE_BYTES[dtype]:
        fail(f"key 'data_bytes' is {manifest.data_bytes}, its {dtype} arena stores "
             f"{DTYPE_BYTES[dtype]} bytes an element")
    precision = PRECISIONS.get(manifest.precision)
    if manifest.per_layer:       # an arena of bytes, each tensor at its layer's type
        if manifest.precision != "auto":
            fail(f"key 'precision' is {manifest.precision!r}, but the deployment stores each "
                 f"layer at its own precision (key 'layer_precisions'): expected 'auto'")
    elif precision is None or precision.data_bytes != DTYPE_BYTES[dtype]:
        fail(f"key 'precision' is {manifest.precision!r}, which does not store data as "
             f"{dtype} (key 'dtype')")
    quant = manifest.quantization
    if dtype not in QUANT_DTYPES or quant is None:
        stray = next((rel for rel, h in models.items() if h), None)
        if stray is not None:
            fail(f"model {stray} holds quantization scales, the {dtype} deployment has none")
        return
    if quant.dtype != dtype:
        fail(f"key 'quantization.dtype' is {quant.dtype}, the arena (key 'dtype') is {dtype}")
    for rel, found in models.items():
        cnn = manifest.models[rel].cnn if rel in manifest.models else None
        for name, (elem, value) in sorted(found.items()):
            layer = name.split(":", 1)[1]
            tensor = key(str(cnn), layer)
            entry = quant.by_tensor.get(tensor)
            where = f"key 'quantization.tensors.{tensor}'"
            if entry is None:
                fail(f"{where} is missing; model {rel} stores that tensor")
            if name.startswith(SCALE):
                with np.errstate(over="ignore"):      # 1e300 becomes inf, and differs
                    stored = np.float32(entry.scale)
                if stored != value.reshape(-1)[0] or value.size != 1:
                    fail(f"{where}: scale {entry.scale!r}, model {rel} holds "
                         f"{float(value.reshape(-1)[0])!r}")
            else:
                if ZERO_TYPES.get(elem) != dtype:
                    fail(f"{where}: model {rel} holds a {ZERO_TYPES.get(elem, 'other')} zero "
                         f"point, the deployment stores {dtype}")
                if entry.zero_point != int(value.reshape(-1)[0]):
                    fail(f"{where}: zero point {entry.zero_point}, model {rel} holds "
                         f"{int(value.reshape(-1)[0])}")
