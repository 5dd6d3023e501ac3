"""The per-layer sensitivity table (deploy/checks/sensitivity.py) and the estimate it gives
(explorer/plan/sensitivity.py): the estimate of a whole plan at one precision, or mixed, is
compared with the SQNR measured on the network rounded as that plan's deployment rounds it
(the int8 reference of deploy/checks/quantized.py, the fp16 one of rounding.py); the table
is reused from its cache."""
from __future__ import annotations

import math

import numpy as np
import onnx
import pytest

from conftest import write_tiny_onnx
from csdf.onnx_import import load_onnx
from deploy.checks.quantized import held_weights, quantized_reference
from deploy.checks.rounding import rounded, with_held_weights
from deploy.checks import sensitivity as sens
from deploy.quant.calibration import activation_scales, stored
from explorer.app.layer_precision import LayerPrecisions, uniform
from explorer.plan.sensitivity import Sensitivity, estimate_db


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("sensitivity")
    path = write_tiny_onnx(root / "tiny.onnx")
    cnn = load_onnx(path, "c")
    rng = np.random.default_rng(3)
    frames = [rng.uniform(0, 1, (1, 3, 8, 8)).astype(np.float32) for _ in range(4)]
    cache = sens.SensitivityCache(root / "cache")
    return path, cnn, frames, cache, cache.table(path, cnn, frames)


def _measured(model, frames, want) -> float:
    """The SQNR as `explore run` reports it (deploy/run/vs_fp32.py)."""
    from deploy.run.vs_fp32 import Accumulator
    acc = Accumulator(["out"])
    for got, fp32 in zip(sens.outputs(model, frames, 1), want):
        acc.add(got, fp32)
    return acc.result()[0].sqnr_db


def test_rows_cover_every_stored_tensor_at_each_lower_precision(setup):
    path, cnn, frames, _, lookup = setup
    table = lookup.table
    layers = sorted(stored(cnn, onnx.load(str(path))).values())
    assert sorted({(l, p) for l, p, _ in table.rows}) == sorted((l, p) for l in layers for p in sens.LOWER)
    assert all(math.isfinite(s) and s > 0 for _, _, s in table.rows)
    assert table.frames == len(frames) and table.sqnr_db(layers[0], "fp32") == math.inf


def test_a_row_is_the_sqnr_of_that_layer_alone_rounded(setup):
    path, cnn, frames, _, lookup = setup
    model = onnx.load(str(path))
    want = sens.outputs(model, frames, 1)
    tensor = next(t for t, l in stored(cnn, model).items() if l == "conv2")
    scales = activation_scales(path, cnn, frames)
    int8 = sens._quantized(held_weights(model, cnn, only=["conv2"]), tensor,
                           scales.of("c", "conv2"), scales.dtype)
    assert lookup.table.sqnr_db("conv2", "int8") == pytest.approx(_measured(int8, frames, want), abs=1e-9)
    fp16 = rounded(with_held_weights(model, cnn, "float16", only=["conv2"])[0], [tensor])
    assert lookup.table.sqnr_db("conv2", "fp16") == pytest.approx(_measured(fp16, frames, want), abs=1e-9)


def test_additive_estimate_is_near_the_measured_sqnr_of_whole_plans(setup):
    """Noise powers add: the estimate of all-int8, all-fp16 and a mix lies within 3.5 dB of the
    SQNR the network rounded as each plan's deployment rounds it gives on the same frames.
    Noises that are not independent add more or less than their powers: here the mix's two
    noises (the input and conv1 at int8) add almost in amplitude, 3.1 dB below the estimate,
    and all-int8 lies within 1 dB of it."""
    path, cnn, frames, _, lookup = setup
    model = onnx.load(str(path))
    want = sens.outputs(model, frames, 1)
    scales = activation_scales(path, cnn, frames)
    tensors = stored(cnn, model)
    int8 = quantized_reference(path, cnn, scales)
    fp16 = rounded(with_held_weights(model, cnn, "float16")[0], list(tensors))
    cases = [(uniform({"c": cnn}, "int8"), int8), (uniform({"c": cnn}, "fp16"), fp16)]
    # a mix: conv1 at int8, every other layer fp32 (the input stored at its reader's int8)
    mix = LayerPrecisions.of({"c": {"conv1": "int8"}})
    int8_at = {t: l for t, l in tensors.items() if l in ("conv1", cnn.order()[0])}
    mixed = held_weights(model, cnn, only=["conv1"])
    for tensor, layer in int8_at.items():
        mixed = sens._quantized(mixed, tensor, scales.of("c", layer), scales.dtype)
    cases.append((mix, mixed))
    for layers, network in cases:
        measured = _measured(network, frames, want)
        assert abs(estimate_db(lookup.table, cnn, "c", layers) - measured) < 3.5, layers


def test_table_is_reused_from_its_cache(setup, monkeypatch):
    path, cnn, frames, cache, first = setup
    assert not first.cached and first.path.is_file()

    def measured_again(*args, **kwargs):
        raise AssertionError("measured again: the cache was not used")
    monkeypatch.setattr(sens, "measure", measured_again)
    again = sens.SensitivityCache(cache.directory).table(path, cnn, [f.copy() for f in frames])
    assert again.cached and again.table == first.table
    assert Sensitivity.from_dict(first.table.to_dict()) == first.table
    with pytest.raises(AssertionError, match="measured again"):    # other frames: another key
        cache.table(path, cnn, frames[:2])
    first.path.write_text("{not json")                               # damaged: measured again
    with pytest.raises(AssertionError, match="measured again"):
        cache.table(path, cnn, frames)
