"""Tensor shapes from one ONNX Runtime run, where ONNX shape inference gives up.

ONNX's shape inference (with data propagation, csdf/onnx_consts.py) stops at some exports
whose graph inputs are static: torchvision's Swin-T through the TorchScript exporter at
opset 17 leaves 1,331 tensors of its shifted-window blocks without a shape, although ONNX
Runtime runs the file. Then the model is run once, on zeros of its static input shapes,
with those tensors added as graph outputs, and each tensor's shape is what the run gives.
ONNX Runtime's symbolic shape inference (onnxruntime.tools.symbolic_shape_infer) is not
used: on torchvision's Swin-T it leaves 1,053 of them symbolic. Only shapes are taken from
the run; the values are not kept.
"""
from __future__ import annotations

import numpy as np
import onnx

from sdf3.errors import InputError

_NP = {onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.FLOAT16: np.float16,
       onnx.TensorProto.DOUBLE: np.float64, onnx.TensorProto.INT64: np.int64,
       onnx.TensorProto.INT32: np.int32, onnx.TensorProto.UINT8: np.uint8,
       onnx.TensorProto.INT8: np.int8, onnx.TensorProto.BOOL: np.bool_}


def static_inputs(model: onnx.ModelProto, consts: dict) -> dict[str, tuple[tuple[int, ...], int]] | None:
    """The graph inputs (not constants) with their static shapes and element types, or None
    when one of them has a dimension that is not a number."""
    out = {}
    for value in model.graph.input:
        if value.name in consts:
            continue
        tt = value.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else 0 for d in tt.shape.dim]
        if not tt.HasField("shape") or any(d <= 0 for d in dims) or tt.elem_type not in _NP:
            return None
        out[value.name] = (tuple(dims), tt.elem_type)
    return out


def shapes_from_run(model: onnx.ModelProto, tensors: list[str], inputs: dict,
                    where: str) -> dict[str, tuple[tuple[int, ...], int]]:
    """(shape, ONNX element type) of each of `tensors` in one ONNX Runtime run of `model` on
    zeros of `inputs` (name -> (shape, element type)). A model ONNX Runtime cannot run is
    one line naming it."""
    import onnxruntime as ort
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    have = {o.name for o in copy.graph.output}
    copy.graph.output.extend(onnx.ValueInfoProto(name=t) for t in tensors if t not in have)
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.intra_op_num_threads = 1
    opts.log_severity_level = 3
    try:
        session = ort.InferenceSession(copy.SerializeToString(), opts,
                                       providers=["CPUExecutionProvider"])
        feed = {name: np.zeros(shape, _NP[elem]) for name, (shape, elem) in inputs.items()}
        names = [o.name for o in session.get_outputs()]
        values = session.run(names, feed)
    except Exception as err:       # onnxruntime's Fail / InvalidGraph / RuntimeException
        reason = " ".join(str(err).split())[:300]
        raise InputError(f"{where}: ONNX shape inference left tensor shapes unknown and ONNX "
                         f"Runtime cannot run the model to find them: {reason}") from None
    wanted = set(tensors)
    return {n: (tuple(int(d) for d in np.shape(v)),
                onnx.helper.np_dtype_to_tensor_dtype(np.asarray(v).dtype))
            for n, v in zip(names, values) if n in wanted}
