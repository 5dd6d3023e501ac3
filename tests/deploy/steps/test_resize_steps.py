"""Resize as torch's TorchScript exporter writes it (HRNet's fuse layers, FPNs): `scales`
an initializer or a Constant node, the `roi` empty or a constant; mode nearest or linear.
ONNX Runtime's shape inference must read scales while loading, so the deployment keeps
such shape-carrying tensors in the model, not in a side file (deploy/ort/weights.py); each
case deploys (whole and by rows around the Resize) and runs in every layout with outputs
equal to ONNX Runtime's on the original file."""
from __future__ import annotations

import numpy as np
import pytest

from csdf.onnx_import import load_onnx
from csdf.parts import all_parts
from deploy.build.derive import derive
from deploy.ort.backend import LAYOUTS
from deploy.run.measure import measure
from onnx_cases import Net
from deploy_fixtures import make_plan


def resize_net(path, mode: str, scales_as: str, roi: bool = False):
    """conv -> Resize(x2) -> conv, scales stored as `scales_as` ("initializer"|"constant")."""
    n = Net(7)
    x = n.op("Relu", [n.conv("input", 3, 6)])
    values = np.array([1.0, 1.0, 2.0, 2.0], np.float32)
    scales = n.init("scales", values) if scales_as == "initializer" else n.const(values)
    roi_in = n.init("roi", np.zeros(8, np.float32) if roi else np.zeros(0, np.float32))
    attrs = dict(mode=mode, coordinate_transformation_mode="pytorch_half_pixel" if mode == "linear"
                 else "asymmetric", nearest_mode="floor")
    r = n.op("Resize", [x, roi_in, scales], **attrs)
    n.conv(r, 6, 4)
    n.nodes[-1].output[0] = "output"
    return n.save(path, [("input", [1, 3, 7, 6])], [("output", [1, 4, 14, 12])], opset=13)


CASES = [("nearest", "initializer", False), ("nearest", "constant", False),
         ("linear", "initializer", True), ("linear", "constant", False)]


@pytest.mark.parametrize("mode, scales_as, roi", CASES)
def test_resize_deploys_and_runs_in_every_layout(tmp_path, mode, scales_as, roi):
    cnn = load_onnx(resize_net(tmp_path / "r.onnx", mode, scales_as, roi), "r")
    resize = next(n for n in cnn.order() if "Resize" in n)
    parts = all_parts(cnn)       # the convs by rows around the (whole) Resize
    assert parts[resize] == 1 and all(parts[n] > 1 for n in cnn.order() if cnn.layer(n).op == "Conv")
    whole = {n: 1 for n in cnn.order()}
    for i, (phases, regions) in enumerate([(whole, False), (parts, False), (parts, True)]):
        plan = make_plan([cnn], {"r": phases})
        out = tmp_path / f"dep{i}"
        derive(plan, {"r": cnn}, out, regions=regions)
        for layout in LAYOUTS:
            result = measure(out, frames=2, layout=layout, threads=1)
            assert result["max_abs_output"]["r"] > 0.1
            assert result["max_abs_diff"]["r"] <= 1e-5 * result["max_abs_output"]["r"], (i, layout)


def test_the_deploy_check_loads_each_step_as_the_run_does(tmp_path, monkeypatch):
    """With the scales left in the side file (the fault this file guards against), `explore
    deploy`'s check refuses the Resize step in one line that names it and says whose fault
    it is; the check runs in this process here so that the patched rule applies."""
    from deploy.checks import step_models
    from deploy.ort import weights
    cnn = load_onnx(resize_net(tmp_path / "r.onnx", "nearest", "initializer"), "r")
    monkeypatch.setattr(weights, "SHAPE_INPUTS", {})
    monkeypatch.setattr(step_models, "first_refused", lambda paths: next(
        ((i, why) for i, p in enumerate(paths) if (why := step_models.check_entry(p))), None))
    plan = make_plan([cnn], {"r": {n: 1 for n in cnn.order()}})
    with pytest.raises(step_models.StepModelRefused) as err:
        derive(plan, {"r": cnn}, tmp_path / "dep")
    text = str(err.value)
    assert "\n" not in text
    for words in ("Resize", "Cannot parse data from external tensors", "as `explore run` loads it",
                  "this is a fault of memtrade, please report it"):
        assert words in text, text
