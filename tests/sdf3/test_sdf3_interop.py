"""SDF3 interoperability: capacities written as SDF3 reads them (a reverse channel
per edge holding the capacity), bufferSize only in SDF3's schema form, the evaluator's times
in the files `explore --out` writes, and SDF3's rule for the (0, 0) trade-off point."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from lxml import etree

from explorer.app.appfile import load_app
from explorer.cli.main import main
from explorer.report.sdf3_export import PER_MS, phase_times
from explorer.throughput.evaluator import make_evaluator
from sdf3.errors import InputError
from sdf3.graph import Actor, Channel, Graph
from sdf3.throughput import throughput
from sdf3.tools import find_sdf3, parse_output, run_sdf3
from sdf3.tradeoff import sdf3_min_size, tradeoff
from sdf3.xml import CAPACITY_SUFFIX, read_xml, to_bytes, write_xml

from conftest import DATA  # noqa: E402
SHARED = DATA / "sdf3"
ROOT = Path(__file__).resolve().parents[2]


def _transcript_points(case: str):
    return parse_output((SHARED / f"{case}.out").read_text()).tradeoff


# ---- capacities as SDF3 sees them -------------------------------------------------------------
@pytest.mark.parametrize("case", ["ex1_conv3x3", "ex2_two_actor"])
def test_written_capacities_give_sdf3s_own_throughputs(case, tmp_path):
    """Each non-zero point SDF3 printed for the shared graphs (its distribution and its thr):
    the graph written with those capacities, read back as SDF3 reads it (reverse channels as
    plain channels, bufferSize ignored), has SDF3's throughput."""
    points = [p for p in _transcript_points(case) if p.throughput > 0]
    assert len(points) >= 3
    for point in points:
        g = read_xml(SHARED / f"{case}.xml")
        for ch in g.channels:
            if ch.src != ch.dst:
                ch.capacity = point.distributions[0][ch.name]
        write_xml(g, tmp_path / "g.xml")
        as_sdf3 = read_xml(tmp_path / "g.xml", as_sdf3=True)
        assert all(c.capacity is None for c in as_sdf3.channels)
        assert len(as_sdf3.channels) == len(g.channels) + sum(c.src != c.dst for c in g.channels)
        assert throughput(as_sdf3) == pytest.approx(point.throughput, rel=1e-5)
        assert read_xml(tmp_path / "g.xml") == g            # folded back: lossless


def _random_bounded(seed: int) -> Graph:
    rng = random.Random(seed)
    g = Graph(f"b{seed}")
    names = ["a", "b", "c", "d"]
    for n in names:
        ph = rng.randint(1, 3)
        g.add_actor(Actor(n, ph, [rng.randint(1, 5) for _ in range(ph)], n))
        g.add_channel(Channel(f"{n}->{n}", n, n, [1] * ph, [1] * ph, 1))
    for s, d in [("a", "b"), ("b", "c"), ("a", "c"), ("c", "d")]:
        A, B = g.actors[s], g.actors[d]
        prod = [rng.randint(1, 2) for _ in range(A.phases)]
        cons = [0] * B.phases
        cons[rng.randrange(B.phases)] = sum(prod)
        init = rng.randint(0, 2)
        g.add_channel(Channel(f"{s}->{d}", s, d, prod, cons, init,
                              capacity=init + sum(prod) + rng.randint(0, 3)))
    return g


@pytest.mark.parametrize("seed", range(12))
def test_capacity_channels_and_capacities_agree(seed):
    g = _random_bounded(seed)
    data = to_bytes(g)
    as_sdf3 = read_xml(data, as_sdf3=True)
    for ch in g.channels:
        if ch.src != ch.dst:
            rev = as_sdf3.channel(ch.name + CAPACITY_SUFFIX)
            assert (rev.src, rev.dst, rev.prod, rev.cons) == (ch.dst, ch.src, ch.cons, ch.prod)
            assert rev.initial_tokens == ch.capacity - ch.initial_tokens
    assert throughput(as_sdf3) == pytest.approx(throughput(g), rel=1e-9)
    back = read_xml(data)
    assert [(c.name, c.capacity, c.initial_tokens) for c in back.channels] == \
        [(c.name, c.capacity, c.initial_tokens) for c in g.channels]
    assert to_bytes(back) == data
    root = etree.fromstring(data)
    for bs in root.iter("bufferSize"):          # SDF3's schema: sz, src, dst, mem all required
        assert {"sz", "src", "dst", "mem"} <= set(bs.attrib)


def test_a_capacity_channel_that_does_not_match_is_refused():
    g = _random_bounded(0)
    root = etree.fromstring(to_bytes(g))
    rev = next(c for c in root.iter("channel") if c.get("name").endswith(CAPACITY_SUFFIX))
    rev.set("name", "nothing" + CAPACITY_SUFFIX)         # the capacity of no channel
    with pytest.raises(InputError, match="expected the reverse of channel 'nothing'"):
        read_xml(etree.tostring(root))
    assert read_xml(etree.tostring(root), as_sdf3=True).channel("nothing" + CAPACITY_SUFFIX)


