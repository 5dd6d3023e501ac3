"""Picking a point of a hand-made front: Algorithm 2 lines 9-16 (least memory) and the
fastest point within a memory budget."""
import math

import pytest

from explorer.search.pick import Point, describe_rule, meets, pick, pick_rule

MB = 2 ** 20
FRONT = [  # memory rises, fps rises: a front
    Point((1, 1, 1), 5 * MB, {"a": 40.0, "b": 200.0}),
    Point((0, 1, 1), 7 * MB, {"a": 65.0, "b": 150.0}),
    Point((0, 0, 1), int(7.9 * MB), {"a": 72.0, "b": 180.0}),
    Point((0, 0, 0), 12 * MB, {"a": 79.0, "b": 210.0}),
]


def test_least_memory_point_meeting_all_constraints():
    chosen, ok = pick(FRONT, 8 * MB, {"a": 71.0})
    assert ok and chosen.genes == (0, 0, 1)


def test_every_cnn_constraint_counts():
    chosen, ok = pick(FRONT, None, {"a": 60.0, "b": 160.0})
    assert ok and chosen.genes == (0, 0, 1)        # (0,1,1) fails b = 150 < 160
    chosen, ok = pick(FRONT, None, {"a": 0.0, "b": 205.0})
    assert ok and chosen.genes == (0, 0, 0)        # 0 = no constraint for a


def test_none_meets_gives_least_memory_of_front():
    chosen, ok = pick(FRONT, 8 * MB, {"a": 80.0})
    assert not ok and chosen.genes == (1, 1, 1)
    chosen, ok = pick(FRONT, 4 * MB, {})
    assert not ok and chosen.memory_bytes == 5 * MB


def test_memory_constraint_is_inclusive_and_no_constraints_take_least_memory():
    assert meets(FRONT[1], 7 * MB, {"a": 65.0})
    assert not meets(FRONT[1], 7 * MB - 1, {})
    chosen, ok = pick(list(reversed(FRONT)), None, {})
    assert ok and chosen.memory_bytes == 5 * MB


def test_tie_on_memory_goes_to_higher_fps():
    front = [Point((1,), 5, {"a": 10.0}), Point((0,), 5, {"a": 12.0})]
    assert pick(front, 5, {})[0].genes == (0,)


def test_rule_follows_the_constraints_given_unless_preferred():
    assert pick_rule(8 * MB, {}) == "fps" and pick_rule(8 * MB, {"a": 0.0}) == "fps"
    assert pick_rule(8 * MB, {"a": 71.0}) == "memory"      # both: the paper's rule
    assert pick_rule(None, {"a": 71.0}) == "memory" and pick_rule(None, {}) == "memory"
    assert pick_rule(None, {}, "fps") == "fps" and pick_rule(8 * MB, {}, "memory") == "memory"
    with pytest.raises(ValueError):
        pick_rule(8 * MB, {}, "speed")
    assert "--prefer memory" in describe_rule("fps", None)
    assert describe_rule("memory", "memory").endswith("(--prefer memory)")


def test_memory_budget_alone_takes_the_fastest_point_within_it():
    chosen, ok = pick(FRONT, 8 * MB, {})
    assert ok and chosen.genes == (0, 0, 1)                # 7.9 MB, the fastest under 8 MB
    chosen, ok = pick(FRONT, 8 * MB, {}, prefer="memory")
    assert ok and chosen.genes == (1, 1, 1)


def test_fastest_is_the_geometric_mean_not_the_sum():
    front = [Point((0,), 5, {"a": 100.0, "b": 10.0}), Point((1,), 6, {"a": 30.0, "b": 50.0})]
    by_mean = max(front, key=lambda p: math.sqrt(p.fps["a"] * p.fps["b"]))
    by_sum = max(front, key=lambda p: sum(p.fps.values()))
    assert by_mean is not by_sum                            # the case tells the two apart
    assert pick(front, 10, {})[0] is by_mean


def test_prefer_fps_keeps_every_constraint_and_ties_go_to_less_memory():
    chosen, ok = pick(FRONT, None, {"a": 60.0, "b": 160.0}, prefer="fps")
    assert ok and chosen.genes == (0, 0, 0)                # fastest meeting both fps floors
    chosen, ok = pick(FRONT, 8 * MB, {"a": 80.0}, prefer="fps")
    assert not ok and chosen.genes == (1, 1, 1)            # none meets: least memory, as before
    tie = [Point((1,), 9, {"a": 10.0}), Point((0,), 7, {"a": 10.0})]
    assert pick(tie, 10, {})[0].genes == (0,)
