"""Algorithm 2 lines 9-16 on a hand-made front."""
from explorer.search.pick import Point, meets, pick

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
