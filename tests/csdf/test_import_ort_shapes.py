"""Shapes ONNX shape inference leaves unknown come from one ONNX Runtime run of the model on
its static input (csdf/onnx_ort_shapes.py: torchvision's Swin-T at opset 17 needs
it at `explore info`); a model ORT cannot run either is refused with one line."""
from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from csdf.onnx_import import load_onnx
from deploy.steps.builder import Builder
from explorer.cli.main import main
from sdf3.errors import InputError
from test_real_patterns import deployed_diff


def contrib_gelu(path, height=8, dynamic: bool = False):
    """conv -> com.microsoft Gelu -> conv: ONNX has no schema for the contrib op, so its
    shape inference leaves the Gelu's output (and the last conv's) unknown; ORT runs it."""
    rng = np.random.default_rng(0)
    inits = [nh.from_array((rng.standard_normal((8, 3, 3, 3)) / 5).astype(np.float32), "w1"),
             nh.from_array((rng.standard_normal((8, 8, 3, 3)) / 8).astype(np.float32), "w2")]
    nodes = [h.make_node("Conv", ["input", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             h.make_node("Gelu", ["c1"], ["g"], name="gelu", domain="com.microsoft"),
             h.make_node("Conv", ["g", "w2"], ["output"], name="conv2", pads=[1, 1, 1, 1])]
    shape = ["n", 3, height, 6] if dynamic else [1, 3, height, 6]
    graph = h.make_graph(nodes, "gelu", [h.make_tensor_value_info("input", T.FLOAT, shape)],
                         [h.make_tensor_value_info("output", T.FLOAT, None)], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13),
                                               h.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def ort_shapes(path, tensors: list[str], height: int) -> dict[str, tuple[int, ...]]:
    """The shapes ORT gives those tensors, computed here on a copy exposing them."""
    model = onnx.load(str(path))
    model.graph.output.extend(onnx.ValueInfoProto(name=t) for t in tensors)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    got = sess.run(names, {"input": np.ones((1, 3, height, 6), np.float32)})
    return {n: tuple(v.shape) for n, v in zip(names, got) if n in tensors}


def test_onnx_inference_really_leaves_them_unknown(tmp_path):
    inferred = onnx.shape_inference.infer_shapes(onnx.load(str(contrib_gelu(tmp_path / "g.onnx"))),
                                                 data_prop=True)
    known = {v.name for v in inferred.graph.value_info if v.type.tensor_type.HasField("shape")}
    assert "c1" in known and "g" not in known


@pytest.mark.parametrize("height", [8, 7])
def test_shapes_from_onnx_runtime_and_the_network_deploys(tmp_path, height):
    path = contrib_gelu(tmp_path / "g.onnx", height)
    cnn = load_onnx(path, "g")
    assert [cnn.layer(n).op for n in cnn.order()] == ["Input", "Conv", "Opaque", "Conv"]
    assert cnn.shapes_from_ort == 2
    expect = ort_shapes(path, ["g", "output"], height)
    assert cnn.layer("gelu").output_shape == expect["g"] == (1, 8, height, 6)
    assert cnn.layer("conv2").output_shape == expect["output"]
    for parts in (False, True, 2):
        assert deployed_diff(cnn, tmp_path, parts) < 1e-5, parts


def test_info_says_where_the_shapes_came_from(tmp_path, capsys):
    contrib_gelu(tmp_path / "g.onnx")
    app = tmp_path / "app.yaml"
    app.write_text("name: g\ncnns:\n  - {name: g, model: g.onnx}\n")
    assert main(["info", str(app)]) == 0
    assert ("g: shapes of 2 tensors from one ONNX Runtime run (ONNX shape inference left "
            "them unknown)") in capsys.readouterr().out
    assert main(["info", str(app), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["cnns"]["g"]["shapes_from_ort"] == 2


def test_a_model_onnx_runtime_cannot_run_either_is_one_line(tmp_path):
    """An op neither ONNX nor ONNX Runtime knows: no shapes to take, one line naming why."""
    path = contrib_gelu(tmp_path / "g.onnx")
    model = onnx.load(str(path))
    model.graph.node[1].domain = "org.example"
    model.opset_import.append(h.make_opsetid("org.example", 1))
    onnx.save(model, str(path))
    with pytest.raises(InputError, match="ONNX Runtime cannot run the model") as info:
        load_onnx(path, "g")
    assert "\n" not in str(info.value) and "g.onnx" in str(info.value)


def test_a_0d_constant_stays_0d_in_a_step_model():
    """A Gather with a scalar index gives a scalar; as a [1] initializer it gave a 1-D
    result that a later Concat refused (Swin-T's attention, opset 18)."""
    b = Builder("float32")
    b.const("k", np.array(2, np.int64))
    b.const("v", np.arange(6, dtype=np.int64)[::2])           # not contiguous: copied
    dims = {t.name: list(t.dims) for t in b.inits}
    assert dims == {"k": [], "v": [3]}
    assert nh.to_array(b.inits[1]).tolist() == [0, 2, 4]
