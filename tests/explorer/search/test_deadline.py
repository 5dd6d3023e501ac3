"""A batch in slices (explorer/search/deadline.py, Deadline.in_slices) on an injected clock:
every key evaluated once and in order until the time runs out, at most one slice past the
deadline, and slices of about SLICE_S seconds whatever one evaluation costs."""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from explorer.search import deadline as dl
from explorer.search.nsga2 import Operators, run_nsga2


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 300), st.floats(0.001, 4.0), st.one_of(st.none(), st.floats(0.0, 30.0)),
       st.integers(2, 64))
def test_slices_keep_to_the_deadline_and_the_keys_order(n, per_key, seconds, most):
    clock = Clock()
    deadline = dl.Deadline(seconds, clock=clock)
    sizes, starts = [], []

    def many(part):
        sizes.append(len(part))
        starts.append(clock.t)
        clock.t += per_key * len(part)
        return [k * 10 for k in part]

    keys = list(range(n))
    got = deadline.in_slices(many, keys, "stage", most)
    assert got == [k * 10 for k in keys[:len(got)]]          # a prefix, in order
    if seconds is None:
        assert got == [k * 10 for k in keys] and len(sizes) == (1 if n else 0)
        return
    assert len(got) == n or deadline.stopped == "stage"
    # asked before every later slice: none starts past the deadline, nor when one key
    # won't fit
    assert all(start + per_key <= seconds + 1e-9 for start in starts[1:])
    assert sizes[:1] in ([], [min(dl.FIRST_SLICE, most, n)], [1]) or seconds < per_key
    for size, start in zip(sizes[1:], starts[1:]):
        assert 1 <= size <= most
        # a slice aims at SLICE_S at the pace so far (here constant), 2 keys at least,
        # and is cut to what fits before the deadline
        assert size * per_key <= max(dl.SLICE_S, 2 * per_key) + 1e-9
        assert start + size * per_key <= seconds + 1e-9 or size == 1
    if len(got) < n and sizes:                      # stopped: the time left fits no key
        assert starts[-1] + sizes[-1] * per_key + per_key > seconds - 1e-9


def test_the_pace_carries_over_to_the_next_batch_and_its_shares():
    """A budget's shares keep one pace: the next batch's first slice is sized by it and cut
    to the time left (one key at least), and no later slice starts when one key does not
    fit."""
    clock = Clock()
    root = dl.Deadline(10.0, clock=clock)
    part = root.share(0.5)                          # 5 s

    def many(keys):
        clock.t += 0.125 * len(keys)
        return list(keys)

    part.in_slices(many, range(30), "a")
    assert root.pace == 0.125
    sizes = []
    root.in_slices(lambda k: sizes.append(len(k)) or many(k), range(30), "b")
    assert sizes[0] == int(dl.SLICE_S / 0.125)
    clock.t = 9.9                                   # 0.1 s left: one key, no more
    assert root.in_slices(many, range(5), "c") == [0] and root.stopped == "c"


def test_a_generation_stopped_on_time_keeps_only_what_it_evaluated():
    """NSGA-II whose deadline passes inside a generation's batch: the batch stops after
    the slice under way, the run ends there, and every chromosome of its archive was
    evaluated."""
    clock = Clock()
    asked: list[tuple[int, ...]] = []

    def objectives(keys):
        out = []
        for k in keys:
            asked.append(k)
            clock.t += 0.05
            out.append((float(sum(k)), float(len(k) - sum(k))))
        return out

    import random

    def initial(mu, make):
        return [make([random.randint(0, 1) for _ in range(12)]) for _ in range(mu)]

    def vary(offspring):
        for ind in offspring:
            i = random.randrange(len(ind))
            ind[i] = 1 - ind[i]
            del ind.fitness.values

    deadline = dl.Deadline(4.0, clock=clock)           # 80 evaluations' time
    run = run_nsga2((-1.0, -1.0), Operators(initial, vary), objectives, 16, 200, seed=3,
                    deadline=deadline)
    assert run.stopped and deadline.stopped.startswith("NSGA-II generation")
    assert 0 < run.generations < 200
    past = len(asked) - int(4.0 / 0.05)
    assert past <= 32                                   # one slice past the deadline at most
    assert {tuple(p) for p in run.hall} <= set(asked)
