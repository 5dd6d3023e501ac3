"""`explore deploy PLAN.json` then `explore run DIR --json`, through the front door, with a
plan.json that explorer.plan.model reads back."""
from __future__ import annotations

import json

from deploy.runtime import manifest as mf
from explorer.cli.main import main
from deploy_fixtures import fired, planned, tiny_plan_file


def test_deploy_and_run(tmp_path, capsys):
    plan = json.loads(tiny_plan_file(tmp_path).read_text())
    out = tmp_path / "dep"
    assert main(["deploy", str(tmp_path / "plan.json"), "--out", str(out)]) == 0
    assert (out / "manifest.json").is_file()
    capsys.readouterr()
    assert main(["run", str(out), "--frames", "2", "--json", "--in-process"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["max_abs_diff"]["tiny"] < 1e-4
    assert res["arena_bytes"] == plan["buffer_bytes"]
    # by default a band of firings by parts is one call (a region step)
    manifest = mf.load(out)
    assert fired(manifest) == planned(plan)
    steps = len(manifest.partitions[0].steps)
    assert res["calls_per_frame"]["tiny"] == steps < len(plan["firings"]["tiny.all"])
    # --steps layers: one call per firing
    assert main(["deploy", str(tmp_path / "plan.json"), "--out", str(tmp_path / "lay"),
                 "--steps", "layers"]) == 0
    capsys.readouterr()
    assert main(["run", str(tmp_path / "lay"), "--frames", "2", "--json", "--in-process"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["max_abs_diff"]["tiny"] < 1e-4
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
