"""deploy.run.measure: the footprint is the deployment's, read before the measurement's own
statistics (numpy's median and what it loads) take memory of their own."""
from __future__ import annotations

import numpy as np
import pytest

from deploy.build.derive import derive
from deploy.checks import reference
from deploy.run import measure as run_measure
from deploy_fixtures import make_plan, tiny_cnn, tiny_onnx

HELD = 64 << 20      # what the patched median holds: far above a tiny CNN's footprint


@pytest.fixture
def hungry_median(monkeypatch):
    """np.median that first writes HELD bytes and keeps them, as a statistic loading code
    and heap would; returns the list that keeps them."""
    kept, real = [], np.median

    def median(values, *args, **kwargs):
        if not kept:
            kept.append(np.ones(HELD, np.uint8))
        return real(values, *args, **kwargs)
    monkeypatch.setattr(np, "median", median)
    return kept


def test_footprint_excludes_the_medians(tmp_path, hungry_median):
    (tmp_path / "tiny").mkdir()
    cnn = tiny_cnn(tmp_path / "tiny")
    plan = make_plan([cnn], {cnn.name: {name: 1 for name in cnn.order()}})
    derive(plan, {cnn.name: cnn}, tmp_path / "dep")
    result = run_measure.measure(tmp_path / "dep", frames=3, check=False, threads=1)
    assert hungry_median, "the medians were computed"
    assert result["frame_ms_median"][cnn.name] > 0
    assert result["footprint_bytes"] < HELD // 2


def test_plain_timings_calls_after_run_before_the_medians(tmp_path, hungry_median):
    sess = reference.session(tiny_onnx(tmp_path / "tiny.onnx", 0), 1)
    seen = []
    out = reference.plain_timings(sess, 3, after_run=lambda: seen.append(len(hungry_median)))
    assert seen == [0] and len(hungry_median) == 1
    assert out["fps"] > 0 and out["frame_ms_median"] > 0
