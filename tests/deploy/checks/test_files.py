"""Whose fault a failing step is (deploy/checks/files.py): the digests `explore deploy`
records for every file it wrote decide between "a fault of memtrade" (every file as written)
and "damaged or edited" (a file differs or is gone)."""
from __future__ import annotations

import hashlib
import shutil

import onnx
import pytest

from deploy.checks import files
from deploy.runtime import manifest as mf
from deploy.runtime.executor import StepFailed
from deploy.run.measure import measure
from refusals import tiny_least_memory


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    return tiny_least_memory(tmp_path_factory.mktemp("files"))


def test_deploy_records_every_model_and_the_reference(deployed):
    manifest = mf.load(deployed)
    recorded = manifest.files
    assert set(recorded) == set(manifest.models) | {manifest.cnns["tiny"].reference}
    for rel, want in recorded.items():
        assert hashlib.sha256((deployed / rel).read_bytes()).hexdigest() == want
    assert files.changed(manifest, deployed) == []


def test_changed_files_are_named(deployed, tmp_path):
    dep = tmp_path / "dep"
    shutil.copytree(deployed, dep)
    manifest = mf.load(dep)
    rels = sorted(manifest.models)
    model = onnx.load(str(dep / rels[0]))
    model.producer_name = "an editor"
    onnx.save(model, str(dep / rels[0]))
    (dep / rels[1]).unlink()
    assert files.changed(manifest, dep) == sorted(rels[:2])
    assert files.blame(manifest, dep).startswith(f"{sorted(rels[:2])[0]} and 1 more differ")
    assert "damaged or was edited" in files.blame(manifest, dep)
    from dataclasses import replace
    assert files.changed(replace(manifest, files={}), dep) is None


def test_a_step_that_fails_on_unchanged_files_is_memtrades_fault(deployed, tmp_path, monkeypatch):
    """A run that fails while every file is as written blames memtrade; the same failure
    after a file was edited blames the edit."""
    from deploy.runtime import executor
    dep = tmp_path / "dep"
    shutil.copytree(deployed, dep)

    def broken(*args, **kwargs):
        raise StepFailed("CNN tiny, partition tiny.all: step 1 failed: ORT refuses it")
    monkeypatch.setattr(executor.Executor, "__init__", broken)
    with pytest.raises(StepFailed, match="this is a fault of memtrade, please report it"):
        measure(dep, frames=1)
    rel = sorted(mf.load(dep).models)[0]
    model = onnx.load(str(dep / rel))
    model.producer_name = "an editor"
    onnx.save(model, str(dep / rel))
    with pytest.raises(files.Damaged, match=f"{rel}: differs from what `explore deploy` wrote"):
        measure(dep, frames=1)           # refused at load, before any step is built
    # a file edited after the load verified it: the failing step blames the edit
    monkeypatch.setattr(files, "verify", lambda manifest, root: None)
    with pytest.raises(StepFailed, match=f"{rel} differ from what `explore deploy` wrote: the "
                                         f"deployment is damaged or was edited"):
        measure(dep, frames=1)


def _flip_one_byte(path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def test_one_byte_changed_in_any_file_is_refused_at_load(deployed, tmp_path, capsys):
    """Every model and the reference, one byte flipped in the middle (a weight, mostly: the
    file still parses): `explore run` and memtrade.Session refuse the deployment at load in
    one line naming the file, exit 2; the file put back, it runs."""
    import memtrade
    from refusals import refused
    dep = tmp_path / "dep"
    shutil.copytree(deployed, dep)
    rels = sorted(mf.load(dep).files)
    assert len(rels) >= 3
    for rel in rels:
        kept = (dep / rel).read_bytes()
        _flip_one_byte(dep / rel)
        refused(capsys, ["run", str(dep), "--frames", "1", "--in-process"], f"{dep / rel}: differs",
                "damaged or was edited")
        with pytest.raises(files.Damaged, match=f"{rel}: differs"):
            memtrade.Session(dep)
        (dep / rel).write_bytes(kept)
    files.verify(mf.load(dep), dep)        # all put back: nothing to refuse


def test_a_model_left_out_of_the_digests_is_refused(deployed, tmp_path):
    import json
    dep = tmp_path / "dep"
    shutil.copytree(deployed, dep)
    manifest = json.loads((dep / "manifest.json").read_text())
    rel = sorted(manifest["models"])[0]
    del manifest["files"][rel]
    (dep / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(files.Damaged, match=f"{rel}: not among the files"):
        files.verify(mf.load(dep), dep)
