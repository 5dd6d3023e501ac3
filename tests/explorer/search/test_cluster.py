"""Evaluation on a Dask cluster (`--cluster`, explorer/search/cluster.py): a
scheduler and two worker processes give the front of the in-process search for the same
seed; an unreachable scheduler and a bad `search.cluster` are one line and exit 2."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

import explorer.search.cluster as cluster
from explorer.app.appfile import load_app
from explorer.cli.main import main
from explorer.plan.derive import Evaluation
from explorer.plan.genes import gene_space
from explorer.search.algorithm2 import algorithm2
from explorer.throughput.evaluator import make_evaluator
from sdf3.errors import InputError


ROOT = Path(__file__).resolve().parents[3]
WORKED = ROOT / "apps" / "worked_example.yaml"


@pytest.fixture(scope="module")
def scheduler():
    """A scheduler and two workers, each a process of its own (cluster.local_processes)."""
    with cluster.local_processes(2) as address:
        yield address


def _front(app, **settings):
    s = replace(app.search, population=12, generations=4, seed=3, relink_rounds=2, **settings)
    evaluation = Evaluation(app, make_evaluator(app), space=gene_space(app, s.granularity))
    outcome = algorithm2(app, evaluation, s)
    return [(p.genes, p.memory_bytes, p.fps) for p in outcome.front], outcome.chosen.genes


def test_the_cluster_gives_the_in_process_front(scheduler):
    app = load_app(WORKED, mem="0")
    here = _front(app, workers=1)
    there = _front(app, cluster=scheduler)
    assert there == here and len(here[0]) > 2


def test_explore_on_the_cluster_writes_the_same_plan(scheduler, tmp_path):
    for where, extra in (("here", ["--workers", "1"]), ("there", ["--cluster", scheduler])):
        assert main([str(WORKED), "--mem", "0", "--population", "8", "--generations", "3",
                     "--quiet", "--out", str(tmp_path / where), *extra]) == 0
    assert (tmp_path / "here" / "plan.json").read_text() == \
        (tmp_path / "there" / "plan.json").read_text()


def test_an_unreachable_scheduler_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cluster, "TIMEOUT", 1)
    assert main([str(WORKED), "--mem", "0", "--cluster", "tcp://127.0.0.1:9", "--quiet",
                 "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--cluster tcp://127.0.0.1:9: no Dask scheduler answered" in err
    assert not (tmp_path / "run").exists()


def test_a_bad_cluster_key_is_one_line(tmp_path, capsys):
    app = tmp_path / "app.yaml"
    app.write_text(WORKED.read_text().replace("search: {", "search: {cluster: 8786, ", 1))
    assert main([str(app), "--out", str(tmp_path / "run"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "search.cluster: expected a Dask scheduler address" in err


def test_a_failure_on_the_cluster_is_one_line():
    """A worker lost mid-batch (distributed's KilledWorker, here any error from gather)."""
    class Lost:
        def map(self, *args, **kw):
            return []

        def gather(self, futures):
            raise RuntimeError("worker tcp://10.0.0.7:4000 died\nwhile computing")
    evaluate = cluster.ClusterEvaluate(lambda key: (0, {}), Lost(), 2)
    with pytest.raises(InputError, match="evaluating on the cluster failed: RuntimeError") as info:
        evaluate.many([(0,), (1,)])
    assert "\n" not in str(info.value)
