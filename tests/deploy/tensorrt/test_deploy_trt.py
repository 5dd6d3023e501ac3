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

from deploy.tensorrt import backend as backend_trt, board_runner
from deploy_fixtures import tensorrt_deployment

HERE = Path(board_runner.__file__).parent
SIBLINGS = {Path(f).stem for f in backend_trt.RUNNER_FILES}
ALLOWED = {"argparse", "collections", "ctypes", "ctypes.util", "json", "os", "resource", "sys",
           "threading", "time", "numpy", "tensorrt"}


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
    m = {"a": [1, 3, 4, 4], "b": [1, 2, 2, 3]}
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
    dep = tensorrt_deployment(tmp_path_factory.mktemp("trt"))
    # the manifest as the board runner reads it: the JSON's dicts (Python 3.6, no records)
    return dep, json.loads((dep / "manifest.json").read_text())


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
    m = {"a": [1, 3, 8, 8], "b": [1, 1, 4, 4]}
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


def test_runner_reads_the_manifest_as_the_records_do(deployed):
    """The runner's records (trt_manifest.py, Python 3.6) hold, field by field, what
    deploy/runtime/manifest_records.py reads from the same manifest.json."""
    from deploy.runtime.manifest_records import Manifest as Records
    folder, data = deployed
    want = Records.from_dict(data)
    got = board_runner.load_manifest(str(folder))
    assert got == board_runner.read_manifest(data)
    assert (got.dtype, got.precision, got.device_arena_bytes) == (
        want.dtype, want.precision, want.device_arena_bytes)
    assert list(got.models) == list(want.models) and got.models
    assert got.pipelines == want.pipelines
    assert {n: tuple(e) for n, e in got.edges.items()} == {
        n: (e.device_offset, e.row_bytes, e.layout) for n, e in want.edges.items()}
    assert list(got.cnns) == list(want.cnns)
    for name, cnn in got.cnns.items():
        ref = want.cnns[name]
        assert cnn.reference == ref.reference and cnn.partitions == ref.partitions
        assert [tuple(p) for p in cnn.inputs] == [(p.layer, p.shape, p.layout) for p in ref.inputs]
        assert [tuple(p) for p in cnn.outputs] == [(p.layer, p.shape, p.layout) for p in ref.outputs]
    assert [(p.name, p.cnn, len(p.steps)) for p in got.partitions] == [
        (p.name, p.cnn, len(p.steps)) for p in want.partitions]
    kinds = set()
    for part, (_, t, step) in zip([s for p in got.partitions for s in p.steps], want.steps()):
        assert part.model == step.model
        assert [tuple(b) for b in part.bind] == [
            (b.kind, b.name, b.edges, b.slot, b.values, b.layer) for b in step.bind]
        kinds |= {b.kind for b in part.bind}
    assert {"frame", "edge", "output"} <= kinds
    assert [(p.cnn, p.layer, p.kind, p.model, p.phases, tuple(p.ports)) for p in got.profile] == [
        (p.cnn, p.layer, p.kind, p.model, p.phases,
         tuple((q.name, q.shape, q.dtype, q.values) for q in p.ports)) for p in want.profile]
    assert {p.kind for p in got.profile} == {"whole", "part"}
    assert got.cnns["tiny"].inputs[0].shape == tuple(data["cnns"]["tiny"]["inputs"][0]["shape"])
    assert board_runner.input_shapes(got) == {"tiny": list(data["cnns"]["tiny"]["inputs"][0]["shape"])}


@pytest.mark.parametrize("damage, where", [
    (lambda m: m.pop("device_arena_bytes"), "manifest.json: expected key 'device_arena_bytes'"),
    (lambda m: m["edges"][sorted(m["edges"])[0]].update(row_bytes="8"),
     "manifest.json: edges.%s: key 'row_bytes' must be an integer, got '8'"),
    (lambda m: m["partitions"][0]["steps"][1]["bind"][0].pop("kind"),
     "manifest.json: partitions.%s.steps[1].bind[0]: expected key 'kind'"),
    (lambda m: m["partitions"][0]["steps"][0].update(model=3),
     "manifest.json: partitions.%s.steps[0]: key 'model' must be a string or null, got 3"),
])
def test_runner_refuses_a_damaged_manifest_in_one_line(deployed, tmp_path, damage, where):
    _, data = deployed
    broken = json.loads(json.dumps(data))
    damage(broken)
    (tmp_path / "manifest.json").write_text(json.dumps(broken))
    with pytest.raises(SystemExit) as err:
        board_runner.load_manifest(str(tmp_path))
    if "edges." in where:
        where = where % sorted(data["edges"])[0]
    elif "partitions." in where:
        where = where % data["partitions"][0]["name"]
    assert str(err.value) == str(tmp_path / where)
    assert "\n" not in str(err.value)


def test_build_all_builds_every_model_once(deployed, tmp_path, monkeypatch):
    """`board_runner.py build`: an engine per step model, reference and profile model (their
    paths from the JSON), none rebuilt while newer than its ONNX file."""
    from deploy.tensorrt import trt_engines
    folder, data = deployed
    dep = tmp_path / "dep"
    for rel in [p.relative_to(folder) for p in folder.rglob("*.onnx")] + [Path("manifest.json")]:
        (dep / rel).parent.mkdir(parents=True, exist_ok=True)
        (dep / rel).write_bytes((folder / rel).read_bytes())
    built = []
    monkeypatch.setattr(trt_engines, "build_engine",
                        lambda path, fp16: built.append((Path(path).relative_to(dep), fp16)) or b"e")
    want = set(data["models"]) | {p["model"] for p in data["profile"]} | {
        c["reference"] for c in data["cnns"].values()}
    assert data["precision"] == "fp16" and len(want) > 3
    assert board_runner.build_all(str(dep)) == len(want)
    assert sorted(str(p) for p, _ in built) == sorted(want) and all(f for _, f in built)
    assert all((dep / "engines" / (rel[:-len(".onnx")] + ".engine")).read_bytes() == b"e" for rel in want)
    assert board_runner.build_all(str(dep), fp16=False) == 0 and len(built) == len(want)
