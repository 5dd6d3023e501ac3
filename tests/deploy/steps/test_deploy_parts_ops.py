"""Whatever the parts rules (csdf/parts.py) let a search split, the deployment builds, and its
outputs equal the unmodified model's: one small ONNX model per op (and per attribute that
changes how rows are read), deployed with every layer that can by parts and with every other
one, and compared with a plain ONNX Runtime session on the original file."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from csdf.onnx_import import load_onnx
from csdf.parts import ROW_OPS, WINDOW_OPS, all_parts, can_split
from deploy.build.derive import derive
from deploy.run.measure import measure
from deploy_fixtures import make_plan

TOL = 1e-5
SHAPE = [1, 4, 7, 6]
RNG = np.random.default_rng(0)


def _t(name, values):
    return numpy_helper.from_array(np.asarray(values, np.float32), name)


def _w(name, shape, scale=0.3):
    return _t(name, RNG.standard_normal(shape) * scale)


def _case(op, attrs=None, extra_inputs=(), inits=(), second=False, shape=SHAPE):
    """x -> Relu -> OP(relu, *extra) -> Relu: the op between two layers that can go by parts,
    so both a ring input and a ring output meet its phases. `second`: the op's second input
    is another Relu of x (two tensor inputs)."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="pre")]
    ins = ["r"]
    if second:
        nodes.append(helper.make_node("Sigmoid", ["x"], ["s"], name="pre2"))
        ins.append("s")
    nodes.append(helper.make_node(op, ins + list(extra_inputs), ["o"], name="op", **(attrs or {})))
    nodes.append(helper.make_node("Relu", ["o"], ["y"], name="post"))
    return nodes, list(inits), list(shape)


CASES = {
    "Conv": _case("Conv", dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]),
                  ["w"], [_w("w", [5, 4, 3, 3])]),
    "Conv dilated": _case("Conv", dict(kernel_shape=[3, 3], pads=[2, 0, 2, 0], dilations=[2, 1], group=4),
                          ["w", "b"], [_w("w", [4, 1, 3, 3]), _w("b", [4])]),
    "Conv grouped": _case("Conv", dict(kernel_shape=[2, 3], pads=[0, 1, 1, 1], group=2),
                          ["w"], [_w("w", [6, 2, 2, 3])]),
    # 1x1: parts computed in the ring's layout (deploy/steps/rowwise.py)
    "Conv 1x1": _case("Conv", dict(kernel_shape=[1, 1], pads=[0, 1, 0, 2], strides=[1, 2], group=2),
                      ["w", "b"], [_w("w", [6, 2, 1, 1]), _w("b", [6])]),
    "MaxPool": _case("MaxPool", dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2],
                                     ceil_mode=1)),
    "AveragePool": _case("AveragePool", dict(kernel_shape=[3, 2], strides=[2, 2])),
    "AveragePool pads": _case("AveragePool", dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                                                  strides=[2, 2], count_include_pad=0)),
    # border divisors of a window running past the padding (ceil_mode)
    "AveragePool ceil count_include_pad": _case(
        "AveragePool", dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2], ceil_mode=1,
                            count_include_pad=1), shape=[1, 4, 8, 8]),
    "AveragePool ceil past no pad": _case(
        "AveragePool", dict(kernel_shape=[3, 3], pads=[1, 1, 0, 1], strides=[2, 2], ceil_mode=1,
                            count_include_pad=1)),
    "Add": _case("Add", second=True),
    "Add per-channel constant": _case("Add", extra_inputs=["k"], inits=[_w("k", [1, 4, 1, 1])]),
    "Mul": _case("Mul", second=True),
    "Mul constant": _case("Mul", extra_inputs=["k"], inits=[_w("k", [1, 4, 1, 1])]),
    "Relu": _case("Relu"),
    "Clip": _case("Clip", extra_inputs=["lo", "hi"], inits=[_t("lo", -0.1), _t("hi", 0.4)]),
    "Sigmoid": _case("Sigmoid"),
    "HardSigmoid": _case("HardSigmoid", dict(alpha=0.3, beta=0.4)),
    "HardSwish": _case("HardSwish"),
    "LeakyRelu": _case("LeakyRelu", dict(alpha=0.2)),
    "BatchNormalization": _case("BatchNormalization", extra_inputs=["g", "be", "m", "v"],
                                inits=[_w("g", [4]), _w("be", [4]), _w("m", [4]),
                                       _t("v", np.abs(RNG.standard_normal(4)) + 0.5)]),
    "Concat channels": _case("Concat", dict(axis=1), second=True),
    "Concat width": _case("Concat", dict(axis=3), second=True),
    # vertical pads, whose phases in the padding rows read no row
    "Pad": _case("Pad", dict(mode="constant"), ["pads", "val"],
                 [numpy_helper.from_array(np.array([0, 0, 2, 1, 0, 0, 1, 0], np.int64), "pads"),
                  _t("val", 0.25)]),
    "Pad channels and width": _case(
        "Pad", dict(mode="constant"), ["pads"],
        [numpy_helper.from_array(np.array([0, 1, 0, 2, 0, 0, 0, 1], np.int64), "pads")]),
}


def save_model(nodes, inits, shape, path) -> str:
    graph = helper.make_graph(nodes, "case", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    model = onnx.shape_inference.infer_shapes(model)
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


def test_every_op_the_parts_rules_allow_has_a_case():
    """The rules and this walk agree: an op added to csdf/parts.py needs a case here."""
    covered = {key.split()[0] for key in CASES}
    assert set(WINDOW_OPS) | set(ROW_OPS) | {"Concat", "Pad"} == covered


@pytest.mark.parametrize("key", sorted(CASES))
def test_op_by_parts_deploys_and_matches(key, tmp_path):
    nodes, inits, shape = CASES[key]
    cnn = load_onnx(save_model(nodes, inits, shape, str(tmp_path / "m.onnx")), "m")
    op_layer = next(n for n in cnn.order() if cnn.layer(n).op == key.split()[0])
    assert can_split(cnn.layer(op_layer)), key
    parts = all_parts(cnn)
    assert parts[op_layer] == cnn.layer(op_layer).output_shape[2] > 1
    # all that can by parts, and the op alone by parts between whole neighbours
    alone = {n: (parts[n] if n == op_layer else 1) for n in cnn.order()}
    for i, phases in enumerate([parts, alone]):
        plan = make_plan([cnn], {"m": phases})
        out = tmp_path / f"dep{i}"
        derive(plan, {"m": cnn}, out)
        result = measure(out, frames=2, threads=1)
        assert result["max_abs_diff"]["m"] < TOL, (key, i, result["max_abs_diff"])
        assert result["calls_per_frame"]["m"] == len(plan["firings"]["m.all"])
