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
