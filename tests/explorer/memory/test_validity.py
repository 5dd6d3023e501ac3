"""The validity check's step-by-step judgement of uses stored by rows
(explorer/memory/validity.py `_collide`, all steps at once as arrays) against the plain loop
over every common step with EdgeUse.rows.live."""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from explorer.memory.lifetimes import EdgeUse, Rows
from explorer.memory.validity import _collide


def plain_collide(a, oa, b, ob) -> bool:
    (pa, a0, a1), (pb, b0, b1) = a.spans[0], b.spans[0]
    if (a.rows is None and b.rows is None) or pa != pb:
        return True

    def held(use, offset, t):
        if use.rows is None:
            return offset, offset + use.size
        lo, hi = use.rows.live(t)
        return offset + lo * use.rows.row, offset + hi * use.rows.row

    for t in range(max(a0, b0), min(a1, b1) + 1):
        x0, x1 = held(a, oa, t)
        y0, y1 = held(b, ob, t)
        if x0 < x1 and y0 < y1 and x0 < y1 and y0 < x1:
            return True
    return False


@st.composite
def use(draw, name):
    a = draw(st.integers(0, 40))
    b = a + draw(st.integers(0, 40))
    rows = None
    if draw(st.booleans()):
        k = draw(st.integers(1, 8))
        first = sorted(draw(st.lists(st.integers(a, b), min_size=k, max_size=k)))
        last = sorted(f + draw(st.integers(0, 15)) for f in first)
        rows = Rows(draw(st.integers(1, 6)), tuple(first), tuple(last))
    size = rows.row * len(rows.first) if rows else draw(st.integers(1, 60))
    return EdgeUse(name, "c", size, (("p" if draw(st.integers(0, 5)) else "q", a, b),), rows)


@settings(max_examples=300, deadline=None)
@given(use("a"), use("b"), st.integers(0, 60), st.integers(0, 60))
def test_collide_as_arrays_is_the_step_by_step_judgement(a, b, oa, ob):
    assert _collide(a, oa, b, ob, {}) == plain_collide(a, oa, b, ob)
