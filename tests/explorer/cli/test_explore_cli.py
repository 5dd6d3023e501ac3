"""`explore APP.yaml`: Algorithm 2 end to end on the worked example and a tiny ONNX CNN: exit
codes, the files written, determinism, and a plan that deploys with equal outputs."""
from __future__ import annotations

import csv
import itertools
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from explorer.app.appfile import load_app
from explorer.cli.main import main
from explorer.plan.derive import derive, gene_labels, phases_of
from sdf3.xml import read_xml

ROOT = Path(__file__).resolve().parents[3]
WORKED = str(ROOT / "apps" / "worked_example.yaml")
FILES = {"plan.json", "pareto.json", "pareto.csv", "report.html", "CNN1.P1.xml",
         "CNN2.P2.xml", "CNN2.P3.xml"}


def explore(*args: str) -> int:
    return main([*args, "--quiet"])


def exhaustive_min_buffers(path: str, precision: str | None = None) -> int:
    """Least memory over every chromosome of the app (2^7 for the worked example)."""
    app = load_app(path, precision=precision)
    n = len(gene_labels(app))
    return min(derive(app, phases_of(app, g)).memory_bytes
               for g in itertools.product((0, 1), repeat=n))


def test_worked_example_int8_meets_table9_constraint(tmp_path, capsys):
    # Table 9's M^c is 20,000 with sizes counted in elements: int8 data is one byte each;
    # --prefer memory: the paper's pick (the app gives M^c alone, which defaults to the fastest)
    out = tmp_path / "run"
    assert explore(WORKED, "--precision", "int8", "--out", str(out), "--prefer", "memory") == 0
    assert {p.name for p in out.iterdir()} == FILES
    plan = json.loads((out / "plan.json").read_text())
    assert plan["constraints_met"] is True and plan["constraints"]["memory_bytes"] == 20000
    assert plan["memory_bytes"] <= 20000
    assert plan["memory_bytes"] == exhaustive_min_buffers(WORKED, "int8")   # least memory
    assert plan["placement"] == "offsets"                 # the arena's extent
    assert plan["buffer_bytes"] == max(b["offset"] + b["bytes"] for b in plan["buffers"])
    assert set(plan["phases"]) == {"CNN1", "CNN2"} and set(plan["fps"]) == {"CNN1", "CNN2"}
    for part in plan["partitions"]:                       # SDF3 XML of the chosen plan
        graph = read_xml(out / f"{part['name']}.xml")
        assert sorted(graph.actors) == sorted(part["layers"])
        for ch in graph.channels:
            if ch.src != ch.dst:
                assert ch.capacity == plan["edges"][f"{part['cnn']}.{ch.name}"]["rows"]
            assert graph.actors[ch.src].phases == plan["phases"][part["cnn"]][ch.src]
    front = json.loads((out / "pareto.json").read_text())
    rows = list(csv.DictReader(open(out / "pareto.csv")))
    assert [int(r["memory_bytes"]) for r in rows] == [p["memory_bytes"] for p in front["points"]]
    assert front["chosen"] == plan["genes"] and not front["early_exit"]
    text = capsys.readouterr().out
    assert "constraints met" in text and "M^c 19.53 KB: met" in text
    assert front["rule"] == "memory" and "picked  the least memory" in text and "--prefer memory" in text


def test_memory_budget_alone_picks_the_fastest_point_within_it(tmp_path, capsys):
    """With only M^c the plan is the highest-throughput front point within it (the
    geometric mean of the CNNs' fps), checked on the front the run wrote; --prefer memory
    and an added T^c give back the paper's least-memory pick."""
    out = tmp_path / "run"
    assert explore(WORKED, "--precision", "int8", "--out", str(out), "--seed", "3") == 0
    front = json.loads((out / "pareto.json").read_text())
    plan = json.loads((out / "plan.json").read_text())
    within = [p for p in front["points"] if p["memory_bytes"] <= 20000]
    assert len(within) > 1 and front["rule"] == "fps" and front["prefer"] is None
    speed = [p["fps"]["CNN1"] * p["fps"]["CNN2"] for p in within]
    best = max(speed)
    assert plan["memory_bytes"] == min(p["memory_bytes"] for p, s in zip(within, speed) if s == best)
    assert plan["memory_bytes"] > min(p["memory_bytes"] for p in within)    # not the least
    assert "picked  the highest throughput" in capsys.readouterr().out
    again = tmp_path / "again"
    assert explore(WORKED, "--precision", "int8", "--out", str(again), "--seed", "3",
                   "--prefer", "memory") == 0
    assert json.loads((again / "plan.json").read_text())["memory_bytes"] == \
        min(p["memory_bytes"] for p in within)


