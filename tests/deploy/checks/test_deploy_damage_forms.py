"""`explore deploy` checks every step model it writes (deploy/checks/step_models.py),
whatever its form: a fused-tiled group's tile models and, with --with-profile, the
models the board times. One the ONNX checker or ONNX Runtime refuses is one line naming
the group or layer, its ONNX nodes and the file, exit 2, and no output directory."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper, numpy_helper

import deploy.steps.layer_models as layer_models
import deploy.steps.tiles as tiles
from explorer.cli.main import main
from explorer.plan.model import to_json
from explorer.throughput.evaluator import make_evaluator
from explorer.tiling.genes import TiledEvaluation, plan_tiled
from refusals import refused
from test_fused_tiling import TWO_GROUPS, small_net


@pytest.fixture
def tiled_app(tmp_path):
    """test_fused_tiling's small network and app (two fused-tiled groups deploy from it)."""
    from explorer.app.appfile import load_app
    small_net(tmp_path / "small.onnx")
    (tmp_path / "app.yaml").write_text("name: small\nplatform: jetson-tx2\nprecision: fp32\n"
                                       "memory: 1GB\ncnns:\n  - name: small\n    fps: 0\n"
                                       "    model: small.onnx\n")
    return load_app(str(tmp_path / "app.yaml"), mem="1GB")


def _mismatched_matmul(model, output: str) -> None:
    """`output` computed through a MatMul by a [2, 3, 5] constant: valid structure (the
    checker passes it), shapes ONNX Runtime refuses."""
    g = model.graph
    last = next(n for n in g.node if n.output[0] == output)
    g.initializer.append(numpy_helper.from_array(np.ones((2, 3, 5), np.float32), "bad_w"))
    g.node.insert(list(g.node).index(last),
                  helper.make_node("MatMul", [last.input[0], "bad_w"], ["bad_y"], name="bad_matmul"))
    last.input[0] = "bad_y"


def test_a_refused_tile_model_names_its_group(tiled_app, tmp_path, capsys, monkeypatch):
    made = tiles.tile_model

    def broken(cnn, group, tile, *args, **kw):
        model = made(cnn, group, tile, *args, **kw)
        if group.layers[0] == "c2":
            _mismatched_matmul(model, "out")
        return model
    monkeypatch.setattr(tiles, "tile_model", broken)
    ev = TiledEvaluation(tiled_app, make_evaluator(tiled_app), "tiles")
    mem, fps = ev(TWO_GROUPS)
    to_json(plan_tiled(tiled_app, ev, TWO_GROUPS, fps, True), tmp_path / "plan.json")
    refused(capsys, ["deploy", str(tmp_path / "plan.json"), "--out", str(tmp_path / "d")],
             "fused-tiled group c2__c5 of CNN small", "ONNX nodes c2, c2.act, c3, c3.act, p4",
             "models/small/c2__c5.tile0.onnx", "refused by ONNX Runtime", "bad_matmul")
    assert not (tmp_path / "d").exists()


def test_a_refused_profile_model_is_found_at_deploy(tmp_path, capsys, monkeypatch):
    """--with-profile: the part model of conv2 the board would time."""
    import json
    from conftest import write_tiny_onnx
    from explorer.app.appfile import load_app
    from deploy_fixtures import make_plan
    write_tiny_onnx(tmp_path / "tiny.onnx")
    app_path = tmp_path / "app.yaml"
    app_path.write_text("name: t\ncnns:\n  - {name: tiny, model: tiny.onnx}\n")
    cnn = load_app(app_path).cnns["tiny"]
    plan = make_plan([cnn], {"tiny": {n: 1 for n in cnn.order()}})
    plan.update(app=str(app_path), par_bytes=4, memory_bytes=plan["buffer_bytes"], param_bytes=0,
                fps={"tiny": 0.0}, constraints={"memory_bytes": None, "fps": {}},
                constraints_met=True, schedules={p: "" for p in plan["firings"]})
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    made = layer_models.layer_model

    def broken(cnn_, name, dtype, part):
        model, ins, outs, idx = made(cnn_, name, dtype, part)
        if name == "conv2" and part:
            _mismatched_matmul(model, outs[0].name)
        return model, ins, outs, idx
    monkeypatch.setattr(layer_models, "layer_model", broken)
    assert main(["deploy", str(tmp_path / "plan.json"), "--out", str(tmp_path / "plain")]) == 0
    capsys.readouterr()
    refused(capsys, ["deploy", str(tmp_path / "plan.json"), "--out", str(tmp_path / "d"),
                      "--with-profile"],
             "layer conv2 of CNN tiny", "ONNX nodes conv2, relu2", "profile/tiny/conv2.part.onnx",
             "refused by ONNX Runtime", "bad_matmul")
    assert not (tmp_path / "d").exists()
