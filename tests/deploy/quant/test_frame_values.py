"""Frames of input whose values are not float32's (deploy/quant/frame_values.py): NaN, an
infinity, or a float64 beyond float32's range in any frame of a calibration file or of
`explore run --input` is refused in one line naming the file and the first such frame; a
finite frame that drives a stored tensor to infinity in the calibrator is refused by index
too; frames of ordinary values pass."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from deploy.quant import calibration
from deploy.quant.frame_values import FLOAT32_MAX, check_values
from refusals import refused, tiny_least_memory
from sdf3.errors import InputError

SHAPE = (1, 3, 8, 8)
BAD = st.sampled_from([np.nan, np.inf, -np.inf, 1e300, -1e39, 3.5e38])
FAST = settings(max_examples=30, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


@st.composite
def frames_with_bad_values(draw):
    """[F, 1, 3, 8, 8] float64 frames, some holding a value float32 cannot; the index of the
    first such frame (None when none)."""
    count = draw(st.integers(1, 6))
    frames = np.random.default_rng(draw(st.integers(0, 99))).standard_normal((count,) + SHAPE)
    bad = draw(st.lists(st.tuples(st.integers(0, count - 1), st.integers(0, 191), BAD), max_size=3))
    for f, at, value in bad:
        frames[f].reshape(-1)[at] = value
    first = min((f for f, _, _ in bad), default=None)
    return frames, first


def expected_words(frames: np.ndarray, first: int) -> str:
    frame = frames[first]
    if not np.isfinite(frame).all():
        return f"frame {first} holds NaN or infinite values"
    return f"frame {first} holds {np.abs(frame).max():.3g}, beyond float32's range"


@FAST
@given(case=frames_with_bad_values())
def test_the_first_frame_float32_cannot_hold_is_named(case):
    frames, first = case
    if first is None:
        check_values(frames, "f.npy")
        return
    with pytest.raises(InputError) as err:
        check_values(frames, "f.npy")
    assert str(err.value).startswith(f"f.npy: {expected_words(frames, first)}")


@FAST
@given(case=frames_with_bad_values(), npz=st.booleans())
def test_a_calibration_file_names_itself_and_the_frame(tmp_path, case, npz):
    frames, first = case
    path = tmp_path / ("c.npz" if npz else "c.npy")
    if npz:
        np.savez(path, a=frames)
    else:
        np.save(path, frames)
    if first is None:
        got, _ = calibration.frames(path, SHAPE)
        assert len(got) == len(frames)
        np.testing.assert_array_equal(np.stack(got), frames.astype(np.float32))
        return
    with pytest.raises(InputError) as err:
        calibration.frames(path, SHAPE)
    where = f"{path}: array 'a'" if npz else f"{path}: array"
    assert str(err.value).startswith(f"{where}: {expected_words(frames, first)}")


def test_float32_max_itself_is_held():
    check_values(np.full((1,) + SHAPE, FLOAT32_MAX, np.float64), "f")


@pytest.mark.parametrize("at", [0, 2])
def test_a_frame_that_drives_a_tensor_to_infinity_is_named(tmp_path, at):
    from conftest import write_tiny_onnx
    from csdf.onnx_import import load_onnx
    model = write_tiny_onnx(tmp_path / "tiny.onnx")
    frames = [np.full(SHAPE, 0.5, np.float32) for _ in range(3)]
    frames[at] = np.full(SHAPE, 1e37, np.float32)   # finite, but 27 products of it are not
    with pytest.raises(InputError) as err:
        calibration.activation_scales(model, load_onnx(model, "tiny"), frames, frames_from="c.npy")
    assert str(err.value).startswith(f"c.npy: frame {at} drives tensor ") and "beyond float32's range" in str(err.value)


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    return tiny_least_memory(tmp_path_factory.mktemp("frame_values"))


@pytest.mark.parametrize("value,words", [(np.nan, "NaN or infinite"), (1e300, "1e+300, beyond")])
def test_run_input_names_the_file_and_frame(deployment, tmp_path, capsys, value, words):
    frames = np.zeros((3,) + SHAPE)
    frames[1, 0, 2, 3, 4] = value
    np.save(tmp_path / "in.npy", frames)
    refused(capsys, ["run", str(deployment), "--input", str(tmp_path / "in.npy")],
            f"--input {tmp_path / 'in.npy'}: frame 1 holds", words)
