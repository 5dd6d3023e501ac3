"""The outputs stage of a plan with thousands of steps (memtrade/front_files.py): written in
time that grows no faster than the plan's steps (measured against a smaller plan in the same
test), within the estimate the run's budget measured for it before the search, and without
deriving again a partition the search's cache holds."""
from __future__ import annotations

import time

import pytest

import memtrade
from explorer.plan import derive as derive_module
from memtrade.front_files import write_files


def chain(height: int, layers: int = 6) -> dict:
    """A synthetic chain of `layers` layers, every edge [1, 8, height, 16]: its all-row-by-row
    plan has about layers x height steps."""
    names = {f"l{i}": {} for i in range(layers)}
    edges = {f"l{i}->l{i + 1}": [1, 8, height, 16] for i in range(layers - 1)}
    return {"name": f"chain{height}", "cnns": [{"name": "c", "model": {"synthetic": {
        "layers": names, "edges": edges}}}]}


def explored(height: int):
    # a budget (not reached) so the run measures its outputs' estimate before the search
    return memtrade.explore(chain(height), mem=0, population=4, generations=1, relink_rounds=0,
                            local_rounds=0, workers=1, time_limit=3600)


def outputs(found, tmp_path, name: str) -> float:
    out = tmp_path / name
    out.mkdir()
    start = time.perf_counter()
    write_files(found, out)
    return time.perf_counter() - start


@pytest.fixture(scope="module")
def runs():
    return {h: explored(h) for h in (128, 2048)}


def steps(found) -> int:
    return sum(len(f) for f in found.plan.firings.values())


def test_outputs_grow_with_the_steps_not_faster(runs, tmp_path):
    small, big = runs[128], runs[2048]
    outputs(small, tmp_path, "warm")                  # the plotting library loaded once
    ratio = steps(big) / steps(small)
    assert steps(big) > 5000 and ratio > 10
    t_small = min(outputs(small, tmp_path, f"s{i}") for i in range(2))
    t_big = outputs(big, tmp_path, "big")
    # quadratic work would take ratio^2 (> 100) times as long; linear at most ratio times
    assert t_big < ratio * t_small


def test_outputs_derive_no_partition_the_search_holds(runs, tmp_path, monkeypatch):
    """The chosen plan, the reuse-only picture and the baselines (reuse only, all by parts)
    all come from partitions the run already derived (its RunCache)."""
    calls = []
    plain = derive_module.part_view
    monkeypatch.setattr(derive_module, "part_view",
                        lambda *a, **k: calls.append(a[1]) or plain(*a, **k))
    outputs(runs[2048], tmp_path, "cached")
    assert calls == []


def test_outputs_keep_within_their_measured_estimate(runs, tmp_path):
    found = runs[2048]
    assert found._work.outputs_estimate_s > 0
    outputs(found, tmp_path, "warm")
    assert outputs(found, tmp_path, "timed") < 2 * found._work.outputs_estimate_s + 0.5
