"""`explore run` checks a deployment before its first frame (deploy/checks/manifest_check.py): a
hand-edited or damaged manifest.json or step model is refused with one line and exit 2,
before anything is allocated. Each case damages a deployment `explore deploy` wrote; before
the check they gave tracebacks, or ran with exit 0 on wrong outputs (negative offsets wrap in
numpy slicing, overlapping live regions overwrite each other). Also: frames are made as they
are used, so a long run does not hold every frame."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from csdf.parts import all_parts
from deploy.run import measure as measure_mod
from deploy.ort.backend import OrtBackend
from deploy.build.derive import derive
from deploy.runtime import manifest as mf
from explorer.cli.main import main
from sdf3.errors import InputError
from deploy_fixtures import make_plan, tiny_cnn
from refusals import redigest


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    root = tmp_path_factory.mktemp("deployed")
    cnn = tiny_cnn(root)
    derive(make_plan([cnn], {cnn.name: all_parts(cnn)}), {cnn.name: cnn}, root / "dep")
    return root / "dep"


def _damaged(deployed, tmp_path, change):
    out = tmp_path / "dep"
    shutil.copytree(deployed, out)
    manifest = json.loads((out / "manifest.json").read_text())
    change(manifest, out)
    (out / "manifest.json").write_text(json.dumps(manifest))
    redigest(out)     # the checks after the digests are tested here (tests/refusals.py)
    return out


def _refused(capsys, out, match):
    capsys.readouterr()
    assert main(["run", str(out), "--frames", "1", "--in-process", "--threads", "1", "--no-check"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("explore: error: ") and err.count("\n") == 1, err
    assert match in err, err


def test_an_undamaged_deployment_runs(deployed, capsys):
    assert main(["run", str(deployed), "--frames", "2", "--in-process", "--threads", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["max_abs_diff"]["tiny"] < 1e-4


def _step(manifest, layer):
    return next(s for p in manifest["partitions"] for s in p["steps"] if s["layer"] == layer)




def test_live_regions_overlap(deployed, tmp_path, capsys):
    """conv1 reads the frame's edge while it writes its own output: both are live together,
    so putting one in the other's region must be refused."""
    def change(m, _):
        a = "tiny.x->conv1"
        b = next(n for n in m["edges"] if n.startswith("tiny.conv1->"))
        ea, eb = m["edges"][a], m["edges"][b]
        small, big = (a, b) if ea["bytes"] <= eb["bytes"] else (b, a)
        target = m["edges"][big]["buffer"]
        m["edges"][small].update(buffer=target, offset=m["buffers"][target]["offset"])
    _refused(capsys, _damaged(deployed, tmp_path, change), "share arena bytes while both are live")


@pytest.mark.parametrize("case, change, match", [
    ("negative offset", lambda m, _: [m["buffers"][0].update(offset=-64)] + [
        e.update(offset=-64) for e in m["edges"].values() if e["buffer"] == 0], "negative offset"),
    ("slot beyond its ring", lambda m, _: [b.update(slot=m["edges"][b["edges"][0]]["slots"])
                                           for b in _step(m, "dw2")["bind"] if b["name"] == "out0"],
     "outside 0.."),
    ("arena smaller than its buffers", lambda m, _: m.update(arena_bytes=m["arena_bytes"] - 4),
     "past the arena's"),
    ("offset past the arena's end", lambda m, _: next(iter(m["edges"].values())).update(
        offset=m["arena_bytes"]), "lie outside its buffer"),
    ("no edges key", lambda m, _: m.pop("edges"), "missing key 'edges'"),
    ("slot indices beyond the ring", lambda m, _: [b.update(values=[99] * len(b["values"]))
                                                   for b in _step(m, "dw2")["bind"] if b["name"] == "in0_idx"],
     "outside the ring"),
    ("model named by an absolute path", lambda m, out: _step(m, "dw2").update(
        model=str((out / _step(m, "dw2")["model"]).resolve())), "is not a path relative"),
    ("model outside the directory", lambda m, out: _step(m, "dw2").update(model="../elsewhere.onnx"),
     "leads outside the deployment directory"),
    ("reference outside the directory", lambda m, out: m["cnns"]["tiny"].update(
        reference=str(out.parent / "tiny.onnx")), "is not a path relative"),
    ("arena larger than the machine", lambda m, _: m.update(arena_bytes=2 ** 52),
     "more than this machine's"),
])
def test_manifest_damage(deployed, tmp_path, capsys, case, change, match):
    _refused(capsys, _damaged(deployed, tmp_path, change), match)


def _model_of(m, layer):
    return _step(m, layer)["model"]


def test_step_model_missing(deployed, tmp_path, capsys):
    out = _damaged(deployed, tmp_path, lambda m, out: (out / _model_of(m, "pw3")).unlink())
    _refused(capsys, out, "is missing")


def test_step_model_truncated(deployed, tmp_path, capsys):
    def change(m, out):
        path = out / _model_of(m, "conv5")
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    _refused(capsys, _damaged(deployed, tmp_path, change), "not a readable ONNX model")


def test_step_model_swapped_for_another_shape(deployed, tmp_path, capsys):
    def change(m, out):
        shutil.copyfile(out / _model_of(m, "conv1"), out / _model_of(m, "conv5"))
    _refused(capsys, _damaged(deployed, tmp_path, change), "binds")


def test_the_backend_never_views_outside_the_arena():
    be = OrtBackend()
    arena = be.alloc(64)
    assert be.view(arena, 48, [4]).shape == (4,)
    for offset, shape in ((-16, [4]), (52, [4]), (0, [17])):
        with pytest.raises(InputError, match="outside the arena"):
            be.view(arena, offset, shape)


def test_frames_are_made_as_used(deployed, capsys):
    """100,000 frames hold a pool of POOL distinct arrays; the run keeps CHECKED outputs."""
    routed = measure_mod.frames_for(mf.load(deployed), 100_000, 0)
    stream = routed["tiny"]
    assert len(stream) == 100_000
    assert len({id(stream[f]) for f in range(0, 100_000, 7)}) <= measure_mod.POOL
    assert np.array_equal(stream[3], stream[3 + measure_mod.POOL])
    assert not np.array_equal(stream[0], stream[1])
    assert main(["run", str(deployed), "--frames", "40", "--in-process", "--threads", "1", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["frames"] == 40 and res["max_abs_diff"]["tiny"] < 1e-4
