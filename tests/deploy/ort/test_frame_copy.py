"""The int8 Input step in ONNX Runtime (deploy/ort/frame_copy.py) writes exactly what
quantizing the frame in numpy and laying it out as each edge stores it writes."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from deploy.ort.channels_last import PERM
from deploy.ort.frame_copy import frame_copy
from deploy.quant.scales import ActivationScales, TensorScale


@pytest.mark.parametrize("batch", [1, 2])
def test_frame_copy_equals_numpy(batch):
    shape = [batch, 3, 5, 7]
    scales = ActivationScales("uint8", {"net/input": TensorScale(0.021, 117)})
    frame = (np.random.default_rng(batch).standard_normal(shape) * 2).astype(np.float32)
    frame.flat[:3] = [0.021 * 0.5, 0.021 * 2.5, 1e6]      # ties to even, saturation
    q = scales.quantize("net", "input", frame)
    kinds = [("nchw", None), ("hncw", None)]
    if batch == 1:                                          # channels-last needs a batch of 1
        kinds += [("nchw", PERM["nchw"]), ("hncw", PERM["hncw"])]
    wants, views = [], []
    for layout, order in kinds:
        logical = q.transpose(2, 0, 1, 3) if layout == "hncw" else q
        want = logical if order is None else logical.transpose(order)
        wants.append(np.ascontiguousarray(want))
        views.append((np.zeros(logical.shape, np.uint8), layout, order))   # as the arena view
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    write = frame_copy(views, shape, 0.021, 117, np.dtype(np.uint8), opts)
    write(frame)
    for (view, _, _), want in zip(views, wants):
        np.testing.assert_array_equal(view.reshape(want.shape), want)
    for (view, layout, order), want in zip(views, wants):     # each edge alone, too
        alone = np.zeros_like(view)
        frame_copy([(alone, layout, order)], shape, 0.021, 117, np.dtype(np.uint8), opts)(frame)
        np.testing.assert_array_equal(alone.reshape(want.shape), want)
