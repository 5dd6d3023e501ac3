"""Step-model weights as the ONNX Runtime backend holds them: read from the side file of
the model ONNX Runtime optimised (deploy/ort/optimize.py), once per distinct tensor across
every session (deploy/ort/backend.py `_shared_weights` keys them by content)."""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# inputs whose values ONNX Runtime's shape inference reads while loading a model (a float
# tensor among them: Resize's roi and scales, Upsample's scales, as torch's TorchScript
# exporter writes them): left in a side file they make the load fail ("Cannot parse data
# from external tensors"), so they go back inline
SHAPE_INPUTS = {"Resize": (1, 2, 3), "Upsample": (1,)}


def shape_inputs(model: onnx.ModelProto) -> set[str]:
    """Names of the tensors `model`'s nodes read at a SHAPE_INPUTS position."""
    return {node.input[k] for node in model.graph.node
            for k in SHAPE_INPUTS.get(node.op_type, ()) if k < len(node.input) and node.input[k]}


def external_arrays(model: onnx.ModelProto, folder: Path, weights: bool = True,
                     known: dict | None = None) -> dict[str, np.ndarray]:
    """The model's externally stored weights (`is_weight`), each read once into its
    own array, or the array `known` (OrtBackend._by_content) holds for the same bytes,
    recognised without reading them into memory (a layer's weights in a dozen region models:
    YOLOv2-16's least-memory deployment rose 10 MiB above what it kept, reading conv10's
    weights again for each); other integer tensors (shapes, axes: ONNX Runtime reads them while
    loading), one-element constants (Clip bounds, mask constants) and the float tensors
    shape inference reads (`shape_inputs`: Resize's scales) are put back inline in `model`.
    `weights` False: only the latter (a graph read for its form, deploy/ort/blocked.py)."""
    out = {}
    inline = shape_inputs(model)
    for t in model.graph.initializer:
        if t.data_location != TensorProto.EXTERNAL:
            continue
        info = {e.key: e.value for e in t.external_data}
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(t.data_type))
        weight = is_weight(dtype) and int(np.prod(t.dims)) > 1 and t.name not in inline
        if not weights and weight:
            continue
        count = int(info["length"]) // dtype.itemsize
        offset = int(info.get("offset", 0))
        if known is not None and weight:
            key = (dtype.str, tuple(t.dims), _digest(folder / info["location"], offset, int(info["length"])))
            if key in known:
                out[t.name] = known[key][0]
                continue
        arr = np.fromfile(folder / info["location"], dtype, count, offset=offset)
        arr = arr.reshape(tuple(t.dims))
        if weight:
            out[t.name] = arr
        else:
            t.CopyFrom(numpy_helper.from_array(arr, t.name))
    return out


def inline(model: onnx.ModelProto, arrays: dict[str, np.ndarray]) -> dict[str, int]:
    """Put `arrays` back into `model` as its initializers' data (a session that owns its
    weights, deploy/ort/backend.py); their bytes by type."""
    out: dict[str, int] = {}
    for t in model.graph.initializer:
        if t.name in arrays:
            a = arrays[t.name]
            t.CopyFrom(numpy_helper.from_array(np.ascontiguousarray(a), t.name))
            out[a.dtype.name] = out.get(a.dtype.name, 0) + int(a.nbytes)
    return out


def is_weight(dtype: np.dtype) -> bool:
    """Whether tensors of `dtype` are weights: floating point (fp32, or fp16 behind a Cast)
    or 8-bit integers (int8 weights behind a DequantizeLinear, deploy/steps/builder.py); the
    other integer types are shapes, axes and indices."""
    return dtype.kind == "f" or dtype in (np.dtype(np.int8), np.dtype(np.uint8))


def _digest(path: Path, offset: int, length: int) -> bytes:
    """The content key of OrtBackend._shared_weights for bytes of a file, read 1 MiB at a time."""
    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as f:
        f.seek(offset)
        while length > 0:
            chunk = f.read(min(length, 1 << 20))
            if not chunk:
                break
            h.update(chunk)
            length -= len(chunk)
    return h.digest()
