"""Every primitive of deploy/steps/primitives computes exactly the plain ONNX Conv (run by ONNX
Runtime) on seeded random layers: strides, asymmetric pads, groups (depthwise too),
dilation, odd sizes, batch 2, with and without bias; and each refuses what it says."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from csdf.model import Layer
from deploy.steps import primitives
from deploy.steps.parts import InPort, OutPort, step_model
from sdf3.errors import InputError

# (n, c_in, h, w, c_out, k, stride, pads [t, l, b, r], dilation, group, bias)
CASES = [
    (1, 3, 9, 7, 5, 3, 1, [1, 1, 1, 1], 1, 1, True),
    (1, 4, 10, 11, 6, 3, 2, [1, 0, 2, 1], 1, 1, True),
    (2, 6, 8, 8, 9, 3, 1, [0, 2, 1, 0], 2, 3, False),
    (1, 8, 12, 9, 8, 3, 1, [1, 1, 1, 1], 1, 8, True),          # depthwise
    (1, 5, 7, 13, 7, 5, 1, [2, 2, 2, 2], 1, 1, True),
    (1, 16, 6, 6, 32, 1, 1, [0, 0, 0, 0], 1, 1, True),        # pointwise
    (1, 6, 15, 15, 4, 7, 3, [3, 3, 3, 3], 1, 2, True),
    (1, 3, 5, 6, 2, 3, 1, [0, 0, 0, 0], 1, 1, False),           # odd output (Winograd crop)
]


def conv_layer(case, seed):
    n, c, h, w, o, k, s, pads, d, g, bias = case
    rng = np.random.default_rng(seed)
    params = {"W": rng.standard_normal((o, c // g, k, k)).astype(np.float32)}
    if bias:
        params["B"] = rng.standard_normal(o).astype(np.float32)
    ho = (h + pads[0] + pads[2] - d * (k - 1) - 1) // s + 1
    wo = (w + pads[1] + pads[3] - d * (k - 1) - 1) // s + 1
    hyper = {"kernel_shape": [k, k], "strides": [s, s], "pads": pads, "dilations": [d, d],
             "group": g, "activation": []}
    layer = Layer("conv", "Conv", hyper, params, ["x"], (n, o, ho, wo))
    return layer, (n, c, h, w), rng.standard_normal((n, c, h, w)).astype(np.float32)


def run(layer, in_shape, x, primitive):
    model = step_model(layer, [InPort("in0", in_shape, "nchw", in_shape[2])],
                       [OutPort("out0", layer.output_shape, "nchw")], "float32",
                       primitive=primitive)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"],
                                disabled_optimizers=["NchwcTransformer"])
    return sess.run(None, {"in0": x})[0]


@pytest.mark.parametrize("case", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_every_applicable_primitive_equals_the_plain_conv(case):
    layer, in_shape, x = conv_layer(case, seed=len(str(case)))
    want = run(layer, in_shape, x, None)
    assert want.shape == layer.output_shape
    names = primitives.applicable(layer, in_shape)
    assert {"ort_nchw", "ort_nchwc", "im2col", "kn2row"} <= set(names)
    for name in names:
        got = run(layer, in_shape, x, name)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()),
                                   err_msg=name)


def test_winograd_applies_exactly_to_3x3_stride1_undilated():
    taken = [case for case in CASES if "winograd" in primitives.applicable(*conv_layer(case, 0)[:2])]
    assert [CASES.index(c) for c in taken] == [0, 3, 7]
    layer, shape, _ = conv_layer(CASES[1], 0)
    assert primitives.refusals(layer, shape) == {"winograd": "stride 2x2 (needs 1)"}
    layer, shape, _ = conv_layer(CASES[2], 0)
    assert primitives.refusals(layer, shape) == {"winograd": "dilation 2x2 (needs 1)"}


def test_non_conv_layers_have_the_ort_forms_only():
    pool = Layer("p", "MaxPool", {"kernel_shape": [2, 2]}, {}, ["x"], (1, 4, 2, 2))
    assert primitives.applicable(pool, (1, 4, 4, 4)) == ["ort_nchw", "ort_nchwc"]


def test_a_refused_or_unknown_primitive_is_an_input_error():
    layer, shape, _ = conv_layer(CASES[1], 0)
    with pytest.raises(InputError, match="winograd refuses it: stride 2x2"):
        run(layer, shape, np.zeros(shape, np.float32), "winograd")
    with pytest.raises(InputError, match="primitive 'fft'"):
        primitives.get("fft")


def test_winograd_stores_16_9_of_the_weights():
    layer, shape, _ = conv_layer(CASES[0], 0)
    model = step_model(layer, [InPort("in0", shape, "nchw", shape[2])],
                       [OutPort("out0", layer.output_shape, "nchw")], "float32", primitive="winograd")
    sizes = {t.name: int(np.prod(t.dims)) for t in model.graph.initializer if t.name.startswith("param:")}
    assert sizes["param:conv:W_winograd"] * 9 == layer.params["W"].size * 16
