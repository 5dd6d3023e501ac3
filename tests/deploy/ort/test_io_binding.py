"""A session bound to arena views (deploy/ort/io_binding.py): ports bound in the shape the
model declares, results written in place, equal element by element to numpy's."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

from deploy.ort.io_binding import bind_views, bound_shape, runner


def test_bound_shape():
    flat = np.zeros(24, np.float32)
    assert bound_shape(flat, [1, 2, 3, 4]) == [1, 2, 3, 4]     # static, as many elements
    assert bound_shape(flat, [1, 2, 3, 5]) == [24]             # another size: the view's
    assert bound_shape(flat, ["n", 24]) == [24]                # symbolic: the view's


def test_views_are_read_and_written_in_place():
    # y = relu(x) + 1 on a port declared [1, 2, 3, 4]; the arena holds both flat
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 3, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 3, 4])
    one = helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["r"]),
                               helper.make_node("Add", ["r", "one"], ["y"])], "g", [x], [y], [one])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    arena = np.zeros(64, np.float32)
    src, dst = arena[:24], arena[32:56]
    call = runner(sess, bind_views(sess, {"x": src}, {"y": dst}), ort.RunOptions())
    for seed in range(2):          # the same binding sees what the arena holds at each call
        src[:] = np.random.default_rng(seed).standard_normal(24, dtype=np.float32)
        call()
        np.testing.assert_array_equal(dst, np.maximum(src, 0) + 1)
    assert not arena[24:32].any() and not arena[56:].any()     # nothing written beside
