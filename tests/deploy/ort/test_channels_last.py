"""Channels-last storage of int8 tensors (deploy/ort/channels_last.py): the permutations that
read and write the stored tensor, checked with numpy, and a stripped graph run by ONNX
Runtime on the stored bytes against the original graph on the logical ones, element by
element."""
from __future__ import annotations

import itertools

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from deploy.ort import channels_last as cl

RNG = np.random.default_rng(0)


def test_a_transposed_identity_is_stripped_to_the_identity_on_nhwc_ports():
    """A step reading its NCHW port through Transpose(perm=[0, 2, 3, 1]) and writing it
    back through Transpose(perm=[0, 3, 1, 2]) accepts and emits channels-last; stripped,
    it is the Identity between NHWC ports."""
    x = helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 8, 4, 5])
    y = helper.make_tensor_value_info("y", TensorProto.UINT8, [1, 8, 4, 5])
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 3, 1]),
             helper.make_node("Identity", ["t"], ["u"]),
             helper.make_node("Transpose", ["u"], ["y"], perm=[0, 3, 1, 2])]
    m = helper.make_model(helper.make_graph(nodes, "g", [x], [y]))
    form = cl.step_form(m, {"x": "nchw", "y": "nchw"})
    assert (sorted(form.accepts), sorted(form.emits)) == (["x"], ["y"])
    s = cl.strip(m, {"x": "nchw", "y": "nchw"})
    assert [n.op_type for n in s.graph.node] == ["Identity"]
    assert cl.port_dims(s, "x") == [1, 4, 5, 8]


@pytest.mark.parametrize("layout", ["nchw", "hncw"])
def test_reading_and_writing_permutations(layout):
    logical = RNG.integers(0, 255, (2, 3, 4, 5)).astype(np.uint8)
    stored = logical.transpose(cl.PERM[layout])
    for perm in itertools.permutations(range(4)):
        perm = list(perm)
        # a Transpose reading the stored tensor gives what it gave reading the logical one
        np.testing.assert_array_equal(stored.transpose(cl.reading(perm, layout)), logical.transpose(perm))
        # a Transpose writing a tensor stored as `layout` writes its stored form
        x = logical.transpose(np.argsort(perm))          # a tensor that perm makes logical
        np.testing.assert_array_equal(x.transpose(cl.writing(perm, layout)),
                                      x.transpose(perm).transpose(cl.PERM[layout]))


def _run(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _window_model() -> onnx.ModelProto:
    """A by-parts step as ONNX Runtime leaves it for channels-last kernels: rows gathered from
    a ring [S, 1, C, W], masked per row, joined to a row written in, transposed to NHWC,
    computed (a MaxPool standing in for the kernel, on NHWC as [N, H, W, C] -> pooled over
    H and W), written back to a ring through Transpose, and a whole NCHW tensor read and
    written through Transposes."""
    S, C, W = 5, 3, 4
    ring = helper.make_tensor_value_info("ring", TensorProto.UINT8, [S, 1, C, W])
    idx = helper.make_tensor_value_info("idx", TensorProto.INT32, [2])
    mask = helper.make_tensor_value_info("mask", TensorProto.INT32, [3])
    row = helper.make_tensor_value_info("row", TensorProto.UINT8, [1, 1, W, C])   # NHWC, 1 row
    whole = helper.make_tensor_value_info("whole", TensorProto.UINT8, [1, C, 3, W])
    out_ring = helper.make_tensor_value_info("out_ring", TensorProto.UINT8, [3, 1, C, W])
    out_whole = helper.make_tensor_value_info("out_whole", TensorProto.UINT8, [1, C, 3, W])
    inits = [numpy_helper.from_array(np.array([3, 1, 1, 1], np.int64), "shape"),
             numpy_helper.from_array(np.array(7, np.uint8), "fill")]
    nodes = [
        helper.make_node("Gather", ["ring", "idx"], ["g"], axis=0),
        helper.make_node("Cast", ["mask"], ["m"], to=TensorProto.BOOL),
        helper.make_node("Transpose", ["row"], ["r"], perm=[1, 0, 3, 2]),      # NHWC -> rows
        helper.make_node("Concat", ["g", "r"], ["rows"], axis=0),
        helper.make_node("Reshape", ["m", "shape"], ["m4"]),
        helper.make_node("Where", ["m4", "rows", "fill"], ["masked"]),
        helper.make_node("Transpose", ["masked"], ["nhwc"], perm=[1, 0, 3, 2]),
        helper.make_node("Transpose", ["whole"], ["w_nhwc"], perm=[0, 2, 3, 1]),
        helper.make_node("Max", ["nhwc", "w_nhwc"], ["y"]),
        helper.make_node("Transpose", ["y"], ["out_ring"], perm=[1, 0, 3, 2]),
        helper.make_node("Transpose", ["y"], ["out_whole"], perm=[0, 3, 1, 2]),
    ]
    graph = helper.make_graph(nodes, "window", [ring, idx, mask, row, whole], [out_ring, out_whole], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_stripped_window_reads_and_writes_stored_bytes():
    model = _window_model()
    layouts = {"ring": "hncw", "whole": "nchw", "out_ring": "hncw", "out_whole": "nchw"}
    form = cl.step_form(model, layouts)
    assert form.accepts == {"ring", "whole"} and form.emits == {"out_ring", "out_whole"}
    stripped = cl.strip(model, layouts)
    assert [n.op_type for n in stripped.graph.node].count("Transpose") < 5
    ring = RNG.integers(0, 255, (5, 1, 3, 4)).astype(np.uint8)
    whole = RNG.integers(0, 255, (1, 3, 3, 4)).astype(np.uint8)
    row = RNG.integers(0, 255, (1, 1, 4, 3)).astype(np.uint8)
    feeds = {"idx": np.array([4, 0], np.int32), "mask": np.array([1, 0, 1], np.int32), "row": row}
    want = _run(model, {**feeds, "ring": ring, "whole": whole})
    got = _run(stripped, {**feeds, "ring": ring.transpose(cl.PERM["hncw"]).copy(),
                          "whole": whole.transpose(cl.PERM["nchw"]).copy()})
    assert cl.port_dims(stripped, "ring") == [5, 1, 4, 3]
    np.testing.assert_array_equal(got[0], want[0].transpose(cl.PERM["hncw"]))
    np.testing.assert_array_equal(got[1], want[1].transpose(cl.PERM["nchw"]))


def test_a_port_read_otherwise_stays_as_it_is():
    """A ring whose rows reach anything but a Transpose (here a Reshape that is no rows
    reshape) cannot be read channels-last; nor can an output written by
    a Transpose whose result the step reads too."""
    model = _window_model()
    g = model.graph
    g.node.append(helper.make_node("Reshape", ["g", "shape2"], ["flat"]))
    g.initializer.append(numpy_helper.from_array(np.array([-1], np.int64), "shape2"))
    g.output.append(helper.make_tensor_value_info("flat", TensorProto.UINT8, [24]))
    g.node.append(helper.make_node("Neg", ["out_whole"], ["negated"]))
    g.output.append(helper.make_tensor_value_info("negated", TensorProto.UINT8, [1, 3, 3, 4]))
    form = cl.step_form(model, {"ring": "hncw", "whole": "nchw", "out_ring": "hncw",
                                "out_whole": "nchw"})
    assert "ring" not in form.accepts and "whole" in form.accepts
    assert "out_whole" not in form.emits and "out_ring" in form.emits
