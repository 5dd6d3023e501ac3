"""The TensorRT path: what can be checked without a GPU (the standalone runner stays
Python 3.6 / TensorRT 8.2 compatible; the step models are what TensorRT 8.2 parses; device
offsets are aligned), and a full run on a GPU when tensorrt and CUDA are present."""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from csdf.parts import all_parts
from deploy.tensorrt import backend as backend_trt, board_runner
from deploy.build.derive import derive
from deploy_fixtures import make_plan, tiny_cnn

HERE = Path(board_runner.__file__).parent
SIBLINGS = {Path(f).stem for f in backend_trt.RUNNER_FILES}
ALLOWED = {"argparse", "ctypes", "ctypes.util", "json", "os", "resource", "sys", "threading",
           "time", "numpy", "tensorrt"}


def test_runner_files_are_the_whole_runner():
    """RUNNER_FILES names board_runner.py and every trt_*.py beside it, nothing else."""
    assert len(set(backend_trt.RUNNER_FILES)) == len(backend_trt.RUNNER_FILES)
    found = {"board_runner.py"} | {f.name for f in HERE.glob("trt_*.py")}
    assert set(backend_trt.RUNNER_FILES) == found
    assert all((HERE / f).is_file() for f in backend_trt.RUNNER_FILES)


@pytest.mark.parametrize("name", backend_trt.RUNNER_FILES)
def test_runner_is_python36_and_standalone(name):
    text = (HERE / name).read_text()
    tree = ast.parse(text, feature_version=(3, 6))   # no walrus, no 3.8+ syntax
    imported, siblings = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.module != "__future__", "no __future__ imports (annotations) under 3.6"
            if node.level:    # relative: a sibling inside the package deploy.tensorrt
                assert node.level == 1 and node.module in SIBLINGS, ast.dump(node)
                siblings.add(node.module)
            elif node.module in SIBLINGS:   # flat: the sibling in DIR, run as a script
                siblings.add(node.module)
            else:
                imported.add(node.module)
        # 3.6 evaluates annotations: `X | Y`, `list[int]` would fail there
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            assert node.returns is None and all(
                a.annotation is None for a in args.args + args.kwonlyargs), node.name
        assert not isinstance(node, ast.AnnAssign), "no variable annotations"
    assert not {m.split(".")[0] for m in imported} & {"deploy", "explorer", "sdf3", "csdf"}
    assert imported <= ALLOWED, imported - ALLOWED
    assert "dataclass" not in text
    # APIs newer than 3.6 that ast cannot catch
    for api in ("capture_output", "asyncio.run", "math.prod", "removeprefix", "text=True"):
        assert api not in text
    # every sibling import has its two forms, relative (package) and flat (script in DIR)
    for mod in siblings:
        assert "from .%s import" % mod in text and "from %s import" % mod in text, mod


