"""plan.json read back by `explore deploy` is checked as the explorer checks its own plans
(deploy/checks/plan_check.py): a hand-edited or damaged plan is refused with one line naming the
key, layer or edge, exit 2, and nothing is written. Each case damages a plan the explorer
made; before the check, the first four deployed and ran with exit 0 and wrong outputs, and
the schema cases gave tracebacks."""
from __future__ import annotations

import re

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from csdf.onnx_import import load_onnx
from csdf.parts import all_parts
from deploy.runtime import arena
from deploy.build.derive import derive
from explorer.cli.main import main
from explorer.memory.lifetimes import conflict, group_index
from sdf3.errors import InputError
from deploy_fixtures import make_plan, tiny_cnn, tiny_onnx


@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    return tiny_cnn(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="module")
def parts_plan(cnn):
    return make_plan([cnn], {cnn.name: all_parts(cnn)})


def _copy(plan):
    return json.loads(json.dumps(plan))


def _refused(plan, cnn, tmp_path, match):
    out = tmp_path / "dep"
    with pytest.raises(InputError, match=match) as err:
        derive(plan, {cnn.name: cnn}, out, where="plan.json")
    assert "\n" not in str(err.value) and str(err.value).startswith("plan.json: ")
    assert not out.exists()      # refused before anything is written


def test_the_explorers_plans_pass(cnn, parts_plan, tmp_path):
    from deploy.checks import plan_check
    from explorer.plan.plan_file import from_dict
    plan_check.check(from_dict(parts_plan), {cnn.name: cnn})
    plan_check.check(from_dict(make_plan([cnn], {cnn.name: {n: 1 for n in cnn.order()}})), {cnn.name: cnn})
    plan_check.check(from_dict(make_plan([cnn], {cnn.name: all_parts(cnn)}, split={cnn.name: 9},
                                         pipelined=True)), {cnn.name: cnn})


def test_live_edges_in_one_buffer(cnn, parts_plan, tmp_path):
    """Two edges alive at once, found with the explorer's own conflict rule, put together."""
    from explorer.plan.derive import derive as explorer_derive
    from deploy_fixtures import make_app
    app = make_app([cnn])
    uses = {u.name: u for u in explorer_derive(app, {cnn.name: all_parts(cnn)}).uses}
    plan = _copy(parts_plan)
    names = list(plan["edges"])
    a, b = next((a, b) for a in names for b in names
                if plan["edges"][a]["buffer"] != plan["edges"][b]["buffer"]
                and conflict(uses[a], uses[b], group_index(app.pipelines)))
    ka, kb = plan["edges"][a]["buffer"], plan["edges"][b]["buffer"]
    plan["buffers"][kb]["edges"].remove(b)
    plan["buffers"][ka]["edges"].append(b)
    plan["edges"][b]["buffer"] = ka
    big = max(plan["buffers"][ka]["elements"], plan["buffers"][kb]["elements"])
    plan["buffers"][ka].update(elements=big, bytes=4 * big)
    _refused(plan, cnn, tmp_path, "alive together")


def test_read_before_written(cnn, parts_plan, tmp_path):
    plan = _copy(parts_plan)
    fired = plan["firings"]["tiny.all"]
    first_conv = fired.index("conv1")
    fired.insert(0, fired.pop(first_conv))        # conv1's first row before the frame arrives
    _refused(plan, cnn, tmp_path, r"reads row 0 of tiny.x->conv1 before its producer")


def test_sink_never_fires(cnn, parts_plan, tmp_path):
    plan = _copy(parts_plan)
    plan["firings"]["tiny.all"] = [f for f in plan["firings"]["tiny.all"] if f != "softmax"]
    _refused(plan, cnn, tmp_path, "layer softmax fires 0 times")


def test_ring_one_row_too_small(cnn, parts_plan, tmp_path):
    plan = _copy(parts_plan)
    shapes = {n: e["shape"][2] for n, e in plan["edges"].items()}
    rings = [n for n, e in plan["edges"].items() if 1 < e["rows"] < shapes[n]]
    assert rings
    shared = 0
    for name in rings:
        bad = _copy(plan)
        src, buf = name.split("->")[0], plan["edges"][name]["buffer"]
        same = [n for n, e in plan["edges"].items()
                if n.split("->")[0] == src and e["buffer"] == buf]
        for n in same:                     # one ring per stored tensor: every reader's edge
            bad["edges"][n]["rows"] -= 1
        _refused(bad, cnn, tmp_path, f"edges.{re.escape(src)}->.*: a ring of .* is too small")
        if len(same) > 1 and plan["edges"][name]["rows"] + 1 < shapes[name]:
            shared += 1                    # readers of one ring disagreeing on its size
            bad = _copy(plan)
            bad["edges"][name]["rows"] += 1
            _refused(bad, cnn, tmp_path, "store one tensor in buffer .* but hold")
    assert shared


