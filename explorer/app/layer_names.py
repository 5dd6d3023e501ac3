"""How an app file names a layer (docs/appfile.md, "Layer names").

A reference is, in this order: a layer name as `explore info APP --layers` prints it; the
ONNX name of any node the layer holds (a Conv's layer also answers to the names of the
BatchNormalization and activation fused into it, an opaque layer to each of its nodes); or
an ONNX node name that `csdf.node_names.layer_name` turns into a layer name.
"""
from __future__ import annotations

from csdf.model import CNN
from csdf.node_names import layer_name


def resolve(cnn: CNN, ref: str) -> str | None:
    """The layer `ref` names in `cnn`, or None."""
    if ref in cnn.graph:
        return ref
    for name in cnn.order():
        if ref in cnn.layer(name).onnx_nodes:
            return name
    cleaned = layer_name(ref)
    return cleaned if cleaned in cnn.graph else None