# ---- SDF3's rule for (0, 0) -------------------------------------------------------------------
def _sdf_pair(p: int, c: int) -> Graph:
    g = Graph("pair")
    g.add_actor(Actor("a", 1, [2]))
    g.add_actor(Actor("b", 1, [3]))
    for n in "ab":
        g.add_channel(Channel(f"self_{n}", n, n, [1], [1], 1))
    g.add_channel(Channel("ab", "a", "b", [p], [c]))
    return g


def test_no_zero_point_when_sdf3s_start_runs():
    # SDF: SDF3 starts a channel at p + c - gcd(p, c), the least deadlock-free size, so its
    # first point is that size (plus 2 per self-loop) with a positive throughput
    g = _sdf_pair(2, 3)
    assert sdf3_min_size(g.channel("ab")) == 4 and sdf3_min_size(g.channel("self_a")) == 2
    points = tradeoff(g)
    assert points[0].size == 4 + 2 + 2 and points[0].throughput > 0
    assert all(p.throughput > 0 for p in points)


@pytest.mark.parametrize("case", ["ex1_conv3x3", "ex2_two_actor"])
def test_zero_point_when_sdf3s_start_deadlocks(case):
    # CSDF with a phase that consumes nothing: SDF3 starts that channel at 0, which
    # deadlocks, and prints (0, 0) first; our points equal SDF3's printed ones
    g = read_xml(SHARED / f"{case}.xml")
    start = {c.name: sdf3_min_size(c) for c in g.channels}
    assert throughput(g, start) == 0
    ours = tradeoff(g)
    theirs = _transcript_points(case)
    assert [(p.size, round(p.throughput, 6)) for p in ours] == \
        [(p.size, round(p.throughput, 6)) for p in theirs]
    assert ours[0].size == 0 and ours[0].distributions == theirs[0].distributions


# ---- the files `explore APP --out` writes -------------------------------------------------------
def test_phase_times_are_integers_adding_up():
    assert phase_times(0.0123456, 4) == [3087, 3087, 3086, 3086]   # 12346 ns
    assert sum(phase_times(1.5, 7)) == 1_500_000 and phase_times(0.0, 3) == [0, 0, 0]


@pytest.fixture(scope="module")
def explored(tmp_path_factory):
    out = tmp_path_factory.mktemp("explored") / "run"
    app = ROOT / "apps" / "worked_example.yaml"
    assert main([str(app), "--mem", "0", "--quiet", "--population", "8", "--generations", "3",
                 "--out", str(out)]) == 0
    return app, out


def test_explore_xml_has_capacities_and_the_evaluators_times(explored):
    app_path, out = explored
    app = load_app(app_path)
    ev = make_evaluator(app)
    plan = json.loads((out / "plan.json").read_text())
    for part in app.partitions:
        g = read_xml(out / f"{part.name}.xml")
        for actor in g.actors.values():
            n = plan["phases"][part.cnn][actor.name]
            assert actor.phases == n and all(isinstance(t, int) for t in actor.exec_times)
            total_ns = ev.layer_ms(part.cnn, actor.name, n, part.processor) * PER_MS
            assert abs(sum(actor.exec_times) - total_ns) <= 0.5
            assert max(actor.exec_times) - min(actor.exec_times) <= 1
        internal = [c for c in g.channels if c.src != c.dst]
        assert internal and all(c.capacity == plan["edges"][f"{part.cnn}.{c.name}"]["rows"]
                                for c in internal)
    assert any(t > 1 for part in app.partitions
               for a in read_xml(out / f"{part.name}.xml").actors.values() for t in a.exec_times)


def test_explore_xml_means_the_same_to_memtrade_and_to_sdf3(explored):
    _, out = explored
    for path in sorted(out.glob("*.xml")):
        ours = throughput(read_xml(path))                      # capacities folded
        as_sdf3 = throughput(read_xml(path, as_sdf3=True))     # what SDF3 analyses
        assert ours > 0 and as_sdf3 == pytest.approx(ours, rel=1e-12)
        if find_sdf3() is not None:
            assert run_sdf3(path, algos=("throughput",)).throughput == pytest.approx(ours, rel=1e-5)


@pytest.mark.skipif(find_sdf3() is None,
                    reason="sdf3analysis-csdf not on PATH nor in $SDF3_HOME/bin "
                           "(SDF3 is not in any package registry; install it by hand)")
def test_real_sdf3_reads_capacity_channels(tmp_path):
    g = _random_bounded(3)
    write_xml(g, tmp_path / "g.xml")
    assert run_sdf3(tmp_path / "g.xml", algos=("throughput",)).throughput == \
        pytest.approx(throughput(g), rel=1e-5)
