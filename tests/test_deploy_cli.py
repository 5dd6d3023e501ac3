"""`explore deploy PLAN.json` then `explore run DIR --json`, through the front door, with a
plan.json that explorer.plan.model reads back."""
from __future__ import annotations

import json

from csdf.parts import all_parts
from explorer.app.appfile import load_app
from explorer.cli.main import main
from test_deploy_fixtures import make_plan, tiny_onnx


def test_deploy_and_run(tmp_path, capsys):
    tiny_onnx(tmp_path / "tiny.onnx")
    app_path = tmp_path / "app.yaml"
    app_path.write_text("name: tiny-app\nplatform: jetson-tx2\nprecision: fp32\n"
                        "cnns:\n  - name: tiny\n    model: tiny.onnx\n    fps: 0\n")
    cnn = load_app(app_path).cnns["tiny"]
    plan = make_plan([cnn], {"tiny": all_parts(cnn)})
    plan.update(app=str(app_path), par_bytes=4, memory_bytes=plan["buffer_bytes"], param_bytes=0,
                fps={"tiny": 0.0}, constraints={"memory_bytes": None, "fps": {}},
                constraints_met=True, schedules={p: "" for p in plan["firings"]})
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    out = tmp_path / "dep"
    assert main(["deploy", str(tmp_path / "plan.json"), "--out", str(out)]) == 0
    assert (out / "manifest.json").is_file()
    capsys.readouterr()
    assert main(["run", str(out), "--frames", "2", "--json", "--in-process"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["max_abs_diff"]["tiny"] < 1e-4
    assert res["arena_bytes"] == plan["buffer_bytes"]
    assert res["calls_per_frame"]["tiny"] == len(plan["firings"]["tiny.all"])
    # bad input: a plan without its keys is one line and exit 2
    (tmp_path / "bad.json").write_text("{}")
    assert main(["deploy", str(tmp_path / "bad.json"), "--out", str(tmp_path / "dep2")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("explore: error:") and "bad.json" in err and err.count("\n") == 1
    # a deployment already there is not overwritten unless asked
    before = (out / "manifest.json").read_bytes()
    assert main(["deploy", str(tmp_path / "plan.json"), "--out", str(out)]) == 2
    assert "not empty (use --force" in capsys.readouterr().err
    assert (out / "manifest.json").read_bytes() == before
    assert main(["deploy", str(tmp_path / "plan.json"), "--out", str(out), "--force"]) == 0
