"""Valid ONNX models the importer or the deployment once mis-handled: each class
either deploys with outputs equal to ONNX Runtime on the original file, or is refused with
one line before any work."""
from __future__ import annotations

import os
import shutil

import numpy as np
import pytest
from onnx import TensorProto as T

from csdf.onnx_import import load_onnx
from csdf.parts import all_parts
from deploy.build.derive import derive
from deploy.run.measure import measure
from onnx_cases import Net
from sdf3.errors import InputError
from deploy_fixtures import make_plan


def deploy_diff(cnn, tmp_path, phases=None) -> dict:
    phases = phases or {n: 1 for n in cnn.order()}
    plan = make_plan([cnn], {cnn.name: phases})
    out = tmp_path / f"dep{sum(phases.values())}"
    shutil.rmtree(out, ignore_errors=True)
    derive(plan, {cnn.name: cnn}, out)
    result = measure(out, frames=2, threads=1)
    assert result["arena_bytes"] == plan["buffer_bytes"]
    assert result["max_abs_output"][cnn.name] > 0.1
    return result


def close(result, cnn, rel=1e-5) -> bool:
    return result["max_abs_diff"][cnn.name] <= rel * result["max_abs_output"][cnn.name]


def test_softmax_mid_graph_before_opset_13(tmp_path):
    """Opset 11 Softmax(axis=1) on [1, C, H, W] normalises over C*H*W: kept verbatim."""
    n = Net(10)
    s = n.op("Softmax", [n.conv("input", 3, 4)], axis=1)
    n.op("Mul", [s, n.init("k", 50.0)])
    n.nodes[-1].output[0] = "output"
    path = n.save(tmp_path / "s.onnx", [("input", [1, 3, 4, 4])], [("output", [1, 4, 4, 4])], opset=11)
    cnn = load_onnx(path, "s")
    assert cnn.layer(cnn.order()[2]).op == "Opaque"
    assert close(deploy_diff(cnn, tmp_path), cnn)


@pytest.mark.parametrize("parts", [False, True])
def test_add_per_pixel_and_mul_per_row_constants(tmp_path, parts):
    n = Net(11)
    c = n.conv("input", 3, 4)
    a = n.op("Add", [n.init("pix", n.rng.standard_normal((1, 4, 5, 6))), c])   # constant first
    n.op("Mul", [a, n.init("row", n.rng.uniform(0.5, 2, (1, 1, 5, 1)))])
    n.nodes[-1].output[0] = "output"
    path = n.save(tmp_path / "a.onnx", [("input", [1, 3, 5, 6])], [("output", [1, 4, 5, 6])])
    cnn = load_onnx(path, "a")
    phases = all_parts(cnn) if parts else None
    if parts:   # a row-varying constant keeps its layer whole; the conv still goes by parts
        assert phases[cnn.order()[1]] == 5 and phases[cnn.order()[2]] == phases[cnn.order()[3]] == 1
    assert close(deploy_diff(cnn, tmp_path, phases), cnn)


def test_single_identity_model(tmp_path):
    n = Net(12)
    n.op("Identity", ["input"])
    n.nodes[-1].output[0] = "output"
    path = n.save(tmp_path / "i.onnx", [("input", [1, 2, 3, 3])], [("output", [1, 2, 3, 3])])
    cnn = load_onnx(path, "i")
    assert [cnn.layer(x).op for x in cnn.order()] == ["Input", "Identity"]
    result = deploy_diff(cnn, tmp_path)
    assert result["arena_bytes"] == 4 * 2 * 3 * 3 and result["max_abs_diff"]["i"] == 0.0


@pytest.mark.parametrize("second", [[1, 3, 4, 4], [1, 2, 4, 4]])
def test_two_graph_inputs_refused_in_one_line(tmp_path, second):
    n = Net(13)
    n.op("Add", [n.conv("input", 3, 2, k=1), n.conv("other", second[1], 2, k=1)])
    n.nodes[-1].output[0] = "output"
    path = n.save(tmp_path / "two.onnx", [("input", [1, 3, 4, 4]), ("other", second)],
                  [("output", [1, 2, 4, 4])])
    with pytest.raises(InputError, match=r"graph input 'other': expected one graph input per CNN") as err:
        load_onnx(path, "two")
    assert "\n" not in str(err.value)


