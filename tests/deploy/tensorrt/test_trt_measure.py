"""`board_runner.py run` and `profile` (deploy/tensorrt/trt_measure.py) without a GPU: the
CUDA and TensorRT stand-ins of test_trt_board.py; what they report is checked against the
deployment's manifest.json."""
from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from deploy.tensorrt import trt_board, trt_measure
from deploy_fixtures import tensorrt_deployment
from test_trt_board import FakeCuda, FakeEngine

FAKE_TRT = SimpleNamespace(Runtime=lambda logger: "runtime", __version__="0.fake")


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("measure")
    data = json.loads((tensorrt_deployment(tmp) / "manifest.json").read_text())
    for k, rel in enumerate(data["models"]):      # engines of k + 1 bytes, as if built
        engine = tmp / "dep" / "engines" / (rel[:-len(".onnx")] + ".engine")
        engine.parent.mkdir(parents=True, exist_ok=True)
        engine.write_bytes(b"e" * (k + 1))
    return tmp / "dep", data


@pytest.fixture
def cuda(monkeypatch):
    """The stand-ins in both modules; the one FakeCuda that profile() makes."""
    made = []

    def make():
        made.append(FakeCuda())
        return made[-1]
    for mod in (trt_board, trt_measure):
        monkeypatch.setattr(mod, "Cuda", make)
        monkeypatch.setattr(mod, "Engine", FakeEngine)
        monkeypatch.setattr(mod, "trt", FAKE_TRT)
        monkeypatch.setattr(mod, "trt_logger", lambda: None)
    monkeypatch.setattr(FakeEngine, "log", [])
    return made


def test_measure_counts_calls_and_memory(deployed, cuda):
    folder, data = deployed
    res = trt_measure.measure(str(folder), frames=5, seed=0, warmup=2, check=False)
    steps = sum(len(p["steps"]) for p in data["partitions"])
    models = sum(1 for p in data["partitions"] for s in p["steps"] if s["model"])
    assert res["calls_per_frame"] == {"tiny": steps}
    assert len(FakeEngine.log) == (5 + 2) * models          # warmup frames, then the timed ones
    assert res["arena_bytes"] == data["device_arena_bytes"]
    n = len(data["models"])
    assert res["param_bytes"] == n * (n + 1) // 2
    consts = [b["values"] for p in data["partitions"] for s in p["steps"] for b in s["bind"]
              if b["kind"] == "const"]
    assert res["device_bytes"] == data["device_arena_bytes"] + 2 * sum(
        -(-4 * len(v) // 256) * 256 for v in consts)
    assert res["max_abs_diff"] == {"tiny": None} and res["reference_fps"] == {}
    assert list(res["fps"]) == ["tiny"] and res["fps"]["tiny"] > 0
    assert (res["backend"], res["tensorrt"]) == ("tensorrt", "0.fake")


def test_profile_times_every_profile_model(deployed, cuda):
    folder, data = deployed
    out = trt_measure.profile(str(folder), repeats=4)
    entries = data["profile"]
    assert (out["format"], out["precision"], out["meta"]["repeats"]) == (
        "memtrade-profile", data["precision"], 4)
    want = {}
    for e in entries:
        want.setdefault(e["cnn"], {}).setdefault(e["layer"], set()).add(e["kind"])
    assert {c: set(t) for c, t in out["models"].items()} == {c: set(t) for c, t in want.items()}
    for e in entries:
        row = out["models"][e["cnn"]][e["layer"]]
        assert row["whole_ms"] >= 0
        if e["kind"] == "part":
            assert row["phases"] == e["phases"] and row["part_ms"] >= 0
            if "whole" not in want[e["cnn"]][e["layer"]]:
                assert row["whole_ms"] == pytest.approx(row["part_ms"] * e["phases"])
    # every port got a buffer of its own holding its values, or random data of its shape
    (made,) = cuda
    copies = iter(made.copies)
    for e in entries:
        for port in e["ports"]:
            _, arr = next(copies)
            if "values" in port:
                assert arr.dtype == np.int32 and arr.tolist() == port["values"]
            else:
                assert list(arr.shape) == port["shape"] and arr.dtype == np.dtype(port["dtype"])
    # each model called 3 times to warm up, then `repeats` times, on the ports' buffers
    assert len(FakeEngine.log) == 7 * len(entries)
    assert [r[0].split("engines/")[1] for r in FakeEngine.log[::7]] == [
        e["model"][:-len(".onnx")] + ".engine" for e in entries]
    assert [sorted(r[1]) for r in FakeEngine.log[::7]] == [sorted(p["name"] for p in e["ports"])
                                                           for e in entries]
