"""The primitive library of the CPU backend (TASO, Wen et al. 2020): alternative
implementations of one Conv layer, one per module behind `base.Primitive`. Non-Conv layers
have the two ONNX Runtime forms only (plain NCHW kernels, or NCHWc where ONNX Runtime has
them), which differ in layout, not in the ONNX subgraph.

PRIMITIVES lists them in a fixed order (the ILP's index order); `applicable` says which can
compute a layer, `refusals` why the others cannot.
"""
from __future__ import annotations

from csdf.model import Layer
from sdf3.errors import InputError
from deploy.steps.primitives.base import ConvSpec, Primitive
from deploy.steps.primitives.im2col import Im2col
from deploy.steps.primitives.kn2row import Kn2row
from deploy.steps.primitives.ort_conv import OrtConv
from deploy.steps.primitives.ort_nchwc import OrtNchwc
from deploy.steps.primitives.winograd import Winograd

PRIMITIVES: dict[str, Primitive] = {p.name: p for p in
                                    (OrtConv(), OrtNchwc(), Im2col(), Kn2row(), Winograd())}
ORT_FORMS = ("ort_nchw", "ort_nchwc")      # the forms every deployable layer has
DEFAULT = "ort_nchw"


def refusals(layer: Layer, in_shape) -> dict[str, str]:
    """{primitive: reason} for the primitives that cannot compute `layer`."""
    if layer.op != "Conv":
        return {name: f"op {layer.op} (Conv only)" for name in PRIMITIVES if name not in ORT_FORMS}
    spec = ConvSpec.of(layer, in_shape)
    out = {}
    for name, prim in PRIMITIVES.items():
        why = prim.refuses(spec)
        if why:
            out[name] = why
    return out


def applicable(layer: Layer, in_shape) -> list[str]:
    """Names of the primitives that compute `layer`, in PRIMITIVES order."""
    refused = refusals(layer, in_shape)
    return [name for name in PRIMITIVES if name not in refused]


def get(name: str) -> Primitive:
    if name not in PRIMITIVES:
        raise InputError(f"primitive {name!r}: expected one of {', '.join(PRIMITIVES)}")
    return PRIMITIVES[name]


__all__ = ["PRIMITIVES", "ORT_FORMS", "DEFAULT", "ConvSpec", "Primitive", "applicable",
           "refusals", "get"]
