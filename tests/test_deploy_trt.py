"""The TensorRT path: what can be checked without a GPU (the standalone runner stays
Python 3.6 / TensorRT 8.2 compatible; the step models are what TensorRT 8.2 parses; device
offsets are aligned), and a full run on a GPU when tensorrt and CUDA are present."""
from __future__ import annotations

import ast
from pathlib import Path

import onnx
import pytest

from csdf.parts import all_parts
from deploy.tensorrt import backend as backend_trt, board_runner
from deploy.build.derive import derive
from test_deploy_fixtures import make_plan, tiny_cnn

RUNNER = Path(board_runner.__file__)
ALLOWED = {"argparse", "ctypes", "ctypes.util", "json", "os", "resource", "sys", "threading",
           "time", "numpy", "tensorrt"}


def test_runner_is_python36_and_standalone():
    tree = ast.parse(RUNNER.read_text(), feature_version=(3, 6))   # no walrus, no 3.8+ syntax
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module)
    assert imported <= ALLOWED, imported - ALLOWED
    assert "dataclass" not in RUNNER.read_text()
    # APIs newer than 3.6 that ast cannot catch
    for name in ("capture_output", "asyncio.run", "math.prod", "removeprefix", "text=True"):
        assert name not in RUNNER.read_text()


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("trt")
    cnn = tiny_cnn(tmp)
    plan = make_plan([cnn], {cnn.name: all_parts(cnn)}, data_bytes=2)
    manifest = derive(plan, {cnn.name: cnn}, tmp / "dep", backend="tensorrt", with_profile=True)
    return tmp / "dep", manifest


def test_models_fit_tensorrt_82(deployed):
    folder, manifest = deployed
    assert (folder / "board_runner.py").read_text() == RUNNER.read_text()
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
    import numpy as np

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