def test_copied_runner_imports_standalone(tmp_path):
    """The runner copied into DIR imports on its own, from DIR only, as on the board (DIR is
    sys.path[0]; the memtrade packages may be importable here, via an editable install, so
    the child checks that none of them was loaded), and deals the same frames as in-package."""
    folder = tmp_path / "dir"
    folder.mkdir()
    assert backend_trt.copy_runner(folder) == folder / "board_runner.py"
    m = {"cnns": {"a": {"inputs": [{"shape": [1, 3, 4, 4]}]},
                  "b": {"inputs": [{"shape": [1, 2, 2, 3]}]}}}
    child = """if True:
        import json, sys
        sys.path.insert(0, sys.argv[1])
        import board_runner
        names = [n[:-3] for n in json.loads(sys.argv[2])]
        frames = board_runner.input_frames(json.loads(sys.argv[3]), 9, seed=3)
        print(json.dumps({
            "files": {n: sys.modules[n].__file__ for n in names},
            "memtrade": sorted(m for m in sys.modules
                               if m.split(".")[0] in ("deploy", "explorer", "sdf3", "csdf")),
            "trt_none": board_runner.trt is None,
            "frames": {n: [len(c), [f.tolist() for f in c.pool]] for n, c in frames.items()}}))
    """
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    res = subprocess.run([sys.executable, "-c", child, str(folder),
                          json.dumps(backend_trt.RUNNER_FILES), json.dumps(m)],
                         cwd=str(tmp_path), env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    assert got["memtrade"] == []
    assert {n: Path(f).parent for n, f in got["files"].items()} == {
        Path(f).stem: folder for f in backend_trt.RUNNER_FILES}
    assert got["trt_none"] == (board_runner.trt is None)
    want = board_runner.input_frames(m, 9, seed=3)
    assert list(got["frames"]) == list(want) == ["a", "b"]
    for n, (count, pool) in got["frames"].items():
        assert count == len(want[n]) == {"a": 5, "b": 4}[n]
        assert len(pool) == len(want[n].pool) == 4
        for mine, theirs in zip(want[n].pool, pool):
            assert np.array_equal(mine, np.asarray(theirs, np.float32))


def test_copied_runner_runs_as_a_script(tmp_path):
    """`python3 DIR/board_runner.py ...` from elsewhere: the flat imports resolve in DIR."""
    backend_trt.copy_runner(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    res = subprocess.run([sys.executable, str(tmp_path / "board_runner.py"), "--help"],
                         cwd="/", env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         universal_newlines=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "{build,run,profile}" in res.stdout


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("trt")
    cnn = tiny_cnn(tmp)
    plan = make_plan([cnn], {cnn.name: all_parts(cnn)}, data_bytes=2)
    derive(plan, {cnn.name: cnn}, tmp / "dep", backend="tensorrt", with_profile=True)
    # the manifest as the board runner reads it: the JSON's dicts (Python 3.6, no records)
    return tmp / "dep", json.loads((tmp / "dep" / "manifest.json").read_text())


def test_deployment_holds_the_whole_runner(deployed):
    folder, _ = deployed
    for name in backend_trt.RUNNER_FILES:
        assert (folder / name).read_bytes() == (HERE / name).read_bytes(), name


def test_models_fit_tensorrt_82(deployed):
    folder, manifest = deployed
    rels = list(manifest["models"]) + [p["model"] for p in manifest["profile"]]
    for rel in rels:
        model = onnx.load(str(folder / rel))
        onnx.checker.check_model(model)
        assert all(o.version <= 13 for o in model.opset_import if o.domain in ("", "ai.onnx"))
        ops = {n.op_type for n in model.graph.node}
        assert "HardSwish" not in ops    # opset 14; decomposed for TensorRT 8.2
        for inp in model.graph.input:    # TensorRT 8.2 has no int64 network inputs
            assert inp.type.tensor_type.elem_type in (onnx.TensorProto.FLOAT16, onnx.TensorProto.INT32)


def test_device_offsets(deployed):
    """Aligned, and buffers apart on the host stay apart on the device (offset plans share
    arena bytes between buffers never alive together)."""
    _, manifest = deployed
    bufs = manifest["buffers"]
    for a in bufs:
        assert a["device_offset"] % 256 == 0
        for b in bufs:
            if a["offset"] + a["bytes"] <= b["offset"]:
                assert a["device_offset"] + a["bytes"] <= b["device_offset"]
    assert manifest["device_arena_bytes"] >= manifest["arena_bytes"]
    assert manifest["device_arena_bytes"] % 256 == 0


@pytest.mark.skipif(not backend_trt.available(),
                    reason="TensorRT path needs the tensorrt package and an NVIDIA GPU with the "
                           "CUDA runtime; neither is on this machine")
def test_tensorrt_run_matches_reference(deployed):   # pragma: no cover - GPU only
    folder, manifest = deployed
    res = backend_trt.measure(folder, frames=4, seed=0, warmup=1, check=True)
    assert res["max_abs_diff"]["tiny"] < 5e-3           # fp16 storage
    assert res["calls_per_frame"]["tiny"] == sum(len(p["steps"]) for p in manifest["partitions"])
    assert res["arena_bytes"] == manifest["device_arena_bytes"]


def test_runner_feeds_a_pool_of_frames():
    """`board_runner.py run` deals max(frames, CNNs) frames to the CNNs in turn, each CNN's
    cycled from at most 4 arrays made once (peak RSS counts 4 frames, not --frames)."""
    m = {"cnns": {"a": {"inputs": [{"shape": [1, 3, 8, 8]}]},
                  "b": {"inputs": [{"shape": [1, 1, 4, 4]}]}}}
    got = board_runner.input_frames(m, 11, seed=5)
    assert [len(got["a"]), len(got["b"])] == [6, 5]
    a = got["a"]
    assert len(a.pool) == 4 and a[4] is a[0] and a[5] is a[1] and a[-1] is a[5]
    assert [f is g for f, g in zip(a, list(a.pool) * 2)] == [True] * 6
    assert len(a[:3]) == 3 and all(x is y for x, y in zip(a[:3], a.pool[:3]))
    with pytest.raises(IndexError):
        a[6]
    again = board_runner.input_frames(m, 11, seed=5)
    assert all(np.array_equal(x, y) for x, y in zip(again["b"].pool, got["b"].pool))
    assert got["b"][0].shape == (1, 1, 4, 4) and got["b"][0].dtype == np.float32
    assert [len(c) for c in board_runner.input_frames(m, 1).values()] == [1, 1]
