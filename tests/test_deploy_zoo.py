"""MobileNetV2 (zoo, full size) deployed reuse-only and all by parts: outputs equal the
unmodified model's, arena bytes equal the plan's, one call per firing. A few frames only."""
from __future__ import annotations

import pytest

from csdf import zoo
from csdf.onnx_import import load_onnx
from csdf.parts import all_parts
from deploy.derive import derive
from deploy.measure import measure
from test_deploy_fixtures import make_plan


@pytest.fixture(scope="module")
def mobilenet():
    return load_onnx(zoo.model_path("mobilenet_v2"), "mobilenet_v2")


@pytest.mark.parametrize("mode", ["reuse_only", "all_parts"])
def test_mobilenet_v2(mobilenet, tmp_path, mode):
    cnn = mobilenet
    phases = all_parts(cnn) if mode == "all_parts" else {n: 1 for n in cnn.order()}
    plan = make_plan([cnn], {cnn.name: phases})
    derive(plan, {cnn.name: cnn}, tmp_path)
    result = measure(tmp_path, frames=1, warmup=1)
    # outputs of magnitude about 1 (the zoo keeps activations O(1))
    assert result["max_abs_diff"][cnn.name] < 1e-4
    assert result["arena_bytes"] == plan["buffer_bytes"]
    assert result["calls_per_frame"][cnn.name] == len(plan["firings"][f"{cnn.name}.all"])
    assert result["param_bytes"] == 4 * cnn.param_count
