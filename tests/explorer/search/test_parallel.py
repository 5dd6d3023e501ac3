"""Evaluations spread over worker processes (explorer.search.parallel) give what one process gives:
answers in the order asked, computed in other processes, and a whole search (front, counts,
plans) equal to the serial one."""
from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from explorer.search.parallel import Mapped, evaluation_pool, resolve_workers
from explorer.search.problem import as_batch
from explorer.app.appfile import load_app
from test_search_speed import search_run

fork_only = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
WORKED = Path(__file__).resolve().parents[3] / "apps" / "worked_example.yaml"


@pytest.fixture(scope="module")
def worked():
    """The paper's worked example at the least-memory goal: every batch of the search (its
    NSGA-II generations, path relinking, local search) goes to the pool, 88 chromosomes in
    11 batches by ladder, 22 in 4 by halves, in 0.3 s (table 12's MobileNetV2 app, 581
    chromosomes by ladder, took 14 s for the same path)."""
    return load_app(WORKED, mem="0")


def where(key):
    """A chromosome's sum, and the process that computed it."""
    return sum(key), {"pid": float(os.getpid())}


@fork_only
def test_pool_answers_in_order_from_other_processes():
    keys = [(i, i % 3, 7) for i in range(40)]
    with evaluation_pool(where, 2) as spread:
        got = as_batch(spread).many(keys)
        one = spread((1, 2))
    assert [m for m, _ in got] == [sum(k) for k in keys]
    pids = {int(f["pid"]) for _, f in got}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2
    assert one == (3, {"pid": float(os.getpid())})        # a single key stays here


def test_one_worker_is_the_function_itself():
    with evaluation_pool(where, 1) as spread:
        assert spread is where
    assert resolve_workers(3) == 3 and 1 <= resolve_workers(0) <= 8


def test_mapped_translates_single_keys_and_batches():
    twice = Mapped(where, lambda k: tuple(2 * g for g in k))
    assert twice((1, 2))[0] == 6
    assert [m for m, _ in as_batch(twice).many([(1,), (2, 3)])] == [2, 10]


@fork_only
@pytest.mark.parametrize("granularity", ["ladder", "binary"])
def test_search_with_two_workers_equals_one(worked, granularity):
    stages = {"relink_rounds": 1, "local_rounds": 1}         # their batches go to the pool too
    serial = search_run(replace(worked, search=replace(worked.search, workers=1)), granularity, **stages)
    spread = search_run(replace(worked, search=replace(worked.search, workers=2)), granularity, **stages)
    assert spread == serial and len(serial[0]) >= 3
