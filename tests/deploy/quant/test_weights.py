"""Per-channel int8 weights against the scheme computed here by hand: scale max|w|/127 per
output channel, values round(w / scale) within [-127, 127]."""
import numpy as np

from deploy.quant.weights import dequantized, per_channel


def test_per_channel_matches_symmetric_scheme():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((6, 3, 3, 3)).astype(np.float32) * np.arange(1, 7, dtype=np.float32)[:, None, None, None]
    q, scale = per_channel(w)
    expect = np.abs(w).reshape(6, -1).max(axis=1) / 127
    np.testing.assert_allclose(scale, expect, rtol=1e-6)
    np.testing.assert_array_equal(q, np.clip(np.rint(w / expect[:, None, None, None]), -127, 127).astype(np.int8))
    assert np.abs(dequantized(q, scale) - w).max() <= expect.max() / 2 + 1e-6


def test_zero_channel_has_unit_scale():
    q, scale = per_channel(np.zeros((2, 4), np.float32))
    assert scale.tolist() == [1.0, 1.0] and not q.any()
