"""The deployment manifest as records (deploy/runtime/manifest_records.py, step_records.py):
manifest.json read into them and written back holds the same data, key for key; a
manifest of an older version, or with a key of the wrong type, is refused in one line."""
from __future__ import annotations

import dataclasses
import json
import shutil

import pytest

from csdf.parts import all_parts
from deploy.build.derive import derive
from deploy.runtime import manifest as mf
from deploy.runtime.manifest_records import Manifest, StoredEdge
from deploy.runtime.step_records import Step
from explorer.cli.main import main
from sdf3.errors import InputError
from deploy_fixtures import make_plan, tiny_cnn


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    """A pipelined deployment with region steps and profile models: every kind of step and
    binding but a tiled group's (test_a_tiled_groups_step_round_trips)."""
    root = tmp_path_factory.mktemp("records")
    cnn = tiny_cnn(root)
    plan = make_plan([cnn], {cnn.name: all_parts(cnn)}, split={cnn.name: 9}, pipelined=True)
    made = derive(plan, {cnn.name: cnn}, root / "dep", regions=True, with_profile=True)
    return root / "dep", made


def test_json_round_trip_is_equal(deployed):
    folder, made = deployed
    data = json.loads((folder / mf.FILE).read_text())
    assert data["format"] == mf.FORMAT and data["version"] == mf.VERSION == 2
    loaded = mf.load(folder)
    assert loaded == made                              # what derive returned is what was saved
    assert Manifest.from_dict(loaded.to_dict()) == loaded
    again = json.loads(json.dumps(loaded.to_dict()))
    assert again.keys() == data.keys()
    for key in data:                                   # key by key, for a readable failure
        assert again[key] == data[key], key
    kinds = {b.kind for _, _, s in loaded.steps() for b in s.bind}
    assert kinds == {"frame", "edge", "const", "output"}
    assert any(s.region for _, _, s in loaded.steps()) and loaded.profile


def test_records_are_typed_and_frozen(deployed):
    _, made = deployed
    edge = next(iter(made.edges.values()))
    assert isinstance(edge, StoredEdge) and edge.bytes == edge.slots * edge.row_bytes
    step = made.partitions[0].steps[0]
    assert isinstance(step, Step) and isinstance(step.bind, tuple)
    with pytest.raises(dataclasses.FrozenInstanceError):
        step.layer = "other"
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.arena_bytes = 0


def test_a_tiled_groups_step_round_trips():
    """A fused-tiled group's step (deploy/build/tile_step.group_step writes it) keeps its keys."""
    tile = {"tile": [0, 1], "model": "models/n/g.tile0.onnx", "starts": [0, 4], "ends": [6, 10],
            "mids": [{"edges": ["n.a->b", "n.a->b"], "shape": [1, 8, 4, 4]}],
            "region": [0, 4, 4, 8], "out_shape": [1, 8, 4, 4]}
    data = {"layer": "a", "group": ["a", "b"], "grid": [2, 2], "phase": 0, "model": None,
            "bind": [{"kind": "tile", "edges": ["n.x->a", "n.x->a"]}],
            "in": ["n.x->a", "n.x->a"], "outs": [["n.b->c", "n.b->c"]], "sink": None,
            "tiles": [tile]}
    step = Step.from_dict(data, "step")
    assert step.group.tiles[0].mids[0].shape == (1, 8, 4, 4) and step.group.sink is None
    assert step.to_dict() == data


def _rewritten(deployed, tmp_path, change):
    out = tmp_path / "dep"
    shutil.copytree(deployed[0], out)
    data = json.loads((out / mf.FILE).read_text())
    change(data)
    (out / mf.FILE).write_text(json.dumps(data))
    return out


def test_an_older_manifest_is_refused_in_one_line(deployed, tmp_path, capsys):
    out = _rewritten(deployed, tmp_path, lambda d: d.update(version=1))
    with pytest.raises(InputError, match="version 1.*explore deploy"):
        mf.load(out)
    capsys.readouterr()
    assert main(["run", str(out), "--frames", "1", "--in-process"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "run `explore deploy`" in err, err


@pytest.mark.parametrize("change, match", [
    (lambda d: next(iter(d["edges"].values())).update(slots="3"), r"edges\..*'slots' must be an integer"),
    (lambda d: d["partitions"][0]["steps"][1]["bind"][0].update(kind="view"), "unknown binding kind 'view'"),
    (lambda d: d["partitions"][0]["steps"][1]["bind"][0].update(edges=["only-one"]), "two edge copies"),
    (lambda d: d["cnns"]["tiny"]["outputs"][0].update(layout="nhwc"), "layout nchw or hncw"),
    (lambda d: d.pop("partitions"), "missing key 'partitions'"),
])
def test_a_wrong_type_is_one_line_naming_the_key(deployed, tmp_path, change, match):
    out = _rewritten(deployed, tmp_path, change)
    with pytest.raises(InputError, match=match) as err:
        mf.load(out)
    assert str(out / mf.FILE) in str(err.value) and "\n" not in str(err.value)
