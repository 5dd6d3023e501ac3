"""`platform: cpu` at int8: `explore` measures the CNN's int8 steps (the scales `explore
deploy` calibrates without --calibration, deploy/profile/app_profile.py `timing_scales`),
plans with those times, and the plan deploys and PASSes against the int8 reference with its
predicted fps printed beside the measured."""
from __future__ import annotations

import json

from conftest import write_tiny_onnx
from deploy.build.quantization import deployment_scales
from deploy.profile.app_profile import onnxruntime_dtype, timing_scales
from explorer.app.appfile import load_app
from explorer.cli.main import main
from explorer.throughput.profile_cache import ProfileCache

# the tiny CNN on a 2 x 2 input: one ladder rung (k = 1), 3 ladder deployments where 8 x 8 has
# 9 (test_platform_cpu.py's end-to-end run does the same); the int8 steps are still timed whole
# and by parts, and the plan at M^c = 0 is the one 8 x 8 gives: every layer whole, in chains
SIZE = 2


def test_int8_profile_plan_deploy_run(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MEMTRADE_CACHE", str(tmp_path / "cache"))
    write_tiny_onnx(tmp_path / "tiny.onnx", size=SIZE)
    app_path = tmp_path / "app.yaml"
    app_path.write_text("name: tiny8\nplatform: cpu\nprecision: int8\n"
                        "cnns:\n  - name: tiny\n    model: tiny.onnx\n")
    app = load_app(app_path)
    cnn = app.cnns["tiny"]
    assert onnxruntime_dtype(app, "app") == "uint8"
    assert timing_scales(cnn, "uint8") == deployment_scales({"tiny": cnn}, None)

    assert main([str(app_path), "--mem", "0", "--out", str(tmp_path / "p")]) == 0
    err = capsys.readouterr().err
    assert "platform cpu: measuring tiny" in err
    cached = list((tmp_path / "cache").rglob("*.json"))
    profiles = [json.loads(p.read_text()) for p in cached if "profile" in p.read_text()[:2000]]
    assert any(p.get("precision") == "int8" for p in profiles), [p.keys() for p in profiles]
    plan = json.loads((tmp_path / "p" / "plan.json").read_text())
    assert plan["precision"] == "int8" and plan["data_bytes"] == 1

    assert main(["deploy", str(tmp_path / "p" / "plan.json"), "--out", str(tmp_path / "d")]) == 0
    capsys.readouterr()
    assert main(["run", str(tmp_path / "d"), "--threads", "1", "--frames", "3", "--json",
                 "--in-process"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["verdict"]["tiny"]["verdict"] == "PASS"
    assert res["plan_fps"]["tiny"] == plan["fps"]["tiny"] and res["arena_bytes"] == res["plan_buffer_bytes"]


def test_the_ladder_measures_whole_layers_in_steps_of_their_own(tmp_path):
    """The profile's whole deployment runs one step per whole layer, never a chain step: a
    chain's one call cannot be split into its layers' workspaces (deploy/profile/ladder.py).
    `explore deploy` of the same plan chains those layers (deploy/build/chains.py)."""
    from csdf.onnx_import import load_onnx
    from deploy.build.derive import derive
    from deploy.profile.ladder import Ladder, cnn_plan
    from deploy.runtime import manifest as mf
    cnn = load_onnx(write_tiny_onnx(tmp_path / "tiny.onnx", size=SIZE), "tiny")
    scales = deployment_scales({"tiny": cnn}, None)
    ladder = Ladder(cnn, tmp_path / "ladder", "int8", regions=True, scales=scales)
    whole, phases = ladder.folders[0]
    assert set(phases.values()) == {1}
    variants = {m.variant for m in mf.load(whole).models.values()}
    assert variants == {"whole"}, variants
    deployed = derive(cnn_plan(cnn, phases, "int8"), {"tiny": cnn}, tmp_path / "dep",
                      regions=True, scales=scales)
    assert "chain" in {m.variant for m in deployed.models.values()}
