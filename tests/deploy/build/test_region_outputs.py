"""A band whose rows no later step reads (a 1x1 stride-2 conv skips every odd row of the
layer before it) still writes its ring slots, so its model has an output and runs
(deploy/build/regions.py `_with_output`); a band model without an output is refused at
deploy, naming the step (deploy/checks/step_models.py)."""
from __future__ import annotations

import pytest

from csdf.onnx_import import load_onnx
from csdf.parts import all_parts
from deploy.build import regions
from deploy.build.derive import derive as deploy
from deploy.checks.step_models import StepModelRefused
from deploy.run.measure import measure
from deploy.run.verdict import RTOL
from deploy_fixtures import fired, make_plan, planned
from onnx_cases import Net

NAME = "sk"


def skip_block(path, h: int = 8):
    """conv 3x3 + Relu (a), a 1x1 conv (b), their Add (r), a 1x1 stride-2 conv (s): the
    odd rows of r are read by no layer."""
    n = Net(5)
    a = n.op("Relu", [n.conv("input", 3, 8, name="a")])
    r = n.op("Add", [a, n.conv(a, 8, 8, k=1, name="b")], name="r")
    n.conv(r, 8, 8, k=1, name="s", strides=[2, 2])
    n.nodes[-1].output[0] = "output"
    return n.save(path, [("input", [1, 3, h, 6])], [("output", [1, 8, h // 2, 3])])


@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    return load_onnx(str(skip_block(tmp_path_factory.mktemp("sk") / "sk.onnx")), name=NAME)


def test_bands_of_unread_rows_have_outputs_and_pass(cnn, tmp_path):
    plan = make_plan([cnn], {NAME: all_parts(cnn)})
    manifest = deploy(plan, {NAME: cnn}, tmp_path / "dep", regions=True, every_band=True)
    steps = [s for p in manifest.partitions for s in p.steps if s.region]
    # the bands of odd rows end before s fires: no step reads what they make
    unread = [s for s in steps if "s" not in {layer for layer, _ in s.region}]
    assert unread and all(manifest.models[s.model].outputs for s in steps)
    assert fired(manifest) == planned(plan)
    result = measure(tmp_path / "dep", frames=1, threads=1, warmup=0)
    assert result["max_abs_output"][NAME] > 0.1
    assert result["max_abs_diff"][NAME] <= RTOL["float32"] * result["max_abs_output"][NAME]


def test_a_band_model_without_output_is_refused_at_deploy(cnn, tmp_path, monkeypatch):
    monkeypatch.setattr(regions, "_with_output", lambda full, band: band)
    plan = make_plan([cnn], {NAME: all_parts(cnn)})
    with pytest.raises(StepModelRefused) as err:
        deploy(plan, {NAME: cnn}, tmp_path / "dep", regions=True, every_band=True)
    line = str(err.value)
    assert "\n" not in line
    assert f"step 2 of partition {NAME}.all (layer a phase 1)" in line
    assert "it has no output" in line and "band of layers from a" in line


def test_a_deployment_with_such_a_model_is_refused_at_load(cnn, tmp_path, monkeypatch, capsys):
    """Past the deploy check (turned off here), `explore run` refuses the model at load
    (deploy/checks/manifest_check.py), before any session is made."""
    from deploy.checks import step_models
    from refusals import refused
    monkeypatch.setattr(regions, "_with_output", lambda full, band: band)
    monkeypatch.setattr(step_models, "check_models", lambda out, manifest, cnns: None)
    plan = make_plan([cnn], {NAME: all_parts(cnn)})
    deploy(plan, {NAME: cnn}, tmp_path / "dep", regions=True, every_band=True)
    refused(capsys, ["run", str(tmp_path / "dep"), "--frames", "1", "--in-process"],
            "models/sk/a.region1.onnx: it has no output")
