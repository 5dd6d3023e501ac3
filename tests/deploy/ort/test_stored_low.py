"""ONNX Runtime's optimised form of a step model whose weights are stored in fp16 or int8
(deploy/ort/optimize.py): the weights stay at their type behind a Cast (ONNX Runtime folded
them to fp32; `stored_low` stores them back), the conv keeps the NCHWc kernel, and the
optimised model computes what the step model computes."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from csdf.model import Layer
from deploy.ort.optimize import optimize
from deploy.ort.weights import external_arrays
from deploy.quant.stored import Weights
from deploy.steps.parts import InPort, OutPort, step_model

NCHWC = "com.microsoft.nchwc"


@pytest.mark.parametrize("kind, stored", [("float16", np.float16), ("int8", np.int8)])
def test_stored_weights_keep_their_type_and_the_nchwc_kernel(tmp_path, kind, stored):
    rng = np.random.default_rng(7)
    layer = Layer("conv", "Conv", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [1, 1],
                                   "dilations": [1, 1], "group": 1, "activation": ["Relu"]},
                  {"W": (rng.standard_normal((32, 32, 3, 3)) * 0.1).astype(np.float32),
                   "B": rng.standard_normal(32).astype(np.float32)},
                  inputs=["x"], output_shape=[1, 32, 12, 10])
    ins = [InPort("in0", (1, 32, 12, 10), "nchw", 12)]
    outs = [OutPort("out0", (1, 32, 12, 10), "nchw")]
    model = step_model(layer, ins, outs, "float16", weights=Weights(kind))
    src, target = tmp_path / "step.onnx", tmp_path / "opt.onnx"
    onnx.save(model, str(src))
    optimize(str(src), str(target), "nchwc")
    opt = onnx.load(str(target), load_external_data=False)
    assert any(n.domain == NCHWC and n.op_type == "Conv" for n in opt.graph.node)
    arrays = external_arrays(opt, tmp_path)
    big = [a for a in arrays.values() if a.size >= 32 * 32 * 9]
    assert big and all(a.dtype == stored for a in big), [(a.dtype, a.shape) for a in arrays.values()]
    assert not any(a.dtype == np.float32 and a.size >= 32 * 32 * 9 for a in arrays.values())
    # the optimised form, loaded as the backend loads it, computes what the step model does
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    values = {n: ort.OrtValue.ortvalue_from_numpy(a) for n, a in arrays.items()}
    for name, value in values.items():
        opts.add_initializer(name, value)
    run = tmp_path / "run.onnx"
    onnx.save(opt, str(run))
    x = rng.standard_normal((1, 32, 12, 10)).astype(np.float16)
    got = ort.InferenceSession(str(run), opts, providers=["CPUExecutionProvider"]).run(None, {"in0": x})[0]
    want = ort.InferenceSession(str(src), providers=["CPUExecutionProvider"]).run(None, {"in0": x})[0]
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2e-3, atol=2e-3)
