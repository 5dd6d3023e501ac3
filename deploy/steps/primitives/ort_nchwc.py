"""ONNX Runtime's blocked NCHWc Conv: the same ONNX Conv node, compiled with ONNX Runtime's
NchwcTransformer, and read/written in the blocked layout (deploy/ort/blocked.py strips the
reorders of every edge whose other end is blocked too). Refuses nothing as a subgraph; a
layer whose edges' channels do not fill whole blocks keeps its reorders in deployment, and
the ILP then pays them as layout transitions."""
from __future__ import annotations

from deploy.steps.primitives.ort_conv import OrtConv


class OrtNchwc(OrtConv):
    name = "ort_nchwc"
    layout = "nchwc"
    nchwc_kernels = True
