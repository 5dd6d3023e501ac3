"""Damaged deployments and refused step models get one line and exit 2, never a traceback:
step models damaged on disk after `explore deploy`, their digests re-recorded (a truncated file, an op
swapped for one with another output shape, a part that computes more rows than the manifest
declares, weights of the wrong shape), and a step model ONNX Runtime refuses when `explore
deploy` writes it."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import deploy.build.layer_step as build
from deploy.runtime.child import child_env
from explorer.cli.main import main
from refusals import one_line, redigest, refused, tiny_least_memory


@pytest.fixture(scope="module")
def deployed(tmp_path_factory, request) -> Path:
    """The tiny CNN at its least memory, deployed (tests/refusals.py)."""
    return tiny_least_memory(tmp_path_factory.mktemp("damage"))


def _copy(deployed: Path, tmp_path: Path) -> Path:
    target = tmp_path / "dep"
    shutil.copytree(deployed, target)
    return target


def _edit(path: Path, change) -> None:
    """`change` a step model of a deployment and re-record its digest (tests/refusals.py
    `redigest`): what ONNX Runtime and the executor make of the edit is tested here; the
    load refuses an edit it was not told of first (tests/deploy/checks/test_files.py)."""
    model = onnx.load(str(path))
    change(model)
    onnx.save(model, str(path))
    redigest(path.parents[2])


def _one_line(capsys, argv: list[str], *words: str) -> str:
    """`explore argv` in this process (`run` with --in-process: the test process keeps
    ONNX Runtime's per-session threading) exits 2 with one line holding `words`."""
    if argv[0] == "run":
        argv = [*argv, "--in-process"]
    return refused(capsys, argv, *words)


def test_the_undamaged_deployment_passes(deployed, capsys):
    assert main(["run", str(deployed), "--frames", "2", "--in-process"]) == 0
    assert "PASS" in capsys.readouterr().out


def test_a_truncated_model_file(deployed, tmp_path, capsys):
    dep = _copy(deployed, tmp_path)
    model = dep / "models" / "tiny" / "conv2.part.onnx"
    model.write_bytes(model.read_bytes()[:100])
    redigest(dep)
    _one_line(capsys, ["run", str(dep), "--frames", "2"], "models/tiny/conv2.part.onnx")


def test_an_op_swapped_for_one_of_another_output_shape(deployed, tmp_path, capsys):
    """GlobalAveragePool -> Identity: the step writes [1,8,4,4] where [1,8,1,1] is bound."""
    dep = _copy(deployed, tmp_path)

    def swap(model):
        for node in model.graph.node:
            if node.op_type == "GlobalAveragePool":
                node.op_type = "Identity"
    _edit(dep / "models" / "tiny" / "gap.whole.onnx", swap)
    _one_line(capsys, ["run", str(dep), "--frames", "2"], str(dep), "CNN tiny",
              "layer gap", "models/tiny/gap.whole.onnx", "invalid dimensions")


def test_a_part_that_computes_more_rows_than_declared(deployed, tmp_path, capsys):
    """conv1's part model padded one more row at the bottom: each part writes two rows where
    the manifest binds one (ONNX Runtime's "Got invalid dimensions for output", the path
    ShuffleNetV2's run took)."""
    dep = _copy(deployed, tmp_path)

    def taller(model):
        for node in model.graph.node:
            if node.op_type == "Conv":
                pads = next(a for a in node.attribute if a.name == "pads")
                pads.ints[2] += 1
        del model.graph.value_info[:]
    _edit(dep / "models" / "tiny" / "conv1.part.onnx", taller)
    _one_line(capsys, ["run", str(dep), "--frames", "2"], "layer conv1 phase",
              "models/tiny/conv1.part.onnx", "invalid dimensions")


@pytest.mark.parametrize("where", ["in-process", "child"])
def test_weights_of_the_wrong_shape_are_refused_by_name(deployed, tmp_path, capsys, where):
    """Gemm weights [10, 5] against 8 inputs: ONNX Runtime refuses the model where it is
    optimised (in the run's own process, or, as `explore run` does by default, in one
    child process); the one line names it and ORT's reason."""
    dep = _copy(deployed, tmp_path)

    def narrow(model):
        for i, t in enumerate(model.graph.initializer):
            if len(t.dims) == 2:
                model.graph.initializer[i].CopyFrom(
                    numpy_helper.from_array(np.ones((10, 5), np.float32), t.name))
    _edit(dep / "models" / "tiny" / "fc.whole.onnx", narrow)
    words = ("models/tiny/fc.whole.onnx", "ONNX Runtime refuses it", "Gemm")
    if where == "in-process":
        _one_line(capsys, ["run", str(dep), "--frames", "2"], *words)
        return
    done = subprocess.run([sys.executable, "-m", "explorer.cli.main", "run", str(dep),
                           "--frames", "2"], capture_output=True, text=True, env=child_env())
    assert done.returncode == 2
    one_line(done.stderr, done.stdout, words)


def test_a_step_model_onnx_runtime_refuses_is_found_at_deploy(deployed, tmp_path, capsys,
                                                              monkeypatch):
    """A builder that writes an op ONNX does not know for layer gap: `explore deploy` names
    the layer, its ONNX node and the checker's reason, exits 2, and leaves no directory."""
    made = build.step_model

    def broken(layer, *args, **kw):
        model = made(layer, *args, **kw)
        if layer.name == "gap":
            model.graph.node.append(helper.make_node("NoSuchOp", ["out0"], ["junk"]))
        return model
    monkeypatch.setattr(build, "step_model", broken)
    plan = deployed.parent / "run" / "plan.json"
    _one_line(capsys, ["deploy", str(plan), "--out", str(tmp_path / "d")], "layer gap",
              "ONNX nodes gap", "models/tiny/gap.whole.onnx", "NoSuchOp")
    assert not (tmp_path / "d").exists()
