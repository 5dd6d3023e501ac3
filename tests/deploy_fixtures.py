"""Small CNNs built with onnx.helper, and plans for them made by the explorer's own pipeline
(explorer.plan.derive: partition analysis, edge lifetimes, Algorithm 1, memory, validity check),
so the deploy tests run the plans `explore` writes. Whether a plan is right is checked by
running it: outputs equal to the unmodified model's, arena bytes equal to the plan's."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from csdf.model import CNN
from csdf.onnx_import import load_onnx
from explorer.app.model import PRECISIONS, Application, Partition


def tiny_onnx(path, seed: int = 0, shape=(1, 3, 16, 12), classes: int = 10) -> str:
    """conv/bn/relu, depthwise stride 2 + relu6, residual add, SE block (GAP, 1x1 convs,
    sigmoid, Mul), concat, max and average pools, HardSwish, flatten + gemm, softmax."""
    rng = np.random.default_rng(seed)
    inits: list = []

    def w(name, shp, scale=0.3):
        inits.append(numpy_helper.from_array((rng.standard_normal(shp) * scale).astype(np.float32), name))
        return name

    def c(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value, np.float32), name))
        return name

    n = helper.make_node
    nodes = [
        n("Conv", ["x", w("w1", [8, 3, 3, 3]), w("b1", [8])], ["c1"], name="conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        n("BatchNormalization", ["c1", w("g", [8]), w("be", [8]), w("m", [8]),
                                 c("v", np.abs(rng.standard_normal(8)) + 0.5)], ["bn1"], name="bn1"),
        n("Relu", ["bn1"], ["r1"], name="relu1"),
        n("Conv", ["r1", w("w2", [8, 1, 3, 3]), w("b2", [8])], ["c2"], name="dw2", kernel_shape=[3, 3],
          pads=[1, 1, 1, 1], strides=[2, 2], group=8),
        n("Clip", ["c2", c("lo", 0.0), c("hi", 6.0)], ["r2"], name="relu6_2"),
        n("Conv", ["r2", w("w3", [8, 8, 1, 1]), w("b3", [8])], ["c3"], name="pw3", kernel_shape=[1, 1]),
        n("Add", ["c3", "r2"], ["a3"], name="add3"),
        # squeeze-excite
        n("GlobalAveragePool", ["a3"], ["se_g"], name="se_gap"),
        n("Conv", ["se_g", w("wse1", [4, 8, 1, 1]), w("bse1", [4])], ["se_c1"], name="se_fc1", kernel_shape=[1, 1]),
        n("Relu", ["se_c1"], ["se_r"], name="se_relu"),
        n("Conv", ["se_r", w("wse2", [8, 4, 1, 1]), w("bse2", [8])], ["se_c2"], name="se_fc2", kernel_shape=[1, 1]),
        n("Sigmoid", ["se_c2"], ["se_s"], name="se_sig"),
        n("Mul", ["a3", "se_s"], ["se_out"], name="se_mul"),
        # two branches concatenated
        n("MaxPool", ["se_out"], ["p4"], name="pool4", kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1]),
        n("Conv", ["se_out", w("w5", [4, 8, 5, 3]), w("b5", [4])], ["c5"], name="conv5", kernel_shape=[5, 3],
          pads=[2, 1, 2, 1]),
        n("HardSwish", ["c5"], ["h5"], name="hswish5"),
        n("Concat", ["p4", "h5"], ["cat6"], name="cat6", axis=1),
        n("AveragePool", ["cat6"], ["ap7"], name="apool7", kernel_shape=[2, 2], strides=[2, 2]),
        n("GlobalAveragePool", ["ap7"], ["g8"], name="gap8"),
        n("Flatten", ["g8"], ["f8"], name="flat8"),
        n("Gemm", ["f8", w("w9", [classes, 12]), w("b9", [classes])], ["fc9"], name="fc9", transB=1),
        n("Softmax", ["fc9"], ["y"], name="softmax", axis=1),
    ]
    graph = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [shape[0], classes])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return str(path)


def tiny_app_file(folder) -> Path:
    """tiny.onnx and an app file naming it (one CNN 'tiny', fp32, jetson-tx2) in `folder`."""
    folder = Path(folder)
    tiny_onnx(folder / "tiny.onnx")
    path = folder / "app.yaml"
    path.write_text("name: tiny-app\nplatform: jetson-tx2\nprecision: fp32\n"
                    "cnns:\n  - name: tiny\n    model: tiny.onnx\n    fps: 0\n")
    return path


def tiny_cnn(tmp_path, name: str = "tiny", seed: int = 0, **kw) -> CNN:
    return load_onnx(tiny_onnx(tmp_path / f"{name}.onnx", seed, **kw), name)


def make_app(cnns: list[CNN], split: dict[str, int] | None = None, pipelined: bool = False,
             data_bytes: int = 4, placement: str = "offsets") -> Application:
    """An Application over loaded CNNs: one partition each ("cnn.all"), or two ("cnn.p0",
    "cnn.p1") cut at `split[cnn]` in topological order, in one pipeline set if `pipelined`."""
    partitions, pipelines = [], []
    for cnn in cnns:
        order = cnn.order()
        cut = (split or {}).get(cnn.name)
        named = ([(f"{cnn.name}.all", order)] if cut is None else
                 [(f"{cnn.name}.p0", order[:cut]), (f"{cnn.name}.p1", order[cut:])])
        partitions += [Partition(n, cnn.name, list(layers)) for n, layers in named]
        names = [n for n, _ in named]
        pipelines += [names] if pipelined else [[n] for n in names]
    precision = {4: PRECISIONS["fp32"], 2: PRECISIONS["fp16"], 1: PRECISIONS["int8"]}[data_bytes]
    return Application("test", {c.name: c for c in cnns}, partitions, pipelines, precision,
                       placement=placement)


def plan_of(app: Application, phases: dict[str, dict[str, int]], reuse: bool = True) -> dict:
    """plan.json of `app` under `phases`, made by the explorer itself (explorer.plan.derive:
    analysis, lifetimes, Algorithm 1, memory, validity check); `reuse=False` keeps one
    buffer per edge (explorer.memory.buffers.naive) for comparison."""
    from explorer.plan.derive import derive, plan_for
    from explorer.memory.buffers import buffer_elements, naive
    d = derive(app, phases)
    if not reuse:
        buffers = naive(d.uses)
        bb = buffer_elements(buffers) * app.precision.data_bytes
        d = replace(d, buffers=buffers, buffer_bytes=bb, memory_bytes=d.param_bytes + bb)
    return plan_for(app, d, {c: 0.0 for c in app.cnns}, True).to_dict()


def make_plan(cnns: list[CNN], phases: dict[str, dict[str, int]], split: dict[str, int] | None = None,
              pipelined: bool = False, reuse: bool = True, data_bytes: int = 4,
              placement: str = "offsets") -> dict:
    """A plan.json dict for `cnns` (see make_app) under `phases`."""
    return plan_of(make_app(cnns, split, pipelined, data_bytes, placement), phases, reuse)


def plan_for_app(app: Application, mode: str, reuse: bool = True) -> dict:
    """A plan for an app with its own partitions and pipelines; mode "whole" (reuse only)
    or "all_parts" (every layer that can, by parts: the least-memory end)."""
    from explorer.plan.derive import uniform_phases
    return plan_of(app, uniform_phases(app, mode == "all_parts"), reuse)


def tiny_plan_file(folder) -> Path:
    """plan.json of the tiny app (tiny_app_file) with every layer that can by parts, with
    every key explorer.plan.model reads back, in `folder`."""
    import json
    from csdf.parts import all_parts
    from explorer.app.appfile import load_app
    app_path = tiny_app_file(folder)
    cnn = load_app(app_path).cnns["tiny"]
    plan = make_plan([cnn], {"tiny": all_parts(cnn)})
    plan.update(app=str(app_path), par_bytes=4, memory_bytes=plan["buffer_bytes"], param_bytes=0,
                fps={"tiny": 0.0}, constraints={"memory_bytes": None, "fps": {}},
                constraints_met=True, schedules={p: "" for p in plan["firings"]})
    path = Path(folder) / "plan.json"
    path.write_text(json.dumps(plan))
    return path


def fired(manifest) -> dict[str, list[list]]:
    """Per partition of a deployment, the firings its steps make, in order (a region step,
    deploy/build/regions.py: its band's)."""
    return {p.name: [list(f) for s in p.steps for f in (s.region or [(s.layer, s.phase)])]
            for p in manifest.partitions}


def planned(plan) -> dict[str, list[list]]:
    """Per partition of a plan, its firings as [layer, phase], in order."""
    out = {}
    for name, layers in plan["firings"].items():
        seen: dict[str, int] = {}
        out[name] = []
        for layer in layers:
            out[name].append([layer, seen.get(layer, 0)])
            seen[layer] = seen.get(layer, 0) + 1
    return out


def tensorrt_deployment(tmp: Path) -> Path:
    """The tiny CNN with every layer in its parts, fp16, deployed for the TensorRT backend
    with its profile step models: the folder written (tmp / "dep")."""
    from csdf.parts import all_parts
    from deploy.build.derive import derive
    cnn = tiny_cnn(tmp)
    plan = make_plan([cnn], {cnn.name: all_parts(cnn)}, data_bytes=2)
    derive(plan, {cnn.name: cnn}, tmp / "dep", backend="tensorrt", with_profile=True)
    return tmp / "dep"
