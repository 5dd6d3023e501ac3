"""`explore profile --primitives`, `explore primitives`, `explore deploy`, `explore run`
through the front door on a small CNN: the front written is the exact one for the profile
it read, the plan names a primitive for every layer and deploys to the model's outputs."""
from __future__ import annotations

import csv
import json

import onnx

from explorer.app.appfile import load_app
from explorer.cli.main import main
from explorer.plan.derive import derive as derive_app, uniform_phases
from explorer.throughput.device_profile import load_profile
from explorer.primitives.costs import from_profile
from explorer.primitives import ilp as taso_ilp
from test_deploy_blocked import blocky_onnx


def small_blocky(path) -> None:
    """blocky_onnx on a 2 x 2 input: every primitive of every layer still timed (the same
    candidates as at 10 x 8, Winograd's one tile included)."""
    blocky_onnx(path)
    model = onnx.load(str(path))
    dims = model.graph.input[0].type.tensor_type.shape.dim
    dims[2].dim_value = dims[3].dim_value = 2
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def test_profile_primitives_deploy_run(tmp_path, capsys, monkeypatch):
    small_blocky(tmp_path / "blocky.onnx")
    app_path = tmp_path / "app.yaml"
    app_path.write_text("name: blocky\nprecision: fp32\ncnns:\n  - name: b\n    model: blocky.onnx\n")
    prof = tmp_path / "p.yaml"
    # `explore profile` without its ladder: nothing below reads the ladder's figures (the
    # primitives' study reads the profile's primitives alone), and its 5 deployments, each
    # timed in a child process, cost twice what the rest of the test does; the ladder
    # through this same command is test_deploy_profile.py's (and test_platform_cpu.py's)
    import deploy.profile.ladder as ladder
    laddered = []
    monkeypatch.setattr(ladder, "profile_ladder", lambda cnn, *a, **kw: laddered.append(cnn.name) or {})
    assert main(["profile", str(app_path), "--primitives", "--out", str(prof), "--repeats", "2",
                 "--threads", "1"]) == 0
    assert laddered == ["b"]
    table = load_profile(prof).primitives
    assert set(table["b"]["layers"]["stem"]) == {"ort_nchw", "im2col", "kn2row", "winograd"}
    out = tmp_path / "out"
    capsys.readouterr()
    assert main(["primitives", str(app_path), "--profile", str(prof), "--out", str(out),
                 "--ga-generations", "10"]) == 0
    data = json.loads((out / "primitives.json").read_text())
    app = load_app(app_path)
    costs = from_profile(app, table, derive_app(app, uniform_phases(app, False)).buffer_bytes)
    exact = taso_ilp.front(costs, "sum")
    assert [p["memory_bytes"] for p in data["fronts"]["sum"]["points"]] == \
        [p.memory_bytes for p in exact.points]
    with open(out / "primitives.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == sum(len(f["points"]) for f in data["fronts"].values())
    assert "<svg" in (out / "report.html").read_text()
    plan = json.loads((out / "plan.json").read_text())
    assert set(plan["primitives"]["b"]) == set(app.cnns["b"].order())
    # the plan's workspace is memtrade's term (the largest step) fed with the chosen steps
    choice = data["chosen"]["choice"]
    assert plan["workspace_bytes"] == costs.evaluate(choice).workspace_max
    assert plan["memory_bytes"] == plan["param_bytes"] + plan["buffer_bytes"] + plan["workspace_bytes"]
    assert data["chosen"]["time_ms"] == data["baselines"]["time-only (ILP)"]["time_ms"]
    dep = tmp_path / "dep"
    assert main(["deploy", str(out / "plan.json"), "--out", str(dep)]) == 0
    capsys.readouterr()
    assert main(["run", str(dep), "--frames", "2", "--json", "--in-process"]) == 0
    assert json.loads(capsys.readouterr().out)["max_abs_diff"]["b"] < 1e-4
    # --fps: Eq. 14's answer is the front's least-memory point within the time budget
    slowest = max(p.time_ms for p in exact.points)
    budget = (min(p.time_ms for p in exact.points) + slowest) / 2
    assert main(["primitives", str(app_path), "--profile", str(prof), "--out", str(tmp_path / "o2"),
                 "--fps", f"{1000.0 / budget}", "--ga-generations", "2"]) == 0
    chosen = json.loads((tmp_path / "o2" / "primitives.json").read_text())["chosen"]
    assert chosen["memory_bytes"] == min(p.memory_bytes for p in exact.points
                                         if p.time_ms <= budget * (1 + 1e-9))
    # a budget nothing meets: exit 3, least-memory plan written; bad input: exit 2, one line
    assert main(["primitives", str(app_path), "--profile", str(prof), "--out", str(tmp_path / "o3"),
                 "--mem", "1KB", "--ga-generations", "2"]) == 3
    capsys.readouterr()
    assert main(["primitives", str(app_path), "--profile", str(prof), "--out", str(out)]) == 2
    assert "not empty" in capsys.readouterr().err
    bare = tmp_path / "bare.yaml"
    bare.write_text("name: x\nmodels:\n  b:\n    stem: {whole_ms: 1.0}\n")
    assert main(["primitives", str(app_path), "--profile", str(bare), "--out", str(tmp_path / "o4")]) == 2
    err = capsys.readouterr().err
    assert "bare.yaml: no key 'primitives'" in err and err.count("\n") == 1
