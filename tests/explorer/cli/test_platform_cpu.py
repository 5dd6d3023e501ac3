"""`platform: cpu` end to end on the tiny ONNX CNN: `explore` measures this machine with live
lines and plans with it, a second `explore` reads the cache, `explore deploy` and `explore run`
print the predicted fps beside the measured; the app file's `threads:` key; a changed model
or a corrupt cache entry is measured again."""
from __future__ import annotations

import json
import re
from pathlib import Path

import onnx
import pytest

from conftest import write_tiny_onnx
from explorer.app.appfile import load_app
from explorer.cli.main import main
from explorer.throughput.device_profile import DeviceProfile, LayerTimes
from explorer.throughput.profile_cache import ProfileCache, machine_key, profile_key
from sdf3.errors import InputError

APP = "name: tinycpu\nplatform: cpu\n{threads}cnns:\n  - name: tiny\n    model: tiny.onnx\n"


def app_file(folder: Path, threads: str = "", seed: int = 0, side: int = 8) -> Path:
    """The tiny CNN (conftest.write_tiny_onnx) on a `side` x `side` input, and its app file.
    A 2 x 2 input has one ladder rung (k=1: 3 ladder deployments, 8 x 8 has 9), which is
    all the end-to-end run needs of the measurement."""
    write_tiny_onnx(folder / "tiny.onnx", seed)
    if side != 8:
        model = onnx.load(str(folder / "tiny.onnx"))
        for dim in model.graph.input[0].type.tensor_type.shape.dim[2:]:
            dim.dim_value = side
        onnx.save(model, str(folder / "tiny.onnx"))
    path = folder / "app.yaml"
    path.write_text(APP.format(threads=threads))
    return path


def test_threads_key(tmp_path):
    assert load_app(app_file(tmp_path)).threads == 1
    assert load_app(app_file(tmp_path, "threads: 4\n")).threads == 4
    for bad in ("0", "-1", "two", "1.5", "true", "2000"):
        with pytest.raises(InputError) as err:
            load_app(app_file(tmp_path, f"threads: {bad}\n"))
        assert "app.yaml: threads: expected a whole number" in str(err.value)
        assert "\n" not in str(err.value)


def test_explore_deploy_run(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MEMTRADE_CACHE", str(tmp_path / "cache"))
    app = app_file(tmp_path, side=2)
    assert main([str(app), "--out", str(tmp_path / "p1")]) == 0
    first = capsys.readouterr().err
    assert "platform cpu: measuring tiny" in first and "tiny ladder: timed whole" in first
    stamps = [float(s) for s in re.findall(r"^\[\s*([0-9.]+) s\]", first, re.M)]
    assert len(stamps) >= 3 and max(b - a for a, b in zip(stamps, stamps[1:])) < 10
    plan = json.loads((tmp_path / "p1" / "plan.json").read_text())
    assert plan["platform"] == f"cpu:{machine_key()}"

    assert main([str(app), "--out", str(tmp_path / "p2")]) == 0
    second = capsys.readouterr().err
    assert "platform cpu: measured times from" in second
    assert "measuring" not in second and "ladder" not in second
    again = json.loads((tmp_path / "p2" / "plan.json").read_text())
    assert again["fps"] == plan["fps"]                   # the same times, read back

    assert main(["deploy", str(tmp_path / "p1" / "plan.json"), "--out", str(tmp_path / "d")]) == 0
    capsys.readouterr()
    assert main(["run", str(tmp_path / "d"), "--threads", "1", "--frames", "5", "--in-process"]) == 0
    out = capsys.readouterr().out
    assert "tiny: " in out and f"(predicted {plan['fps']['tiny']:.1f})" in out
    assert "warning" not in out

    manifest = tmp_path / "d" / "manifest.json"        # a plan made for another platform
    data = json.loads(manifest.read_text())
    data["plan_platform"] = "jetson-tx2"
    manifest.write_text(json.dumps(data))
    assert main(["run", str(tmp_path / "d"), "--threads", "1", "--frames", "5", "--in-process"]) == 0
    out = capsys.readouterr().out
    warnings = [line for line in out.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "jetson-tx2" in warnings[0]


def test_changed_model_and_corrupt_entry_measured_again(tmp_path, monkeypatch, capsys):
    from memtrade import platform as glue
    import deploy.profile.app_profile as app_profile
    from deploy.profile.app_profile import code_digest

    calls = []

    def fake(app, settings, progress=None, meta=None):
        calls.append(settings.threads)
        return DeviceProfile(name="fake", meta=dict(meta or {}),
                             models={"tiny": {n: LayerTimes(0.5) for n in app.cnns["tiny"].order()}})

    monkeypatch.setattr(app_profile, "measure_app", fake)
    cache = ProfileCache(tmp_path / "cache")
    app = load_app(app_file(tmp_path, "threads: 2\n"))
    got = glue.cpu_profile(app, cache, quiet=True)
    assert calls == [2] and got.meta["machine"] == machine_key()
    glue.cpu_profile(load_app(app_file(tmp_path, "threads: 2\n")), cache, quiet=True)
    assert calls == [2]                                   # a hit
    glue.cpu_profile(load_app(app_file(tmp_path, "threads: 2\n", seed=3)), cache, quiet=True)
    assert calls == [2, 2]                                # other weights: measured again
    app = load_app(app_file(tmp_path, "threads: 2\n"))
    cache.path(profile_key(app.cnns, "fp32", 2, code=code_digest())).write_text("format: [")   # corrupt
    capsys.readouterr()
    glue.cpu_profile(app, cache, quiet=True)
    assert calls == [2, 2, 2]
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "measuring again" in err[0]
    glue.cpu_profile(app, cache, quiet=True)
    assert calls == [2, 2, 2]                             # whole again: a hit


def test_live_printer_throttles_and_says_what_still_runs():
    import io
    import time
    from memtrade.platform import LivePrinter

    out = io.StringIO()
    with LivePrinter(out, every_s=10.0, quiet_s=0.3) as say:
        say("header")
        say("  first")                    # within every_s of nothing indented: shown
        say("  dropped")                  # within every_s of "first": dropped
        time.sleep(1.0)
        say("second header")
    lines = [line.split("] ", 1)[1] for line in out.getvalue().splitlines()]
    assert lines[:2] == ["header", "  first"] and lines[-1] == "second header"
    still = lines[2:-1]
    assert 1 <= len(still) <= 4 and all(s.startswith("  ... still at it") for s in still)
    assert all(s.endswith("since: dropped") for s in still)