def test_unmet_constraint_exits_3_with_least_memory_plan(tmp_path):
    out = tmp_path / "run"
    assert explore(WORKED, "--out", str(out)) == 3          # fp32: 4 bytes per element
    plan = json.loads((out / "plan.json").read_text())
    assert plan["constraints_met"] is False
    assert plan["memory_bytes"] == exhaustive_min_buffers(WORKED) > 20000
    assert (out / "report.html").is_file()


def test_early_exit_when_reuse_alone_fits(tmp_path):
    out = tmp_path / "run"
    assert explore(WORKED, "--mem", "1MB", "--out", str(out)) == 0
    front = json.loads((out / "pareto.json").read_text())
    assert front["early_exit"] and len(front["points"]) == 1 and front["evaluations"] == 1
    plan = json.loads((out / "plan.json").read_text())
    assert plan["buffer_bytes"] == 32768 * 4              # offsets: the live bound, by hand
    assert all(n == 1 for ph in plan["phases"].values() for n in ph.values())
    out = tmp_path / "paper"
    assert explore(WORKED, "--mem", "1MB", "--out", str(out), "--placement", "shared-objects") == 0
    plan = json.loads((out / "plan.json").read_text())
    assert plan["buffer_bytes"] == 32778 * 4              # Table 8, reuse only


def test_same_seed_same_result_other_seed_still_valid(tmp_path):
    runs = []
    for i, seed in enumerate(["5", "5"]):
        out = tmp_path / f"r{i}"
        explore(WORKED, "--mem", "0", "--seed", seed, "--population", "8",
                "--generations", "4", "--out", str(out))
        runs.append(out)
    a, b = (json.loads((r / "pareto.json").read_text()) for r in runs)
    assert a["points"] == b["points"] and a["evaluations"] == b["evaluations"]
    assert (runs[0] / "plan.json").read_text() == (runs[1] / "plan.json").read_text()


def test_refuses_non_empty_out_and_bad_input(tmp_path, capsys):
    out = tmp_path / "full"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    assert explore(WORKED, "--out", str(out)) == 2
    assert "not empty" in capsys.readouterr().err
    assert explore(WORKED, "--out", str(out), "--force", "--mem", "1MB") == 0
    assert (out / "keep.txt").exists() and (out / "plan.json").exists()
    assert explore(WORKED, "--fps", "CNN9=3", "--out", str(tmp_path / "x")) == 2
    assert "unknown CNN 'CNN9'" in capsys.readouterr().err
    assert explore(WORKED, "--population", "0", "--out", str(tmp_path / "y")) == 2


def test_default_out_dir_counts_up(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert explore(WORKED, "--mem", "1MB") == 0
    assert explore(WORKED, "--mem", "1MB") == 0
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == \
        ["worked-example-1", "worked-example-2"]


# ---- a real CNN: the plan deploys on ONNX Runtime and computes the same outputs -------------
@pytest.fixture(scope="module")
def tiny_app(tmp_path_factory):
    from deploy_fixtures import tiny_onnx
    d = tmp_path_factory.mktemp("tinyapp")
    tiny_onnx(d / "tiny.onnx")
    (d / "app.yaml").write_text(
        "name: tiny\nplatform: jetson-tx2\nprecision: fp32\nmemory: 0\n"
        "cnns:\n  - {name: tiny, model: tiny.onnx, fps: 0}\n"
        "search: {population: 12, generations: 4, seed: 2}\n")
    return d / "app.yaml"


def test_tiny_cnn_plan_deploys_with_equal_outputs(tiny_app, tmp_path):
    from deploy.build.derive import derive as deploy_derive
    from deploy.run.measure import measure

    out = tmp_path / "run"
    assert explore(str(tiny_app), "--out", str(out)) == 0     # M^c = 0: the least-memory goal
    plan = json.loads((out / "plan.json").read_text())
    assert any(n > 1 for n in plan["phases"]["tiny"].values())   # something goes by parts
    app = load_app(tiny_app)
    reuse_only = derive(app, phases_of(app, [0] * len(gene_labels(app))))
    assert plan["buffer_bytes"] < reuse_only.buffer_bytes
    deploy_derive(plan, app.cnns, tmp_path / "dep")
    result = measure(tmp_path / "dep", frames=2, threads=1)
    assert all(diff is not None and diff < 1e-4 for diff in result["max_abs_diff"].values())
    assert result["arena_bytes"] == plan["buffer_bytes"]


def test_report_opens_in_headless_chromium(tmp_path):
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if not browser:
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    out = tmp_path / "run"
    explore(WORKED, "--precision", "int8", "--out", str(out))
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([browser, *flags, "--dump-dom", (out / "report.html").as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0
    assert "<svg" in dom.stdout and "Pareto front" in dom.stdout and "M^c = " in dom.stdout