def test_dangling_node_is_dropped(tmp_path):
    n = Net(14)
    c = n.conv("input", 3, 4)
    n.op("Sigmoid", [c])                     # nobody reads it
    n.op("Relu", [c])
    n.nodes[-1].output[0] = "output"
    path = n.save(tmp_path / "d.onnx", [("input", [1, 3, 4, 4])], [("output", [1, 4, 4, 4])])
    cnn = load_onnx(path, "d")
    assert [cnn.layer(x).op for x in cnn.order()] == ["Input", "Conv"]
    assert close(deploy_diff(cnn, tmp_path), cnn)


def test_fp16_model_inputs_and_outputs(tmp_path):
    n = Net(15)
    w = n.init("w", n.rng.standard_normal((4, 3, 3, 3)) / 5, np.float16)
    n.op("Conv", ["input", w], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    n.op("Transpose", [n.nodes[-1].output[0]], perm=[0, 1, 3, 2])      # an opaque step in fp16
    n.nodes[-1].output[0] = "output"
    path = n.save(tmp_path / "h.onnx", [("input", [1, 3, 4, 4])], [("output", [1, 4, 4, 4])], elem=T.FLOAT16)
    cnn = load_onnx(path, "h")
    assert [cnn.layer(x).op for x in cnn.order()] == ["Input", "Conv", "Opaque"]
    assert close(deploy_diff(cnn, tmp_path), cnn, rel=3e-3)    # the reference computes in fp16


def test_external_data_from_another_directory(tmp_path, monkeypatch):
    n = Net(16)
    n.conv("input", 3, 8)
    n.nodes[-1].output[0] = "output"
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    path = n.save(model_dir / "e.onnx", [("input", [1, 3, 6, 6])], [("output", [1, 8, 6, 6])],
                  save_as_external_data=True, all_tensors_to_one_file=True, location="e.data",
                  size_threshold=0)
    assert (model_dir / "e.data").is_file()
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    cnn = load_onnx(os.path.relpath(path), "e")
    assert close(deploy_diff(cnn, tmp_path), cnn)


def test_pad_with_a_constant_value(tmp_path):
    n = Net(17)
    pads = n.init("pads", [0, 0, 1, 2, 0, 0, 1, 2], np.int64)
    value = n.init("value", [0.75])             # a 1-element tensor, as some exporters write
    n.op("Pad", [n.conv("input", 3, 4), pads, value], mode="constant")
    n.nodes[-1].output[0] = "output"
    path = n.save(tmp_path / "p.onnx", [("input", [1, 3, 4, 4])], [("output", [1, 4, 6, 8])])
    cnn = load_onnx(path, "p")
    assert cnn.layer(cnn.order()[2]).hyper["value"] == 0.75
    assert close(deploy_diff(cnn, tmp_path), cnn)


def test_matmul_of_a_4d_tensor_by_constant(tmp_path):
    n = Net(18)
    n.op("MatMul", [n.conv("input", 3, 4), n.weight("w", (6, 5), 6)])
    n.nodes[-1].output[0] = "output"
    path = n.save(tmp_path / "m.onnx", [("input", [1, 3, 4, 6])], [("output", [1, 4, 4, 5])])
    cnn = load_onnx(path, "m")
    mm = cnn.layer(cnn.order()[2])
    assert mm.op == "Opaque" and mm.output_shape == (1, 4, 4, 5) and mm.param_count == 30
    assert close(deploy_diff(cnn, tmp_path), cnn)


def test_conv_group_not_dividing_channels_refused(tmp_path):
    n = Net(19)
    n.op("Conv", ["input", n.weight("w", (4, 2, 3, 3), 18)], kernel_shape=[3, 3], group=2, name="bad")
    n.nodes[-1].output[0] = "output"
    path = tmp_path / "g.onnx"
    try:
        n.save(path, [("input", [1, 5, 4, 4])], [("output", [1, 4, 2, 2])])
    except Exception:   # the checker may refuse it first; the importer must too
        import onnx
        from onnx import helper as h
        graph = h.make_graph(n.nodes, "g", [h.make_tensor_value_info("input", T.FLOAT, [1, 5, 4, 4])],
                             [h.make_tensor_value_info("output", T.FLOAT, [1, 4, 2, 2])], n.inits)
        onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 13)]), str(path))
    with pytest.raises(InputError, match=r"node 'bad' \(Conv\): group 2 does not divide the 5 input channels"):
        load_onnx(path, "g")
