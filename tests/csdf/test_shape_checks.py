"""Shapes the app file's input_shape gives that a model's constants contradict
(csdf/shape_checks.py): refused at import in one line naming the layer and both shapes;
the shapes the model was made for import."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
import yaml
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from csdf.onnx_import import load_onnx
from refusals import refused
from sdf3.errors import InputError

FEATURES = 4 * 16 * 16          # what the head was made for: 4 channels of 16 x 16


def head_net(path, head: str):
    """input [1, C, H, W] (C, H, W dynamic) -> conv 3x3 (3 -> 4) + Relu -> `head` -> [1, 10]."""
    rng = np.random.default_rng(0)
    inits = [nh.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.2, "w")]
    nodes = [h.make_node("Conv", ["input", "w"], ["c"], name="conv", pads=[1] * 4),
             h.make_node("Relu", ["c"], ["r"], name="relu")]
    if head in ("gemm", "gemm_t"):
        t = head == "gemm_t"
        fw = rng.standard_normal((FEATURES, 10) if t else (10, FEATURES)) * 0.02
        inits.append(nh.from_array(fw.astype(np.float32), "fw"))
        nodes += [h.make_node("Flatten", ["r"], ["f"], name="flat"),
                  h.make_node("Gemm", ["f", "fw"], ["output"], name="fc", transB=0 if t else 1)]
    else:
        inits += [nh.from_array(np.array([0, FEATURES] if head == "reshape0" else [1, -1], np.int64), "shape"),
                  nh.from_array(rng.standard_normal((FEATURES, 10)).astype(np.float32) * 0.02, "mw")]
        nodes += [h.make_node("Reshape", ["r", "shape"], ["f"], name="reshape"),
                  h.make_node("MatMul", ["f", "mw"], ["output"], name="fc")]
    graph = h.make_graph(nodes, "n", [h.make_tensor_value_info("input", T.FLOAT, [1, "C", "H", "W"])],
                         [h.make_tensor_value_info("output", T.FLOAT, [1, 10])], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


CASES = [   # (head, input_shape, words of the refusal or None: imports)
    ("gemm", [1, 3, 16, 16], None),
    ("gemm", [1, 3, 64, 64], "layer 'fc' (Gemm): its input 'f' is [1, 16384], 16384 features, "
                             "but its weight 'fw' [10, 1024] takes 1024"),
    ("gemm", [1, 3, 16, 8], "[1, 512], 512 features"),
    ("gemm_t", [1, 3, 16, 16], None),
    ("gemm_t", [1, 3, 32, 16], "weight 'fw' [1024, 10] takes 1024"),
    ("matmul", [1, 3, 16, 16], None),
    ("matmul", [1, 3, 64, 64], "layer 'fc' (MatMul): its input 'f' is [1, 16384]"),
    ("reshape0", [1, 3, 16, 16], None),
    ("reshape0", [1, 3, 64, 64], "layer 'reshape' (Reshape): its input 'r' is [1, 4, 64, 64] "
                                 "(16384 elements), which target shape [0, 1024] cannot hold"),
    ("gemm", [1, 5, 16, 16], "layer 'conv' (Conv): its input 'input' is [1, 5, 16, 16], 5 "
                             "channels, but its weight 'w' [4, 3, 3, 3] (group 1) takes 3"),
]


@pytest.mark.parametrize("head, shape, words", CASES, ids=[f"{c[0]}-{c[1][1]}x{c[1][2]}x{c[1][3]}" for c in CASES])
def test_input_shapes_against_the_models_constants(tmp_path, head, shape, words):
    path = head_net(tmp_path / "m.onnx", head)
    if words is None:
        cnn = load_onnx(path, "net", input_shape=shape)
        assert cnn.layer("fc").output_shape[:2] == (1, 10)
        return
    with pytest.raises(InputError) as err:
        load_onnx(path, "net", input_shape=shape)
    line = str(err.value)
    assert "\n" not in line and line.startswith(f"{path}: ") and words in line, line
    assert f"(with graph input 'input' {shape})" in line


def test_explore_info_refuses_it_in_one_line(tmp_path, capsys):
    head_net(tmp_path / "m.onnx", "gemm")
    app = tmp_path / "app.yaml"
    app.write_text(yaml.safe_dump({"name": "t", "cnns": [
        {"name": "net", "model": "m.onnx", "input_shape": [1, 3, 64, 64]}]}))
    refused(capsys, ["info", str(app)], "cnns[0].model", "layer 'fc' (Gemm)", "[10, 1024]")
