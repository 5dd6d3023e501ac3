"""More damaged deployments, run as a user runs them: `explore run` in its own
process, with ONNX Runtime optimising the step models in a child process (the default), in
the `blocked` and `nchw` layouts. Each ends in exactly one line on stderr naming the step
or file, exit 2, and no traceback: an op swapped for one of another output shape, a part
that computes more rows than the manifest declares, a truncated model, a damaged reference
model. Also `explore deploy` on a step model that passes onnx.checker but that ONNX Runtime
refuses (a batched MatMul of incompatible shapes, as Swin-T's was)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import deploy.build.layer_step as build
from deploy.runtime.child import child_env
from explorer.cli.main import main
from refusals import one_line, redigest, tiny_least_memory

PART = "models/tiny/conv1.part.onnx"


@pytest.fixture(scope="module")
def deployed(tmp_path_factory) -> Path:
    """The tiny CNN at its least memory (conv1 by parts), deployed (tests/refusals.py)."""
    dep = tiny_least_memory(tmp_path_factory.mktemp("damage_child"))
    assert json.loads((dep.parent / "run" / "plan.json").read_text())["phases"]["tiny"]["conv1"] > 1
    return dep


def _damaged(deployed: Path, tmp_path: Path, damage) -> Path:
    target = tmp_path / "dep"
    shutil.copytree(deployed, target)
    damage(target)
    redigest(target)    # what comes after the digests is tested here (tests/refusals.py)
    return target


def _edit(path: Path, change) -> None:
    model = onnx.load(str(path))
    change(model)
    del model.graph.value_info[:]
    onnx.save(model, str(path))


def relu_to_maxpool(dep: Path) -> None:
    """conv1's fused Relu replaced by a 2x2 MaxPool: its part writes [1, 4, 1, 4], not [1, 1, 4, 8]."""
    def swap(model):
        for i, node in enumerate(model.graph.node):
            if node.op_type == "Relu":
                model.graph.node.remove(node)
                model.graph.node.insert(i, helper.make_node(
                    "MaxPool", list(node.input), list(node.output), kernel_shape=[2, 2],
                    strides=[2, 2]))
                return
        raise AssertionError("no Relu in the part model")
    _edit(dep / PART, swap)


def taller_part(dep: Path) -> None:
    """conv1's part model pads one more row at the bottom: two rows where one is bound."""
    def taller(model):
        for node in model.graph.node:
            if node.op_type == "Conv":
                next(a for a in node.attribute if a.name == "pads").ints[2] += 1
    _edit(dep / PART, taller)


def truncated(dep: Path) -> None:
    (dep / PART).write_bytes((dep / PART).read_bytes()[:150])


def missing(dep: Path) -> None:
    (dep / PART).unlink()


def _explore(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "explorer.cli.main", *argv],
                          capture_output=True, text=True, env=child_env())


def _one_line(done: subprocess.CompletedProcess, *words: str) -> str:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    return one_line(done.stderr, done.stdout, words)


@pytest.mark.parametrize("layout", ["blocked", "nchw"])
@pytest.mark.parametrize("damage, words", [
    (relu_to_maxpool, ("CNN tiny", "layer conv1 phase", PART, "invalid dimensions for output")),
    (taller_part, ("CNN tiny", "layer conv1 phase", PART, "invalid dimensions for output")),
    (truncated, (PART, "not a readable ONNX model")),
    (missing, (PART, "is missing", "(conv1)")),
], ids=["swapped-op", "more-rows", "truncated", "missing"])
def test_damaged_steps_in_a_run_of_its_own(deployed, tmp_path, layout, damage, words):
    dep = _damaged(deployed, tmp_path, damage)
    _one_line(_explore("run", str(dep), "--frames", "2", "--layout", layout), *words)


def test_the_undamaged_copy_passes(deployed, tmp_path):
    dep = _damaged(deployed, tmp_path, lambda d: None)
    done = _explore("run", str(dep), "--frames", "2")
    assert done.returncode == 0 and "PASS" in done.stdout, done.stderr


def _other_network(dep: Path) -> None:
    """The reference replaced by a network of another input shape."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 5, 5])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 5, 5])
    model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "o", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(dep / "reference" / "tiny.onnx"))


@pytest.mark.parametrize("damage, words", [
    (lambda d: (d / "reference" / "tiny.onnx").write_bytes(b"\x08\x07\x12"),
     ("reference model", "reference/tiny.onnx", "cannot load it")),
    (_other_network, ("reference model", "cannot run it on a frame of shape [1, 3, 8, 8]")),
], ids=["truncated", "another-network"])
def test_a_damaged_reference_model(deployed, tmp_path, capsys, damage, words):
    dep = _damaged(deployed, tmp_path, damage)
    assert main(["run", str(dep), "--frames", "2", "--in-process"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.startswith("explore: error: ") and "\n" not in err, err
    assert "Traceback" not in captured.out + captured.err
    for w in words:
        assert w in err, (w, err)


@pytest.mark.parametrize("value, why", [
    ("-1", "expected 0 (one per core) or a thread count up to 1024, got -1"),
    ("two", "expected a whole number, got 'two'"),
    ("1.5", "expected a whole number, got '1.5'"),
])
def test_thread_counts_that_are_no_count(deployed, capsys, value, why):
    """Not argparse's two lines (usage and error), not ONNX Runtime's traceback: one line."""
    assert main(["run", str(deployed), "--threads", value]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"explore: error: --threads: {why}", err


def test_a_step_onnx_runtime_refuses_but_the_checker_passes(deployed, tmp_path, capsys,
                                                            monkeypatch):
    """The builder writes, for layer fc, a batched MatMul whose operands do not agree (the
    shape of Swin-T's `node_MatMul_63.whole.onnx` when a 0-d index became [1]): onnx.checker
    passes it, ONNX Runtime's load refuses it. `explore deploy` names the layer, its ONNX
    node, the model file and ORT's reason, exits 2 and leaves no directory."""
    made = build.step_model

    def broken(layer, *args, **kw):
        model = made(layer, *args, **kw)
        if layer.name == "fc":           # ... -> x -> Identity -> sink: x -> MatMul -> Identity
            g = model.graph
            last = next(n for n in g.node if n.output[0] == "sink")
            g.initializer.append(numpy_helper.from_array(np.ones((2, 3, 5), np.float32), "bad_w"))
            g.node.insert(len(g.node) - 1, helper.make_node("MatMul", [last.input[0], "bad_w"],
                                                            ["bad_y"], name="bad_matmul"))
            last.input[0] = "bad_y"
            onnx.checker.check_model(model)            # the structure is valid
        return model
    monkeypatch.setattr(build, "step_model", broken)
    plan = deployed.parent / "run" / "plan.json"
    assert main(["deploy", str(plan), "--out", str(tmp_path / "d")]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.startswith("explore: error: ") and "\n" not in err
    assert "Traceback" not in captured.out + captured.err
    for w in ("layer fc of CNN tiny", "ONNX nodes fc", "models/tiny/fc.whole.onnx",
              "refused by ONNX Runtime", "bad_matmul", "MatMul"):
        assert w in err, (w, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == []    # nothing left, no partial output
