"""What each backend does with a deployment, against what it says: the parameter storage it
claims for a precision is what derive writes into the step models, its files are in the
folder, its build step says what it did, and `measure` hands a deployment to the backend's
own runner when it has one. TensorRT is not installable here: what needs it skips."""
from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto

from deploy.backends import registry
from deploy.tensorrt import backend as backend_trt
from deploy.tensorrt.backend import RUNNER_FILES
from deploy_fixtures import make_plan, tiny_cnn

NO_TRT = "TensorRT path needs the tensorrt package and an NVIDIA GPU with the CUDA runtime; " \
         "neither is on this machine"
KIND = {TensorProto.FLOAT: "float32", TensorProto.FLOAT16: "float16", TensorProto.INT8: "int8"}


@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    return tiny_cnn(tmp_path_factory.mktemp("work"))


def _derive(cnn, out: Path, name: str, precision: str):
    from deploy.build.derive import derive
    plan = make_plan([cnn], {cnn.name: {}}, data_bytes=2)
    plan["precision"] = precision
    return derive(plan, {cnn.name: cnn}, out, backend=name, regions=False)


def _weight_kinds(folder: Path, manifest) -> set[str]:
    """The storage types of the step models' multi-axis parameters (deploy/quant/stored.py
    stored_low; not an int8 parameter's fp32 scales): what derive stored them as."""
    kinds = set()
    for rel in manifest.models:
        model = onnx.load(str(folder / rel))
        kinds |= {KIND.get(t.data_type, str(t.data_type)) for t in model.graph.initializer
                  if len(t.dims) >= 2 and t.dims[0] * t.dims[1] > 1
                  and not t.name.endswith(":scale")}
    return kinds


@pytest.mark.parametrize("name, precision, stored", [
    ("onnxruntime", "fp16", "float16"), ("onnxruntime", "mixed", "int8"),
    ("tensorrt", "fp16", "float32"), ("tensorrt", "mixed", "float32")])
def test_step_models_store_what_the_backend_says(cnn, tmp_path, name, precision, stored):
    """ONNX Runtime keeps the plan's parameter precision, TensorRT fp32 (its engines convert
    them), both as their stored_weights claim."""
    chosen = registry.backend(name)
    assert precision in chosen.capabilities.precisions
    assert chosen.stored_weights(precision) == stored
    manifest = _derive(cnn, tmp_path / "d", name, precision)
    assert manifest.backend == name
    assert _weight_kinds(tmp_path / "d", manifest) == {stored}
    runner = {f: (tmp_path / "d" / f).is_file() for f in RUNNER_FILES}
    assert runner == {f: name == "tensorrt" for f in RUNNER_FILES}     # add_files


def test_onnxruntime_runs_its_deployment_through_the_executor(cnn, tmp_path):
    from deploy.run.measure import measure
    _derive(cnn, tmp_path / "d", "onnxruntime", "fp16")
    assert registry.backend("onnxruntime").after_derive(tmp_path / "d", None) == []
    res = measure(tmp_path / "d", frames=2, warmup=1, threads=1)
    assert res["backend"] == "onnxruntime" and res["max_abs_diff"]["tiny"] < 5e-2


@pytest.mark.skipif(backend_trt.available(), reason="TensorRT is here: the engines are built")
def test_tensorrt_without_tensorrt_says_the_board_builds_and_measures(cnn, tmp_path):
    """Here its build step is one line saying where the engines are built, and `measure`
    goes to its own runner, which refuses in one line (the executor never sees it)."""
    from deploy.run.measure import measure
    from sdf3.errors import InputError
    manifest = _derive(cnn, tmp_path / "d", "tensorrt", "fp16")
    lines = registry.backend("tensorrt").after_derive(tmp_path / "d", manifest)
    assert len(lines) == 1 and "board_runner.py build DIR" in lines[0]
    with pytest.raises(InputError, match="^--backend tensorrt: needs the tensorrt package"):
        measure(tmp_path / "d", frames=2)
    # an ONNX Runtime deployment measured with --backend tensorrt goes to the runner too
    _derive(cnn, tmp_path / "o", "onnxruntime", "fp16")
    with pytest.raises(InputError, match="^--backend tensorrt: needs the tensorrt package"):
        measure(tmp_path / "o", frames=2, backend="tensorrt")


@pytest.mark.skipif(not backend_trt.available(), reason=NO_TRT)
def test_tensorrt_builds_its_engines(cnn, tmp_path):   # pragma: no cover - GPU only
    manifest = _derive(cnn, tmp_path / "d", "tensorrt", "fp16")
    lines = registry.backend("tensorrt").after_derive(tmp_path / "d", manifest)
    assert len(lines) == 1 and lines[0].startswith("built ") and "TensorRT engines" in lines[0]
    assert json.loads((tmp_path / "d" / "manifest.json").read_text())["backend"] == "tensorrt"
