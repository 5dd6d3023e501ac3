"""A deployment of an export with dynamic height and width: the reference model it writes
has the static input shape the CNN was imported with, so the reference session, the frames
and the step models agree, and the outputs equal ONNX Runtime's on the original file."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort

from csdf.onnx_import import load_onnx
from csdf.parts import all_parts
from deploy.build.derive import derive
from deploy.run.measure import measure
from onnx_cases import Net
from deploy_fixtures import make_plan


def _dynamic_net(path):
    n = Net(5)
    x = n.op("Relu", [n.conv("input", 3, 8)])
    n.conv(x, 8, 4)
    n.nodes[-1].output[0] = "output"
    return n.save(path, [("input", ["N", 3, "H", "W"])], [("output", ["N", 4, "H", "W"])])


def test_dynamic_export_deploys_with_the_fixed_shape(tmp_path):
    source = _dynamic_net(tmp_path / "d.onnx")
    cnn = load_onnx(source, "d", input_shape=[1, 3, 9, 7])
    for i, phases in enumerate([None, all_parts(cnn)]):
        plan = make_plan([cnn], {"d": phases or {n: 1 for n in cnn.order()}})
        out = tmp_path / f"dep{i}"
        derive(plan, {"d": cnn}, out)
        ref = onnx.load(str(out / "reference" / "d.onnx"))
        dims = [d.dim_value for d in ref.graph.input[0].type.tensor_type.shape.dim]
        assert dims == [1, 3, 9, 7]
        result = measure(out, frames=2, threads=1)
        assert result["max_abs_output"]["d"] > 0.1
        assert result["max_abs_diff"]["d"] <= 1e-5 * result["max_abs_output"]["d"]
    # the reference is the source model with its inputs fixed: same outputs on one frame
    frame = np.random.default_rng(0).standard_normal((1, 3, 9, 7)).astype(np.float32)
    a = ort.InferenceSession(str(source), providers=["CPUExecutionProvider"]).run(None, {"input": frame})
    b = ort.InferenceSession(str(out / "reference" / "d.onnx"),
                             providers=["CPUExecutionProvider"]).run(None, {"input": frame})
    assert np.array_equal(a[0], b[0])


def test_dynamic_resize_to_twice_the_input_size(tmp_path):
    """A dynamic export's upsampling: Resize `sizes` computed from the input's Shape, which
    the fixed input_shape turns into constants; deployed with the convs by rows and run."""
    n = Net(7)
    x = n.op("Relu", [n.conv("input", 3, 6)])
    i64 = lambda name, v: n.init(name, np.array(v, np.int64), np.int64)  # noqa: E731
    hw = n.op("Slice", [n.op("Shape", ["input"]), i64("h0", [2]), i64("h1", [4])])
    nc = n.op("Slice", [n.op("Shape", [x]), i64("c0", [0]), i64("c1", [2])])
    sizes = n.op("Concat", [nc, n.op("Mul", [hw, i64("two", [2])])], axis=0)
    n.conv(n.op("Resize", [x, "", "", sizes], mode="nearest"), 6, 4)
    n.nodes[-1].output[0] = "output"
    source = n.save(tmp_path / "r.onnx", [("input", ["N", 3, "H", "W"])],
                    [("output", ["N", 4, None, None])])
    cnn = load_onnx(source, "r", input_shape=[1, 3, 7, 6])
    assert cnn.layer(cnn.order()[-1]).output_shape == (1, 4, 14, 12)
    plan = make_plan([cnn], {"r": all_parts(cnn)})
    derive(plan, {"r": cnn}, tmp_path / "dep", regions=True)
    result = measure(tmp_path / "dep", frames=2, threads=1)
    assert result["max_abs_output"]["r"] > 0.1
    assert result["max_abs_diff"]["r"] <= 1e-5 * result["max_abs_output"]["r"]
