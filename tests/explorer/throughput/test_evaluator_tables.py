"""The evaluator's measured tables (explorer.throughput.evaluator.Evaluator.tables): the
profile's tables by the app's CNN names, read-only, and what the searches read from them: a
tiled group's extra calls (explorer.tiling.fused.layer_call_ms) and the runtime bytes of
the memory (Evaluation.workspace, TiledEvaluation.workspace). No module reads the
evaluator's private state."""
from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

import pytest

from explorer.app.model import Partition
from explorer.plan.derive import Evaluation
from explorer.throughput.device_profile import DeviceProfile, LayerTimes
from explorer.throughput.evaluator import Evaluator
from explorer.tiling.fused import layer_call_ms
from explorer.tiling.genes import TiledEvaluation
from test_throughput import _ROOF, _app, _chain

ROOT = Path(__file__).resolve().parents[3]
PRIVATE = ("_tables", "_costs", "_memo", "_loop", "_params", "_fused", "_layer")


@pytest.fixture(scope="module")
def times() -> dict[str, LayerTimes]:
    return {"in": LayerTimes(0.0), "l0": LayerTimes(1.0, part_ms=0.125, phases=16),
            "l1": LayerTimes(2.0)}


@pytest.fixture(scope="module")
def app():
    parts = [Partition("a.all", "a", ["in", "l0", "l1"]), Partition("b.all", "b", ["in", "l0"])]
    return _app([_chain("a", 2), _chain("b", 1)], parts, [["a.all"], ["b.all"]])


def test_tables_are_the_profiles_by_cnn_read_only(app, times):
    ev = Evaluator(app, DeviceProfile("m", {"gpu": _ROOF}, {"a": times}, default_phase_us=10.0))
    assert isinstance(ev.tables, Mapping)
    assert dict(ev.tables) == {"a": times}            # b is timed by the roofline
    with pytest.raises(TypeError):
        ev.tables["b"] = {}                            # type: ignore[index]
    assert "b" not in ev.tables
    # one more call of a measured layer: from whole (1 ms) to 16 phases (2 ms), per phase
    assert layer_call_ms(ev, "a", "l0", "gpu") == pytest.approx(1 / 15)
    assert layer_call_ms(ev, "a", "l1", "gpu") == pytest.approx(0.010)    # default_phase_us
    assert layer_call_ms(ev, "b", "l0", "gpu") == pytest.approx(_ROOF.phase_overhead_us * 1e-3)
    # both searches count the measured tables' runtime bytes
    assert Evaluation(app, ev).workspace == {"a": times}
    assert TiledEvaluation(app, ev, "parts").workspace == {"a": times}


def test_without_measured_tables_nothing_is_counted(app):
    ev = Evaluator(app, DeviceProfile("r", {"gpu": _ROOF}))
    assert dict(ev.tables) == {}
    assert Evaluation(app, ev).workspace is None


def test_no_module_reads_the_evaluators_private_state():
    found = []
    for top in ("explorer", "deploy", "benchmarks"):
        for path in sorted((ROOT / top).rglob("*.py")):
            if path == ROOT / "explorer" / "throughput" / "evaluator.py":
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if (isinstance(node, ast.Attribute) and node.attr in PRIVATE
                        and getattr(node.value, "id", None) != "self"):     # another's
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: .{node.attr}")
                if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "getattr"
                        and any(isinstance(a, ast.Constant) and a.value in PRIVATE
                                for a in node.args)):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: getattr")
    assert found == []
