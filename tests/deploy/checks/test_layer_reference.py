"""The reference of a plan with a precision per layer (deploy/checks/layer_reference.py): at
one precision everywhere it computes what that precision's reference computes, element by
element; a mix rounds each tensor at its own precision."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

from conftest import write_tiny_onnx
from csdf.onnx_import import load_onnx
from deploy.checks import sensitivity as sens
from deploy.checks.layer_reference import layer_reference
from deploy.checks.quantized import held_weights, quantized_reference
from deploy.checks.rounding import rounded, with_held_weights
from deploy.quant.calibration import activation_scales, stored
from explorer.app.layer_precision import LayerPrecisions, uniform


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = write_tiny_onnx(tmp_path_factory.mktemp("layer_reference") / "tiny.onnx")
    cnn = load_onnx(path, "c")
    rng = np.random.default_rng(5)
    frames = [rng.uniform(0, 1, (1, 3, 8, 8)).astype(np.float32) for _ in range(3)]
    return path, cnn, frames, activation_scales(path, cnn, frames, "c")


def _same(a, b, frames):
    for got, want in zip(sens.outputs(a, frames, 1), sens.outputs(b, frames, 1)):
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


def test_all_int8_is_the_int8_reference(tiny):
    path, cnn, frames, scales = tiny
    _same(layer_reference(path, cnn, "c", uniform({"c": cnn}, "int8"), scales),
          quantized_reference(path, cnn, scales), frames)


def test_all_fp16_is_the_fp16_reference(tiny):
    path, cnn, frames, _ = tiny
    model = onnx.load(str(path))
    fp16 = rounded(with_held_weights(model, cnn, "float16")[0], list(stored(cnn, model)))
    _same(layer_reference(path, cnn, "c", uniform({"c": cnn}, "fp16"), None), fp16, frames)


def test_a_mix_rounds_each_tensor_at_its_precision(tiny):
    """conv1 int8, conv2 fp16, the rest fp32: the input (read by conv1 alone) and conv1's
    output through QDQ, conv2's output through an fp16 Cast pair, their weights as held."""
    path, cnn, frames, scales = tiny
    model = onnx.load(str(path))
    tensors = {l: t for t, l in stored(cnn, model).items()}
    want = with_held_weights(held_weights(model, cnn, only=["conv1"]), cnn, "float16", only=["conv2"])[0]
    for layer in (cnn.order()[0], "conv1"):
        want = sens._quantized(want, tensors[layer], scales.of("c", layer), scales.dtype)
    want = rounded(want, [tensors["conv2"]])
    mix = LayerPrecisions.of({"c": {"conv1": "int8", "conv2": "fp16"}})
    got = layer_reference(path, cnn, "c", mix, scales)
    _same(got, want, frames)
    fp32 = sens.outputs(model, frames, 1)
    assert sens.sqnr_db(sens.outputs(got, frames, 1), fp32) < sens.sqnr_db(
        sens.outputs(layer_reference(path, cnn, "c", LayerPrecisions.of({"c": {"conv2": "fp16"}}), scales),
                  frames, 1), fp32)
