"""The size bound of an imported CNN (csdf/machine_bound.py): a graph input, edge or the
parameters taking more float32 bytes than the machine has memory is refused in one line
naming it and its bytes, the input before shape inference; a dimension beyond int64 is one
line; shapes within memory import as before."""
from __future__ import annotations

import math
import os
import time

import onnx
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from csdf import machine_bound
from refusals import refused, tiny_least_memory
from sdf3.errors import InputError


def dynamic_tiny(path):
    """The tiny CNN (conftest) with its height and width dynamic ('H', 'W')."""
    from conftest import write_tiny_onnx
    model = onnx.load(str(write_tiny_onnx(path)))
    for value in list(model.graph.input) + list(model.graph.output):
        dims = value.type.tensor_type.shape.dim
        if len(dims) == 4:
            dims[2].dim_param, dims[3].dim_param = "H", "W"
    del model.graph.value_info[:]
    onnx.save(model, str(path))
    return path


@pytest.fixture(scope="module")
def dyn(tmp_path_factory):
    return dynamic_tiny(tmp_path_factory.mktemp("bound") / "dyn.onnx")


def meminfo_bytes() -> int:
    """MemTotal of /proc/meminfo, an independent reading of the machine's memory."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no MemTotal")


@pytest.mark.skipif(not os.path.exists("/proc/meminfo"), reason="Linux's /proc")
def test_total_memory_is_the_machines():
    total = machine_bound.total_memory()
    # physical pages x page size is MemTotal plus what the kernel reserved for itself; a
    # cgroup limit only lowers it
    assert total is not None and total <= meminfo_bytes() * 1.1


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(h=st.integers(1, 10**12), w=st.integers(1, 10**12), limit=st.integers(10**3, 10**13))
def test_an_input_is_refused_exactly_when_it_exceeds_memory(monkeypatch, dyn, h, w, limit):
    from csdf.onnx_inputs import fix_inputs
    monkeypatch.setattr(machine_bound, "total_memory", lambda: limit)
    model = onnx.load(str(dyn))
    nbytes = 1 * 3 * h * w * 4
    if nbytes > limit:
        with pytest.raises(InputError) as err:
            fix_inputs(model, "dyn.onnx", [1, 3, h, w])
        assert f"graph input 'input' [1, 3, {h}, {w}] holds {nbytes} B" in str(err.value)
        assert f"this machine's {limit} B" in str(err.value)
    else:
        fixed = fix_inputs(model, "dyn.onnx", [1, 3, h, w])
        assert fixed.shapes == (("input", (1, 3, h, w)),)


def test_an_edge_beyond_memory_is_refused_after_import(monkeypatch, dyn):
    from csdf.onnx_import import load_onnx
    cnn = load_onnx(dyn, "tiny", input_shape=[1, 3, 64, 64])
    edge = max(cnn.edges(), key=lambda e: cnn.edge_elements(*e))
    largest = cnn.edge_elements(*edge) * 4
    inputs = 3 * 64 * 64 * 4
    assert largest > inputs            # conv1's 4 channels outgrow the 3 of the input
    machine_bound.check_cnn(cnn, "x")  # the machine holds it
    monkeypatch.setattr(machine_bound, "total_memory", lambda: largest - 1)
    with pytest.raises(InputError, match=rf"edge {edge[0]} -> {edge[1]} .* holds {largest} B"):
        machine_bound.check_cnn(cnn, "x")
    monkeypatch.setattr(machine_bound, "total_memory", lambda: cnn.param_count * 4 - 1)
    with pytest.raises(InputError, match=r"(edge|the parameters) .* holds"):
        machine_bound.check_cnn(cnn, "x")


SHAPES = [
    ([1, 3, 12345678901234567890123, 8], "beyond an ONNX dimension's range"),
    ([1, 3, 4000000, 4000000], "holds 192000000000000 B as float32"),
    ([1, 3, 3000000000, 32], "holds 1152000000000 B as float32"),
]


@pytest.mark.parametrize("command", ["info", "explore", "deploy"])
@pytest.mark.parametrize("shape,words", SHAPES)
def test_the_commands_refuse_at_import(tmp_path, capsys, dyn, command, shape, words):
    if math.prod(shape) * 4 <= (machine_bound.total_memory() or 0) and "range" not in words:
        pytest.skip("a machine that holds this shape")
    app = tmp_path / "tiny.yaml"
    plan = None
    if command == "deploy":       # the tiny CNN's plan, its app file then given this shape
        tiny_least_memory(tmp_path)
        plan = tmp_path / "run" / "plan.json"
    app.write_text(f"name: t\ncnns:\n  - {{name: tiny, model: {dyn}, input_shape: {shape}}}\n")
    argv = {"info": ["info", str(app)], "explore": [str(app), "--out", str(tmp_path / "o")],
            "deploy": ["deploy", str(plan), "--out", str(tmp_path / "o")]}
    began = time.monotonic()
    refused(capsys, argv[command], "graph input 'input'", words)
    assert time.monotonic() - began < 30 and not (tmp_path / "o").exists()
