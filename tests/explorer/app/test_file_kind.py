"""A file given to the wrong command is named for what it is, with the command that takes it
(explorer/app/file_kind.py), in one line and exit status 2."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import write_tiny_onnx
from explorer.app.file_kind import APP, MANIFEST, ONNX, PARETO, PLAN, PROFILE, kind_of, wrong_file
from explorer.cli.main import main

ROOT = Path(__file__).resolve().parents[3]
APP_FILE = ROOT / "apps" / "worked_example.yaml"


@pytest.fixture(scope="module")
def outputs(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("explored") / "out"
    assert main([str(APP_FILE), "--out", str(out), "--quiet"]) in (0, 3)
    return out


def test_kinds_by_content(outputs: Path, tmp_path: Path):
    onnx_file = write_tiny_onnx(tmp_path / "model.bin")          # the name says nothing
    (tmp_path / "manifest").mkdir()
    (tmp_path / "manifest" / "manifest.json").write_text(json.dumps({"format": "memtrade-deployment"}))
    profile = tmp_path / "p.yaml"
    profile.write_text("format: memtrade-profile\nversion: 1\nname: x\n")
    assert kind_of(APP_FILE) == APP
    assert kind_of(onnx_file) == ONNX
    assert kind_of(outputs / "plan.json") == PLAN
    assert kind_of(outputs / "pareto.json") == PARETO
    assert kind_of(tmp_path / "manifest") == MANIFEST
    assert kind_of(profile) == PROFILE
    (tmp_path / "junk").write_bytes(bytes(range(256)))
    assert kind_of(tmp_path / "junk") is None
    assert kind_of(tmp_path / "missing") is None
    assert wrong_file(outputs / "plan.json", PLAN) is None
    assert wrong_file(tmp_path / "junk", PLAN) is None           # the command's own checks speak


@pytest.mark.parametrize("argv, given, said", [
    (["{onnx}"], "{onnx}", "this is an ONNX model"),
    (["info", "{plan}"], "{plan}", "this is a plan (plan.json"),
    (["deploy", "{app}", "--out", "{tmp}/d"], "{app}", "this is an application file"),
    (["deploy", "{pareto}", "--out", "{tmp}/d"], "{pareto}", "this is a Pareto front"),
    (["run", "{plan}"], "{plan}", "give it to `explore deploy PLAN.json`"),
])
def test_wrong_command_one_line(outputs, tmp_path, capsys, argv, given, said):
    names = {"onnx": str(write_tiny_onnx(tmp_path / "tiny.onnx")), "plan": str(outputs / "plan.json"),
             "pareto": str(outputs / "pareto.json"), "app": str(APP_FILE), "tmp": str(tmp_path)}
    assert main([a.format(**names) for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith(f"explore: error: {given.format(**names)}: expected ")
    assert said in err
    assert not (tmp_path / "d").exists()
