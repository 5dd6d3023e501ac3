"""`explore run --seed/--frames` and `memtrade.run(seed=, frames=)` (memtrade/measuring.py):
each value outside the whole numbers the run takes is one line naming the flag, from the API
and the command alike, before the deployment is loaded."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

import memtrade
from memtrade.measuring import MAX_FRAMES, MAX_SEED, check_count
from refusals import refused, tiny_least_memory
from sdf3.errors import InputError

VALUES = st.one_of(st.integers(-2**70, 2**70), st.booleans(), st.floats(allow_nan=True),
                   st.text(max_size=3), st.none())


@settings(max_examples=60, deadline=None)
@given(value=VALUES, flag=st.sampled_from([("--seed", 0, MAX_SEED), ("--frames", 1, MAX_FRAMES)]))
def test_a_count_is_taken_exactly_when_a_whole_number_in_range(value, flag):
    name, low, high = flag
    ok = isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
    if ok:
        assert check_count(name, value, low, high) == value
    else:
        with pytest.raises(InputError, match=f"^{name}: expected a whole number from {low} to {high}"):
            check_count(name, value, low, high)


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    return tiny_least_memory(tmp_path_factory.mktemp("run_counts"))


@pytest.mark.parametrize("flag,value", [("--seed", "-1"), ("--seed", str(2**32)),
                                        ("--seed", "9" * 23), ("--frames", "9" * 20)])
def test_the_command_and_the_api_refuse_alike(deployment, capsys, flag, value):
    line = refused(capsys, ["run", str(deployment), flag, value], f"{flag}: expected")
    with pytest.raises(InputError) as err:
        memtrade.run(deployment, **{flag[2:]: int(value)})
    assert line == f"explore: error: {err.value}"
