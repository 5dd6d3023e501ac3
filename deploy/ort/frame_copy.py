"""The Input step of an int8 deployment as one ONNX Runtime call: the fp32 frame quantized
with the input's scale, then laid out as each of its edges stores it (rows outermost for a
ring, channels-last where deploy/ort/channels_last.py chose it), written straight into the
arena views.

Why: numpy quantizes a 224x224 RGB frame and writes it channels-last in 290 us on this
machine (one thread); ONNX Runtime's vectorised QuantizeLinear and then a 1-byte Transpose
do it in 81-92 us. Quantizing first moves a quarter of the bytes through the transpose: fp32
Transpose then QuantizeLinear took 108-109 us (benchmarks/frame_copy.py), and its temporary,
the fp32 frame laid out again (588 KiB), was ONNX Runtime workspace where the 1-byte frame
(147 KiB) is now.

    >>> import numpy as np
    >>> stored_perm("hncw", [0, 1, 3, 2], batch=1)     # [1, C, H, W] -> [H, 1, W, C] bytes
    [0, 2, 3, 1]
    >>> stored_perm("nchw", None, batch=1)
    [0, 1, 2, 3]
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from deploy.ort.io_binding import bind_views, runner
from deploy.ort.providers import CPU

ROWS_FIRST = [2, 0, 1, 3]      # NCHW -> HNCW


def stored_perm(layout: str, order: list[int] | None, batch: int) -> list[int]:
    """The permutation of the frame [N, C, H, W] giving an edge's stored bytes: its layout
    ("hncw": rows first), then `order` (channels-last). With a batch of 1 the batch axis is
    put first, where moving it changes no byte, so ONNX Runtime's fast paths apply."""
    logical = ROWS_FIRST if layout == "hncw" else [0, 1, 2, 3]
    perm = [logical[i] for i in order] if order is not None else logical
    if batch == 1:
        perm = [0] + [p for p in perm if p != 0]
    return perm


def frame_copy(views: list[tuple[np.ndarray, str, list[int] | None]], shape: list[int],
               scale: float, zero_point: int, dtype: np.dtype, options: ort.SessionOptions
               ) -> Callable[[np.ndarray], None]:
    """A call writing fp32 frame [N, C, H, W] (`shape`) quantized into every arena view of
    `views` ((view, manifest layout, channels-last order or None))."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))
    qtype = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    inits = [numpy_helper.from_array(np.array(scale, np.float32), "scale"),
             numpy_helper.from_array(np.array(zero_point, np.dtype(dtype)), "zero_point")]
    perms = [stored_perm(layout, order, shape[0]) for _, layout, order in views]
    alone = len(views) == 1 and perms[0] == [0, 1, 2, 3]     # quantized straight into it
    nodes = [helper.make_node("QuantizeLinear", ["x", "scale", "zero_point"],
                              ["y0" if alone else "q"])]
    outputs, shapes = [], []
    for k, perm in enumerate(perms):
        if not alone:
            nodes.append(helper.make_node("Identity", ["q"], [f"y{k}"]) if perm == [0, 1, 2, 3]
                         else helper.make_node("Transpose", ["q"], [f"y{k}"], perm=perm))
        dims = [shape[p] for p in perm]
        outputs.append(helper.make_tensor_value_info(f"y{k}", qtype, dims))
        shapes.append(dims)
    model = helper.make_model(helper.make_graph(nodes, "frame_copy", [x], outputs, inits),
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    sess = ort.InferenceSession(model.SerializeToString(), options, providers=CPU)
    targets = [view.reshape(dims) for (view, _, _), dims in zip(views, shapes)]
    binding = bind_views(sess, {}, {f"y{k}": arr for k, arr in enumerate(targets)})
    run = runner(sess, binding, ort.RunOptions())

    def call(frame: np.ndarray) -> None:
        frame = np.ascontiguousarray(frame, np.float32)       # the caller's, bound as it is
        binding.bind_input("x", "cpu", 0, np.float32, list(shape), frame.ctypes.data)
        run()
    call.keep = (sess, binding, targets)      # alive as long as the call
    return call
