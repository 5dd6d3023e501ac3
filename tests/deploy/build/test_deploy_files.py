"""What `explore deploy` leaves in --out: with --force over an older deployment, only the new
manifest's step models (no stale ones beside them), and --force into the directory that
holds the plan's own reference model works and keeps that model."""
from __future__ import annotations

import json

from csdf.parts import all_parts
from explorer.app.appfile import load_app
from explorer.cli.main import main
from deploy_fixtures import make_plan, tiny_onnx


def _plan_file(tmp_path, app_path, phases_of, name="plan.json"):
    cnn = load_app(app_path).cnns["tiny"]
    plan = make_plan([cnn], {"tiny": phases_of(cnn)})
    plan.update(app=str(app_path), par_bytes=4, memory_bytes=plan["buffer_bytes"], param_bytes=0,
                fps={"tiny": 0.0}, constraints={"memory_bytes": None, "fps": {}},
                constraints_met=True, schedules={p: "" for p in plan["firings"]})
    path = tmp_path / name
    path.write_text(json.dumps(plan))
    return path


def _app(tmp_path, model: str):
    app_path = tmp_path / "app.yaml"
    app_path.write_text("name: tiny-app\nplatform: jetson-tx2\nprecision: fp32\n"
                        f"cnns:\n  - name: tiny\n    model: {model}\n    fps: 0\n")
    return app_path


def _models_on_disk(out):
    return sorted(str(p.relative_to(out)) for p in (out / "models").rglob("*.onnx"))


def test_force_over_an_older_deployment_leaves_no_stale_models(tmp_path, capsys):
    tiny_onnx(tmp_path / "tiny.onnx")
    app_path = _app(tmp_path, "tiny.onnx")
    parts = _plan_file(tmp_path, app_path, all_parts, "parts.json")
    whole = _plan_file(tmp_path, app_path, lambda c: {n: 1 for n in c.order()}, "whole.json")
    out = tmp_path / "dep"
    assert main(["deploy", str(parts), "--out", str(out)]) == 0
    before = _models_on_disk(out)
    assert main(["deploy", str(whole), "--out", str(out), "--force"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert _models_on_disk(out) == sorted(manifest["models"])
    assert set(before) - set(manifest["models"])          # the older ones were there to go
    capsys.readouterr()
    assert main(["run", str(out), "--frames", "2", "--json", "--in-process", "--threads", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["max_abs_diff"]["tiny"] < 1e-4


def test_force_into_the_directory_of_its_own_reference_model(tmp_path, capsys):
    tiny_onnx(tmp_path / "tiny.onnx")
    out = tmp_path / "dep"
    assert main(["deploy", str(_plan_file(tmp_path, _app(tmp_path, "tiny.onnx"), all_parts)),
                 "--out", str(out)]) == 0
    model = out / "reference" / "tiny.onnx"
    data = model.read_bytes()
    # the app now names the deployment's reference copy as its model
    plan = _plan_file(tmp_path, _app(tmp_path, str(model)), all_parts)
    assert main(["deploy", str(plan), "--out", str(out), "--force"]) == 0
    assert model.read_bytes() == data
    capsys.readouterr()
    assert main(["run", str(out), "--frames", "2", "--json", "--in-process", "--threads", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["max_abs_diff"]["tiny"] < 1e-4
