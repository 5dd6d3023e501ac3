"""Our engine against SDF3's own answers (tests/data/sdf3/*.out, copied from ../shared/sdf3: real sdf3analysis-csdf runs)."""
from __future__ import annotations

import math
import re

import pytest

from sdf3.repetition import repetition_vector
from sdf3.schedule import min_buffer_schedule
from sdf3.throughput import throughput
from sdf3.tools import parse_output
from sdf3.tradeoff import tradeoff
from sdf3.xml import read_xml

from conftest import DATA  # noqa: E402
SHARED = DATA / "sdf3"
CASES = ["ex1_conv3x3", "ex2_two_actor"]



def _out(case: str) -> str:
    return (SHARED / f"{case}.out").read_text()


@pytest.mark.parametrize("case", CASES)
def test_repetition_vector_matches_sdf3(case):
    text = _out(case)
    expected = {m.group(1): int(m.group(2)) for m in re.finditer(r"^ \[(\w+)\] = (\d+)$", text, re.M)}
    assert expected, "the .out file lists a repetition vector"
    g = read_xml(SHARED / f"{case}.xml")
    assert repetition_vector(g) == expected
    total = int(re.search(r"Repetition vector sum: (\d+)", text).group(1))
    assert sum(repetition_vector(g).values()) == total
    assert parse_output(text).repetition_vector == expected


@pytest.mark.parametrize("case", CASES)
def test_throughput_matches_sdf3(case):
    expected = float(re.search(r"thr\(\w+\) = ([0-9.]+)", _out(case)).group(1))
    g = read_xml(SHARED / f"{case}.xml")
    assert throughput(g) == pytest.approx(expected, rel=1e-5)


def test_throughput_ex1_is_one_over_conv_cycle():
    # conv's self-loop serialises its phases: 3+2+2+2+2 = 11 time units per iteration
    g = read_xml(SHARED / "ex1_conv3x3.xml")
    assert sum(g.actors["conv"].exec_times) == 11
    assert throughput(g) == pytest.approx(1 / 11)


@pytest.mark.parametrize("case", CASES)
def test_tradeoff_points_match_sdf3(case):
    sdf3 = parse_output(_out(case)).tradeoff
    assert len(sdf3) >= 3
    ours = tradeoff(read_xml(SHARED / f"{case}.xml"))
    assert [p.size for p in ours] == [p.size for p in sdf3]
    for mine, theirs in zip(ours, sdf3):
        assert mine.throughput == pytest.approx(theirs.throughput, rel=1e-5, abs=1e-9)
        assert mine.distributions[0] in theirs.distributions or theirs.distributions[0] in mine.distributions


@pytest.mark.parametrize("case,channels", [("ex1_conv3x3", {"in2conv": 3, "conv2out": 1}),
                                           ("ex2_two_actor", {"P2C": 3})])
def test_min_buffers_are_sdf3_smallest_nonzero_point(case, channels):
    g = read_xml(SHARED / f"{case}.xml")
    sched = min_buffer_schedule(g)
    smallest = parse_output(_out(case)).tradeoff[1]
    assert smallest.distributions[0] == sched.buffers
    for name, size in channels.items():
        assert sched.buffers[name] == size
    assert sched.total() == smallest.size
    # and that smallest distribution indeed runs, at SDF3's throughput
    assert throughput(g, sched.buffers) == pytest.approx(smallest.throughput, rel=1e-5)


def test_capacity_points_of_ex2_by_hand():
    # P2C of 3, 4, 5 tokens: SDF3 gives periods 14, 12, 10
    g = read_xml(SHARED / "ex2_two_actor.xml")
    for cap, period in [(3, 14), (4, 12), (5, 10)]:
        assert math.isclose(throughput(g, {"P2C": cap}), 1 / period)
    assert throughput(g, {"P2C": 2}) == 0.0  # C's first phase needs 3 tokens at once
