"""Precision genes and the SQNR constraint (explorer/plan/precision_genes.py): the repair
keeps every chromosome's estimate at or above min_sqnr_db and only ever raises precisions;
the search's plans carry the precisions their memory was counted at."""
from __future__ import annotations

import json
import math
import re
from dataclasses import replace

import numpy as np
import pytest

import memtrade
from conftest import write_tiny_onnx
from explorer.app.layer_precision import LADDER, LayerPrecisions
from explorer.plan.derive import derive
from explorer.plan.genes import gene_space
from explorer.plan.plan_file import from_dict
from explorer.plan.precision_genes import precision_space, repaired
from explorer.plan.sensitivity import Sensitivity, estimate_db
from sdf3.errors import InputError

# SQNR rows (dB) of tiny.onnx's stored tensors; the input's int8 row is the noisiest
ROWS = {"input": (90.0, 30.0), "conv1": (80.0, 45.0), "conv2": (85.0, 40.0), "gap": (95.0, 50.0),
        "flat": (95.0, 50.0), "fc": (75.0, 35.0)}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("precision_genes")
    model = write_tiny_onnx(root / "tiny.onnx")
    np.save(root / "frames.npy", np.random.default_rng(2).uniform(0, 1, (3, 3, 8, 8)).astype(np.float32))
    app = memtrade.load_app({"name": "tiny", "platform": "jetson-tx2", "precision": "auto",
                             "min_sqnr_db": 28, "cnns": [{"name": "c", "model": str(model)}]})
    return root, app


def _table() -> Sensitivity:
    return Sensitivity(tuple(sorted((l, p, s) for l, (f16, i8) in ROWS.items()
                                    for p, s in (("fp16", f16), ("int8", i8)))))


@pytest.mark.parametrize("floor", [25.0, 28.0, 33.0, 60.0])
def test_repair_meets_the_floor_and_only_raises(tiny, floor):
    _, app = tiny
    app = replace(app, min_sqnr_db=floor)
    tables = {"c": _table()}
    space = precision_space(gene_space(app), app, tables)
    assert [l for _, l in space.layers] == ["conv1", "conv2", "gap", "flat", "fc"]
    rng = np.random.default_rng(0)
    for genes in [tuple(rng.integers(0, len(LADDER), len(space.layers))) for _ in range(30)]:
        fixed = repaired(app, space, tables, genes)
        assert all(a <= b for a, b in zip(fixed, genes))
        got = estimate_db(tables["c"], app.cnns["c"], "c", space.precisions(fixed))
        assert got >= floor
        before = estimate_db(tables["c"], app.cnns["c"], "c", space.precisions(genes))
        if before >= floor:
            assert fixed == genes


def test_input_noise_is_repaired_through_its_reader(tiny):
    """All int8: the input (30 dB alone) is below a 33 dB floor whatever else is raised, so
    its one reader, conv1, must come off int8."""
    _, app = tiny
    app = replace(app, min_sqnr_db=33.0)
    tables = {"c": _table()}
    space = precision_space(gene_space(app), app, tables)
    fixed = repaired(app, space, tables, (LADDER.index("int8"),) * len(space.layers))
    assert LADDER[fixed[0]] != "int8"


def test_search_plans_meet_the_floor_at_the_memory_of_their_precisions(tiny, monkeypatch):
    root, app = tiny
    monkeypatch.setenv("MEMTRADE_CACHE", str(root / "cache"))
    found = memtrade.explore(replace(app, memory=1), calibration=root / "frames.npy",
                             effort="full", population=8, generations=3, min_sqnr=28)
    plan = found.plan
    assert plan.precision == "auto" and plan.layer_precisions["c"]
    (table_file,) = (root / "cache").glob("sensitivity-*.json")
    table = Sensitivity.from_dict(json.loads(table_file.read_text()))
    layers = LayerPrecisions.of(plan.layer_precisions)
    estimate = estimate_db(table, app.cnns["c"], "c", layers)
    assert estimate >= 28 and math.isclose(plan.sqnr_estimate_db["c"], estimate)
    # the plan's rounding measured on the calibration frames lies near its estimate
    # (tests/deploy/checks/test_sensitivity.py: within 3.5 dB on this network)
    assert abs(plan.sqnr_reference_db["c"] - estimate) < 3.5
    assert from_dict(plan.to_dict()).sqnr_reference_db == plan.sqnr_reference_db
    again = derive(app, plan.phases, layers=layers)
    assert (again.memory_bytes, again.param_bytes) == (plan.memory_bytes, plan.param_bytes)
    found.write(root / "out")
    report = (root / "out" / "report.html").read_text()
    strips = re.findall(r'<svg[^>]*class="precisions".*?</svg>', report)
    assert len(strips) == len(found.points)
    for point, strip in zip(found.points, strips):   # each point's precisions meet the floor
        other = found.plan_of(point)
        layers = LayerPrecisions.of(other.layer_precisions)
        assert estimate_db(table, app.cnns["c"], "c", layers) >= 28
        assert derive(app, other.phases, layers=layers).memory_bytes == point.memory_bytes
        shown = dict(re.findall(r'data-layer="c\.([^"]+)" data-precision="([^"]+)"', strip))
        assert shown == {l: layers.name("c", l) for l in shown} and len(shown) == 5

    # deployed with the frames explore had: the run on them measures the plan's reference
    # SQNR (the deployment computes its per-layer reference) and PASSes; other frames are said
    frames = root / "frames.npy"
    assert plan.sqnr_frames["frames"] == str(frames.resolve()) and plan.sqnr_frames["method"] == "minmax"
    said: list[str] = []
    memtrade.deploy(found, root / "dep", calibration=frames, warn=said.append)
    assert not [line for line in said if "calibration" in line or "scales" in line], said
    got = memtrade.run(root / "dep", inputs={"c": list(np.load(frames)[:, None])}, threads=1)
    assert got.verdicts["c"].verdict == "PASS"
    vs = got.vs_fp32["c"]
    assert math.isclose(vs.outputs[0].sqnr_db, plan.sqnr_reference_db["c"], abs_tol=1e-3)
    assert vs.estimate_db == pytest.approx(plan.sqnr_estimate_db["c"])
    memtrade.deploy(found, root / "dep2", warn=said.append)       # generated scales
    assert any("were measured with int8 scales from" in line and "generated frames" in line
               for line in said), said


