"""An int8 deployment's quantization entries and declared precision edited in manifest.json
(deploy/checks/quant_entries.py): each edit is refused when the deployment is loaded, in
one line naming the key, exit 2; the unedited deployment passes the same checks."""
from __future__ import annotations

import json
import shutil

import pytest

from csdf.onnx_import import load_onnx
from deploy.build.derive import derive
from deploy.build.quantization import deployment_scales
from deploy_fixtures import make_plan
from deploy.checks import manifest_check
from deploy.runtime import manifest as mf
from onnx_cases import joins_block
from refusals import refused

H = 7


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    folder = tmp_path_factory.mktemp("int8_entries")
    cnn = load_onnx(joins_block(folder / "joins.onnx", H), "net")
    scales = deployment_scales({"net": cnn}, None)
    phases = {k: 1 for k in cnn.order()}
    derive(make_plan([cnn], {"net": phases}, data_bytes=1), {"net": cnn}, folder / "dep",
           scales=scales, regions=False)
    return folder / "dep", cnn.order()


def _tensors(m):
    return m["quantization"]["tensors"]


def _scaled(which: int, factor: float):
    def edit(m, order):
        _tensors(m)[f"net/{order[which]}"][0] *= factor
    return edit


def _zero(which: int, value):
    def edit(m, order):
        entry = _tensors(m)[f"net/{order[which]}"]
        entry[1] = value(entry[1])
    return edit


def _removed(m, order):
    del _tensors(m)[f"net/{order[2]}"]


def _int8_entries(m, order):
    m["quantization"]["dtype"] = "int8"


def _int8_arena(m, order):
    m["quantization"]["dtype"] = m["dtype"] = "int8"


def _set(key, value):
    def edit(m, order):
        m[key] = value
    return edit


# (edit, words of the refusal); index 0 is the input, -1 the output layer
CASES = {
    "input scale x2": (_scaled(0, 2.0), "quantization.tensors.net/input"),
    "middle scale x2": (_scaled(2, 2.0), "scale"),
    "output scale x2": (_scaled(-1, 2.0), "scale"),
    "scale 1e300": (_scaled(3, 1e300 / 0.05), "scale"),
    "scale a hair off": (_scaled(3, 1 + 1e-6), "scale"),
    "zero point 300": (_zero(1, lambda z: 300), "zero point 300"),
    "zero point shifted": (_zero(-1, lambda z: z + 1), "zero point"),
    "entry removed": (_removed, "is missing"),
    "uint8 -> int8 entries": (_int8_entries, "quantization.dtype"),
    "uint8 -> int8 arena": (_int8_arena, "uint8"),
    "precision mixed": (_set("precision", "mixed"), "key 'precision'"),
    "precision fp32": (_set("precision", "fp32"), "key 'precision'"),
    "data_bytes 2": (_set("data_bytes", 2), "key 'data_bytes'"),
}


def test_the_unedited_deployment_passes_the_load_checks(deployed):
    """(it runs to PASS: tests/deploy/run/test_int8_deploy.py)"""
    manifest_check.check(mf.load(deployed[0]), deployed[0])


@pytest.mark.parametrize("case", list(CASES))
def test_an_edited_entry_is_refused_at_load(deployed, tmp_path, capsys, case):
    edit, words = CASES[case]
    dep = tmp_path / "dep"
    shutil.copytree(deployed[0], dep)
    path = dep / "manifest.json"
    manifest = json.loads(path.read_text())
    edit(manifest, deployed[1])
    path.write_text(json.dumps(manifest))
    refused(capsys, ["run", str(dep), "--frames", "1", "--in-process"], str(path), words)
