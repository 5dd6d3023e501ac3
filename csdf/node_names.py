"""Layer names from ONNX node names (docs/appfile.md): what the import calls each layer.

>>> layer_name("/backbone/conv1/Conv")
'backbone_conv1_Conv'
>>> layer_name("::")
'layer'
"""
from __future__ import annotations

import re


def clean_name(text: str) -> str:
    """A layer name usable in qualified names, file names and SDF3 XML: every run of
    characters outside [A-Za-z0-9_] becomes one "_", and leading/trailing "_" go."""
    return re.sub(r"[^A-Za-z0-9_]+", "_", text).strip("_")


def layer_name(raw: str) -> str:
    """The layer name of an ONNX node name (docs/appfile.md): `clean_name`, or "layer" when
    nothing is left. The importer adds "_2", "_3", ... to a name already taken."""
    return clean_name(raw) or "layer"