def test_min_sqnr_needs_precision_auto(tiny):
    _, app = tiny
    with pytest.raises(InputError, match="precision: auto"):
        memtrade.explore(memtrade.with_constraints(app, precision="fp16"), min_sqnr=20)


def test_a_plan_measuring_below_its_estimate_tightens_the_repair(tiny, monkeypatch):
    """memtrade/sensitivity.py `checked`, with a measurement 3 dB below every estimate: the
    repair's floor rises until the chosen plan's estimate minus 3 dB meets min_sqnr_db, and
    the front is evaluated under the tightened repair."""
    import memtrade.sensitivity as ms
    from explorer.search.pick import Point
    root, app = tiny
    # the least memory at 72 dB: every layer fp16 (73.3 dB estimated), which measures 70.3
    app = replace(app, min_sqnr_db=72.0, memory=0)
    tables = {"c": _table()}
    from memtrade.problem import problem_for
    from memtrade.exploration import search_settings
    problem, search = problem_for(app, memtrade.problem.evaluator_for(app, None),
                                  search_settings(app.search, population=8, generations=3), None, tables)
    monkeypatch.setattr(ms, "reference_sqnr", lambda a, plan, *rest: {
        "c": estimate_db(tables["c"], app.cnns["c"], "c", LayerPrecisions.of(plan.layer_precisions)) - 3})
    outcome = search(app, problem, search_settings(app.search, population=8, generations=3))
    said = []
    outcome, plan = ms.checked(app, problem, outcome, lambda p, met: problem.plan(p.genes, p.fps, met),
                               say=said.append)
    assert plan.sqnr_reference_db["c"] >= 72.0 and plan.sqnr_estimate_db["c"] >= 75.0
    assert said and problem.margin > 0
    for p in outcome.front:
        assert Point(p.genes, *problem(p.genes)) == p


@pytest.mark.parametrize("name", LADDER)
def test_fps_at_one_precision_everywhere_is_that_precisions(tiny, name):
    """explorer/throughput/evaluator.py with a precision per layer: every layer at one
    precision times as the app at that precision; a mix lies between all-int8 and all-fp32."""
    from explorer.app.layer_precision import uniform
    from explorer.app.model import PRECISIONS
    from explorer.plan.derive import uniform_phases
    from memtrade.problem import evaluator_for
    _, app = tiny
    phases = uniform_phases(app, True)
    fixed = replace(app, precision=PRECISIONS[name], precisions=())
    assert evaluator_for(app, None).fps(phases, uniform(app.cnns, name)) == \
        evaluator_for(fixed, None).fps(phases)
    ev = evaluator_for(app, None)
    mix = ev.fps(phases, LayerPrecisions.of({"c": {"conv1": "int8", "conv2": "fp16"}}))["c"]
    assert ev.fps(phases, uniform(app.cnns, "fp32"))["c"] <= mix <= ev.fps(phases, uniform(app.cnns, "int8"))["c"]


@pytest.mark.parametrize("method", ["minmax", "percentile"])
def test_reference_sqnr_calibrates_by_the_method_given(tiny, monkeypatch, method):
    """memtrade.sensitivity.reference_sqnr's int8 scales come from the calibration method it
    is given, the one the sensitivity table was measured with."""
    import memtrade.sensitivity as ms
    from deploy.quant import calibration
    from explorer.app.layer_precision import uniform
    root, app = tiny
    real, asked = calibration.activation_scales, []

    def spy(*args, **kw):
        asked.append((args[4:], kw))
        return real(*args, **kw)

    monkeypatch.setattr(calibration, "activation_scales", spy)
    plan = type("P", (), {"layer_precisions": uniform(app.cnns, "int8").by_cnn()})
    ms.reference_sqnr(app, plan, root / "frames.npy", method)
    assert asked == [((), {"method": method})]
