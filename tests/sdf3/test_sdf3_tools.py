"""Cross-check against the real SDF3 binaries when a user has them (skipped otherwise)."""
from __future__ import annotations

import random

import pytest

from sdf3.graph import Actor, Channel, Graph
from sdf3.repetition import repetition_vector
from sdf3.throughput import throughput
from sdf3.tools import find_sdf3, parse_output, run_sdf3
from sdf3.tradeoff import tradeoff
from sdf3.xml import read_xml

from conftest import DATA  # noqa: E402
SHARED = DATA / "sdf3"
needs_sdf3 = pytest.mark.skipif(find_sdf3() is None,
                                reason="sdf3analysis-csdf not on PATH nor in $SDF3_HOME/bin "
                                       "(SDF3 is not in any package registry; install it by hand)")


def test_find_sdf3_honours_sdf3_home(tmp_path, monkeypatch):
    exe = tmp_path / "bin" / "sdf3analysis-csdf"
    exe.parent.mkdir()
    exe.write_text("#!/bin/sh\necho 'Graph is consistent.'\n")
    exe.chmod(0o755)
    monkeypatch.setenv("SDF3_HOME", str(tmp_path))
    assert find_sdf3() == str(exe)
    g = Graph("t")
    g.add_actor(Actor("a"))
    assert run_sdf3(g, algos=("consistency",)).consistent is True


def test_parse_output_reads_a_transcript():
    text = (SHARED / "ex2_two_actor.out").read_text()
    r = parse_output(text)
    assert r.consistent is True and r.repetition_vector == {"P": 5, "C": 5}
    assert r.repetition_vector_sum == 10 and r.throughput == pytest.approx(0.1)
    assert [(p.size, p.distributions[0]["P2C"]) for p in r.tradeoff] == [(0, 0), (7, 3), (8, 4), (9, 5)]


@needs_sdf3
@pytest.mark.parametrize("seed", range(5))
def test_engine_agrees_with_real_sdf3_on_random_graphs(seed):
    rng = random.Random(seed)
    g = Graph(f"r{seed}")
    names = ["a", "b", "c"]
    for n in names:
        ph = rng.randint(1, 3)
        g.add_actor(Actor(n, ph, [rng.randint(1, 4) for _ in range(ph)], n))
        g.add_channel(Channel(f"self_{n}", n, n, [1] * ph, [1] * ph, 1))
    for k, (s, d) in enumerate([("a", "b"), ("b", "c")]):
        g.add_channel(Channel(f"{s}{d}", s, d, [1] * g.actors[s].phases,
                              [g.actors[s].phases if p == 0 else 0 for p in range(g.actors[d].phases)]))
    r = run_sdf3(g)
    assert r.repetition_vector == repetition_vector(g)
    assert throughput(g) == pytest.approx(r.throughput, rel=1e-5)
    assert [p.size for p in tradeoff(g)] == [p.size for p in r.tradeoff]


@needs_sdf3
def test_real_sdf3_reads_our_rewrite_of_shared_files(tmp_path):
    from sdf3.xml import write_xml
    for f in sorted(SHARED.glob("*.xml")):
        write_xml(read_xml(f), tmp_path / f.name)
        assert run_sdf3(tmp_path / f.name, algos=("repetition_vector",)).repetition_vector
