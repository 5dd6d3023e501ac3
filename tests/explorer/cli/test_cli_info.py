"""`explore info`: the figures a user sees, checked against hand counts and the paper."""
from __future__ import annotations

import json
from pathlib import Path

import yaml

from conftest import data_path
from explorer.cli.main import main

APPS = Path(__file__).resolve().parents[3] / "apps"


def _info(capsys, *args: str) -> dict:
    assert main(["info", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_worked_example_naive_total_is_table1(capsys):
    info = _info(capsys, str(APPS / "worked_example.yaml"))
    assert info["total"]["naive_elements"] == yaml.safe_load(data_path("paper", "worked_example.yaml").read_text())["table1_total"] == 59658
    assert info["cnns"]["CNN2"]["crossing_elements"] == 6272          # e23's second copy
    assert info["cnns"]["CNN1"]["layers"] == 5 and info["cnns"]["CNN1"]["edges"] == 5
    assert info["cnns"]["CNN1"]["edge_bytes"] == (3072 + 3 * 8192 + 16384) * 4
    assert info["pipelines"] == [["CNN1.P1"], ["CNN2.P2", "CNN2.P3"]]


def test_tiny_onnx_counts(capsys, tmp_path, tiny_onnx):
    app = tmp_path / "app.yaml"
    app.write_text(yaml.safe_dump({"precision": "mixed", "cnns": [{"name": "tiny", "model": "tiny.onnx"}]}))
    info = _info(capsys, str(app))
    tiny = info["cnns"]["tiny"]
    # fused: input, conv1(+bn1+relu1), conv2(+relu2), gap, flat, fc
    assert tiny["layers"] == 6 and tiny["edges"] == 5
    params = (4 * 3 * 9 + 4) + (8 * 4 * 9 + 8) + (10 * 8 + 10)        # BN folded into conv1's B
    assert tiny["param_count"] == params
    assert tiny["original_param_count"] == 4 * 3 * 9 + 4 * 4 + 8 * 4 * 9 + 8 + 80 + 10
    assert tiny["param_bytes"] == params * 1                            # mixed: int8 parameters
    elements = 3 * 64 + 4 * 64 + 8 * 16 + 8 + 8
    assert tiny["edge_elements"] == elements and tiny["edge_bytes"] == elements * 2
    assert info["memory_bytes"] is None
    unfused = _info(capsys, str(app), "--unfused")
    assert unfused["cnns"]["tiny"]["layers"] == 9                       # + bn1, relu1, relu2
    # unfused, BN is a per-channel scale and shift: 2 of its 4 ONNX values per channel
    assert unfused["cnns"]["tiny"]["param_count"] == tiny["original_param_count"] - 2 * 4


def test_overrides_and_table_output(capsys):
    info = _info(capsys, str(APPS / "worked_example.yaml"), "--mem", "8MB", "--precision", "fp16",
                 "--fps", "CNN1=10")
    assert info["memory_bytes"] == 8 * 2**20 and info["cnns"]["CNN1"]["fps"] == 10.0
    assert info["cnns"]["CNN2"]["edge_bytes"] == 9354 * 2
    assert main(["info", str(APPS / "worked_example.yaml")]) == 0
    out = capsys.readouterr().out
    assert "59,658" in out and "CNN2.P3" in out


def test_bad_input_exits_2_with_one_line(capsys, tmp_path):
    app = tmp_path / "bad.yaml"
    app.write_text(yaml.safe_dump({"cnns": [{"name": "x", "model": "zoo:mobilenet_v2", "gpu": 1}]}))
    assert main(["info", str(app)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"explore: error: {app}: cnns[0].gpu: unknown key; expected one of name, model, fps, partitions, input_shape"
    assert main(["info", str(APPS / "worked_example.yaml"), "--mem=-1MB"]) == 2
    assert "negative" in capsys.readouterr().err


def test_a_qdq_model_names_the_layers_that_keep_quantization_points(capsys, tmp_path):
    """quantize_static of SiLU, squeeze-excitation and HardSwish blocks: each layer's points
    in --json --layers as the import keeps them, a line saying how many layers keep some,
    and a Conv + BatchNorm with a point between them: the BatchNorm kept a layer, said so."""
    import pytest
    pytest.importorskip("onnxruntime.quantization")
    from csdf.onnx_import import load_onnx
    from onnx_cases import Net, qdq_blocks, qdq_export
    qdq_export(qdq_blocks(tmp_path / "net.onnx"), tmp_path / "net.qdq.onnx")
    n = Net(4)
    n.op("Relu", [n.bn(n.conv("input", 3, 4, name="conv"), 4)])
    n.nodes[-1].output[0] = "output"
    n.save(tmp_path / "bn.onnx", [("input", [1, 3, 8, 8])], [("output", [1, 4, 8, 8])])
    qdq_export(tmp_path / "bn.onnx", tmp_path / "bn.qdq.onnx")
    app = tmp_path / "app.yaml"
    app.write_text(yaml.safe_dump({"cnns": [{"name": "net", "model": "net.qdq.onnx"},
                                            {"name": "bn", "model": "bn.qdq.onnx"}]}))
    info = _info(capsys, str(app), "--layers")
    cnn = load_onnx(tmp_path / "net.qdq.onnx", "net")
    want = {l.name: list(cnn.quantized.points_of(l.name)) for l in cnn.layers() if cnn.quantized.points_of(l.name)}
    assert info["cnns"]["net"]["quantization_points"] == want and len(want) >= 6
    assert {l["name"]: l["quantization_points"] for l in info["cnns"]["net"]["layer_list"]
            if "quantization_points" in l} == want
    assert info["cnns"]["bn"]["kept_apart"] == {"conv": "BatchNormalization"}
    assert [l["kept_apart"] for l in info["cnns"]["bn"]["layer_list"] if "kept_apart" in l] == ["BatchNormalization"]
    assert main(["info", str(app)]) == 0
    out = capsys.readouterr().out
    assert f"net: {len(want)} layers keep the QDQ model's own quantization points" in out
    assert "bn: layer conv: its BatchNormalization is a layer of its own" in out
