"""Shared fixtures: a tiny ONNX CNN written with onnx.helper, for tests that need a model file,
and the paper's figures and SDF3's answers, copied into tests/data (tests/data/README.md names
each file's source in ../shared; test_data_sources.py keeps the copies true)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper


DATA = Path(__file__).resolve().parent / "data"

# tests mirror the packages (tests/deploy/ort/ holds deploy/ort/'s tests); a test module may
# use another's helpers by name (`from test_deploy_ort import check_equal`), so every folder
# of the tree is importable, whichever pytest collects first (test file names are unique)
for _folder in sorted({p.parent for p in Path(__file__).resolve().parent.rglob("test_*.py")}):
    if str(_folder) not in sys.path:
        sys.path.append(str(_folder))
SHARED = Path(os.environ.get("MEMTRADE_SHARED", Path(__file__).resolve().parents[2] / "shared"))


def data_path(*parts: str) -> Path:
    """A file of tests/data (part of the clone, so never a skip)."""
    path = DATA.joinpath(*parts)
    assert path.is_file(), f"{path}: test data missing from the clone"
    return path


def write_tiny_onnx(path: Path, seed: int = 0, size: int = 8) -> Path:
    """input [1,3,size,size] (8 x 8 unless asked) -> conv 3x3 (4) + BN + Relu -> conv 3x3
    stride 2 (8) + Relu -> GlobalAveragePool -> Flatten -> Gemm (10). Node names: conv1 bn1
    relu1 conv2 relu2 gap flat fc."""
    rng = np.random.default_rng(seed)

    def init(name, shape):
        return numpy_helper.from_array(rng.uniform(0.5, 1.5, shape).astype(np.float32), name)

    inits = [init("w1", (4, 3, 3, 3)), init("g", (4,)), init("b", (4,)), init("m", (4,)),
             init("v", (4,)), init("w2", (8, 4, 3, 3)), init("b2", (8,)), init("wf", (10, 8)),
             init("bf", (10,))]
    nodes = [
        helper.make_node("Conv", ["input", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "g", "b", "m", "v"], ["n1"], name="bn1"),
        helper.make_node("Relu", ["n1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="conv2", pads=[1, 1, 1, 1],
                         strides=[2, 2]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("GlobalAveragePool", ["r2"], ["p"], name="gap"),
        helper.make_node("Flatten", ["p"], ["f"], name="flat"),
        helper.make_node("Gemm", ["f", "wf", "bf"], ["out"], name="fc", transB=1),
    ]
    graph = helper.make_graph(
        nodes, "tiny", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


@pytest.fixture
def tiny_onnx(tmp_path: Path) -> Path:
    """Path of a tiny ONNX CNN (see write_tiny_onnx): 8 fused layers incl. the input."""
    return write_tiny_onnx(tmp_path / "tiny.onnx")


# ---- the step-model check of `explore deploy`, one child for the session ---------------------
class _StepCheckChild:
    """One long-lived `tests/step_check_child.py` process that makes the step-model check's
    `check_model` calls (deploy/checks/step_models.py) for every deployment a test makes in
    this process, in place of a fresh `python -m deploy.checks.step_models` per deployment:
    the same checks, in a process of its own (so this process's ONNX Runtime stays untouched,
    the reason the check runs in a child), without the interpreter and import start-up each
    time. Any failure of the child falls back to the real `first_refused` for that call."""

    def __init__(self):
        self.proc = None
        self.env = None
        self.broken = False

    def _start(self, env):
        import subprocess
        import tempfile
        self.err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve().parent / "step_check_child.py")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err, text=True, env=env)
        self.env = env

    def first_refused(self, paths, real):
        import json
        from deploy.runtime.child import child_env
        from step_check_child import TAG
        if not paths or self.broken:
            return real(paths)
        try:
            cwd = os.getcwd()
        except OSError:               # a folder since removed: the real child, as always
            return real(paths)
        try:
            # the real child's environment: a test that changed it gets a new child (pytest's
            # own PYTEST_CURRENT_TEST, which names each test, aside)
            env = {k: v for k, v in child_env().items() if k != "PYTEST_CURRENT_TEST"}
            if self.proc is not None and (self.proc.poll() is not None or env != self.env):
                self.close()
            if self.proc is None:
                self._start(env)
            request = {"cwd": cwd, "paths": list(paths)}   # read from where the real child would
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            while True:
                line = self.proc.stdout.readline()
                if not line:
                    raise EOFError("the step-check child ended")
                if line.startswith(TAG):
                    report = json.loads(line[len(TAG):])
                    if isinstance(report, dict):       # it could not answer this one
                        return real(paths)
                    return None if report is None else (int(report[0]), str(report[1]))
        except (OSError, EOFError, ValueError):
            self.close()
            self.broken = True           # the real child from now on, as `explore deploy`
            return real(paths)
        except BaseException:            # interrupted mid-request: no answer left unread
            self.close(kill=True)
            raise

    def close(self, kill: bool = False):
        if self.proc is not None:
            try:
                if kill:
                    self.proc.kill()
                else:
                    self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except Exception:
                self.proc.kill()
                self.proc.wait()
            self.proc = None


_STEP_CHECK = _StepCheckChild()


@pytest.fixture(scope="session", autouse=True)
def _step_check_child_session():
    yield
    _STEP_CHECK.close()


@pytest.fixture(autouse=True)
def _step_check_child(request, monkeypatch):
    """`explore deploy`'s step-model check through the session's one child (_StepCheckChild),
    except in tests/deploy/checks/, the check's own tests, which keep the per-deployment child
    process `explore deploy` starts."""
    if DATA.parent / "deploy" / "checks" in Path(str(request.node.path)).parents:
        yield
        return
    try:
        from deploy.checks import step_models
        real = step_models.first_refused
    except (ImportError, AttributeError):
        yield
        return
    monkeypatch.setattr(step_models, "first_refused",
                        lambda paths: _STEP_CHECK.first_refused(paths, real))
    yield
