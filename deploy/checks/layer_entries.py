"""The entries of a deployment with a precision per layer (manifest keys "layer_precisions",
"tensor_dtypes" and each edge's "dtype"; deploy/build/layer_storage.py) checked against each
other when it is loaded: each layer's output is stored in the element type of its precision
(fp32 float32, fp16 float16, int8 the quantization's 8-bit type), and each edge in the type
of the layer that writes it. A precision edited by hand, or a type, is refused in one line
naming the CNN and layer, before anything runs: the step models were built for the types
the deployment wrote (deploy/checks/manifest_check.py compares their ports with the edges).
"""
from __future__ import annotations

from typing import Callable

from csdf.model import EdgeId
from deploy.quant.stored import data_type
from deploy.runtime.manifest_records import Manifest


def check(manifest: Manifest, fail: Callable[[str], None]) -> None:
    """`fail` (raises) on the first disagreement; nothing for a manifest at one precision."""
    if not manifest.per_layer:
        return
    quant = manifest.quantization
    for cnn, layers in manifest.layer_precisions.items():
        types = manifest.tensor_dtypes.get(cnn)
        if types is None:
            fail(f"key 'tensor_dtypes' has no entry for CNN {cnn!r}")
        for layer, precision in layers.items():
            if precision == "int8" and quant is None:
                fail(f"key 'layer_precisions.{cnn}.{layer}' is int8, but the deployment has "
                     f"no key 'quantization' (no int8 scales)")
            want = data_type(precision, quant.dtype if quant is not None else None)
            got = types.get(layer)
            if got != want:
                fail(f"key 'layer_precisions.{cnn}.{layer}' is {precision}, but the layer's "
                     f"output is stored as {got} (key 'tensor_dtypes'), which {precision} "
                     f"stores as {want}: deploy the plan again rather than edit its manifest")
    for name, e in manifest.edges.items():
        eid = EdgeId.parse(name, f"edges.{name}")
        want = manifest.tensor_dtypes.get(eid.cnn, {}).get(eid.src)
        if e.dtype != want:
            fail(f"edges.{name}: stored as {e.dtype}, but its layer {eid.src} stores its "
                 f"output as {want} (key 'tensor_dtypes')")