@pytest.mark.parametrize("damage, match", [
    (lambda p: p["phases"]["tiny"].update(conv1="abc"), r"phases.tiny.conv1: expected a positive integer"),
    (lambda p: p["phases"]["tiny"].update(nosuch=1), r"phases.tiny: unknown layer 'nosuch'"),
    (lambda p: p["phases"]["tiny"].update(fc9=3), r"Gemm cannot be processed by parts"),
    (lambda p: p["edges"][next(iter(p["edges"]))].update(buffer=999), r"buffer 999 is out of range"),
    (lambda p: p["firings"].pop("tiny.all"), r"firings: no list of layer firings for partition tiny.all"),
    (lambda p: p["partitions"][0].update(cnn="other"), r"partitions.tiny.all: unknown CNN 'other'"),
    (lambda p: p["edges"].update({k.split(".", 1)[1]: p["edges"].pop(k) for k in [next(iter(p["edges"]))]}),
     r"edges: 'x->conv1' is not an edge name 'cnn.src->dst'"),
    (lambda p: p["edges"].update({"other." + k.split(".", 1)[1]: p["edges"].pop(k) for k in [next(iter(p["edges"]))]}),
     r"is not 'cnn.src->dst' of a CNN of the app"),
    (lambda p: p.update(schema=3), r"key 'schema': expected 2, got 3"),
    (lambda p: p.update(edges=[]), r"key 'edges' must map"),
    (lambda p: p["buffers"][0].update(edges="x"), r"buffers\[0\]: expected"),
    (lambda p: p.update(pipelines=[["tiny.all"], ["tiny.all"]]), r"tiny.all is in two sets"),
])
def test_schema(cnn, parts_plan, tmp_path, damage, match):
    plan = _copy(parts_plan)
    damage(plan)
    _refused(plan, cnn, tmp_path, match)


def huge_onnx(path, side: int) -> str:
    """Three 1x1 convs over a declared [1, 64, side, side] input: sized, never run. The middle
    conv's input and output are live together in the arena (the first reads the caller's
    input, the last writes the caller's output)."""
    w = numpy_helper.from_array(np.ones([64, 64, 1, 1], np.float32), "w")
    names = ["x", "a", "b", "y"]
    nodes = [helper.make_node("Conv", [names[i], "w"], [names[i + 1]], name=f"conv{i}",
                              kernel_shape=[1, 1]) for i in range(3)]
    graph = helper.make_graph(
        nodes, "huge", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, side, side])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, side, side])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return str(path)


def test_arena_larger_than_the_machine(tmp_path):
    """A declared shape whose whole-layer plan needs more than this machine's memory, each
    of its tensors alone less (a larger one is refused at import: csdf/machine_bound.py)."""
    total = arena.machine_bytes()
    side = int((0.75 * total / (64 * 4)) ** 0.5)    # [1, 64, side, side] fp32: 3/4 of memory
    cnn = load_onnx(huge_onnx(tmp_path / "huge.onnx", side), "huge")
    plan = make_plan([cnn], {"huge": {n: 1 for n in cnn.order()}})
    assert plan["buffer_bytes"] > total
    with pytest.raises(InputError, match=r"GiB .*more than this machine's .* GiB of memory"):
        derive(plan, {"huge": cnn}, tmp_path / "dep", where="plan.json")
    assert not (tmp_path / "dep").exists()


def test_cli_refuses_in_one_line(tmp_path, capsys, cnn, parts_plan):
    tiny_onnx(tmp_path / "tiny.onnx")
    app_path = tmp_path / "app.yaml"
    app_path.write_text("name: tiny-app\nplatform: jetson-tx2\nprecision: fp32\n"
                        "cnns:\n  - name: tiny\n    model: tiny.onnx\n    fps: 0\n")
    plan = _copy(parts_plan)
    plan.update(app=str(app_path), par_bytes=4, memory_bytes=plan["buffer_bytes"], param_bytes=0,
                fps={"tiny": 0.0}, constraints={"memory_bytes": None, "fps": {}},
                constraints_met=True, schedules={p: "" for p in plan["firings"]})
    plan["phases"]["tiny"]["conv1"] = "abc"
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    assert main(["deploy", str(tmp_path / "plan.json"), "--out", str(tmp_path / "dep")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "plan.json: phases.tiny.conv1: expected a positive integer" in err
    assert not (tmp_path / "dep").exists() or not any((tmp_path / "dep").iterdir())
