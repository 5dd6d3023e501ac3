"""Small CNNs built with onnx.helper and plans built for them independently of the explorer:
firings and row-buffer sizes from csdf.partition_analysis, buffer sharing by a plain greedy
pass over edge lifetimes (first producer step to last consumer step), as Algorithm 1 does."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from csdf.model import CNN, edge_name
from csdf.onnx_import import load_onnx
from csdf.partition_analysis import analyse_partition


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


def tiny_cnn(tmp_path, name: str = "tiny", seed: int = 0, **kw) -> CNN:
    return load_onnx(tiny_onnx(tmp_path / f"{name}.onnx", seed, **kw), name)


def _conflict(a: dict, b: dict, groups: list[list[str]]) -> bool:
    """Lifetimes {partition: set of steps} conflict when they overlap in a partition or sit
    in two different partitions of one pipeline set (those run at the same time)."""
    for pa, steps_a in a.items():
        for pb, steps_b in b.items():
            if pa == pb and steps_a & steps_b:
                return True
            if pa != pb and any(pa in g and pb in g for g in groups):
                return True
    return False


def _share(uses: list[tuple[str, int, dict]], groups: list[list[str]], data_bytes: int,
           reuse: bool) -> tuple[dict, list]:
    """Greedy reuse: largest edge first into the first buffer none of whose edges conflicts."""
    buffers: list[dict] = []
    where: dict[str, int] = {}
    for name, elements, life in sorted(uses, key=lambda u: -u[1]):
        for i, b in enumerate(buffers):
            if reuse and not any(_conflict(life, other, groups) for other in b["lives"]):
                break
        else:
            buffers.append({"edges": [], "elements": 0, "lives": []})
            i = len(buffers) - 1
        b = buffers[i]
        b["edges"].append(name)
        b["elements"] = max(b["elements"], elements)
        b["lives"].append(life)
        where[name] = i
    out = [{"edges": b["edges"], "elements": b["elements"], "bytes": b["elements"] * data_bytes}
           for b in buffers]
    return where, out


def make_plan(cnns: list[CNN], phases: dict[str, dict[str, int]], split: dict[str, int] | None = None,
              pipelined: bool = False, reuse: bool = True, data_bytes: int = 4,
              app_parts: dict[str, list[tuple[str, list[str]]]] | None = None,
              app_pipelines: list[list[str]] | None = None) -> dict:
    """A plan.json dict. `split[cnn]` cuts a CNN's topological order into two partitions at
    that index; `pipelined` puts the two in one pipeline set (crossing edges doubled).
    `app_parts[cnn]` = [(qualified name, layers)] and `app_pipelines` take an app's own."""
    partitions, pipelines, firings, edges = [], [], {}, {}
    uses: list[tuple[str, int, dict]] = []
    for cnn in cnns:
        order = cnn.order()
        cut = (split or {}).get(cnn.name)
        if app_parts and cnn.name in app_parts:
            named = app_parts[cnn.name]
        elif cut is None:
            named = [(f"{cnn.name}.all", order)]
        else:
            named = [(f"{cnn.name}.p0", order[:cut]), (f"{cnn.name}.p1", order[cut:])]
        part_of = {}
        names = []
        for pname, layers in named:
            names.append(pname)
            pa = analyse_partition(cnn, layers, phases[cnn.name])
            firings[pname] = pa.firings
            partitions.append({"name": pname, "cnn": cnn.name, "layers": list(layers), "processor": "gpu"})
            for layer in layers:
                part_of[layer] = (pname, pa)
        if app_pipelines is None:
            pipelines.extend([names] if pipelined else [[p] for p in names])
        for src, dst in cnn.edges():
            shape = list(cnn.edge_shape(src, dst))
            (ps, pa_s), (pd, pa_d) = part_of[src], part_of[dst]
            if ps == pd:
                rows = pa_s.edge_rows[(src, dst)]
                first, last = pa_s.edge_steps[(src, dst)]
                lives = [{ps: set(range(first, last + 1))}]
                copies = [edge_name(cnn.name, src, dst)]
            elif any(ps in g and pd in g for g in (app_pipelines or ([names] if pipelined else []))):
                # both copies span both partitions whole
                rows = shape[2]
                whole = {ps: set(range(len(pa_s.firings))), pd: set(range(len(pa_d.firings)))}
                copies = [edge_name(cnn.name, src, dst, 1), edge_name(cnn.name, src, dst, 2)]
                lives = [whole, whole]
            else:   # crossing: whole tensor, alive to the end of ps and from the start of pd
                rows = shape[2]
                first = pa_s.firings.index(src)
                last = len(pa_d.firings) - 1 - pa_d.firings[::-1].index(dst)
                copies = [edge_name(cnn.name, src, dst)]
                lives = [{ps: set(range(first, len(pa_s.firings))), pd: set(range(last + 1))}]
            elements = rows * shape[0] * shape[1] * shape[3]
            for name, life in zip(copies, lives):
                edges[name] = {"elements": elements, "rows": rows, "shape": shape}
                uses.append((name, elements, life))
    if app_pipelines is not None:
        pipelines = [list(g) for g in app_pipelines]
    where, buffers = _share(uses, pipelines, data_bytes, reuse)
    for name, e in edges.items():
        e["buffer"] = where[name]
    return {"app": "", "name": "test", "precision": {4: "fp32", 2: "fp16"}[data_bytes],
            "data_bytes": data_bytes, "phases": phases, "partitions": partitions,
            "pipelines": pipelines, "firings": firings, "edges": edges, "buffers": buffers,
            "buffer_bytes": sum(b["bytes"] for b in buffers)}


def plan_for_app(app, mode: str, reuse: bool = True) -> dict:
    """A plan for an Application with its own partitions and pipelines; mode "whole" or
    "all_parts" for every CNN. Data width from the app's precision (fp32 or fp16 data)."""
    from csdf.parts import all_parts
    phases = {n: (all_parts(c) if mode == "all_parts" else {l: 1 for l in c.order()})
              for n, c in app.cnns.items()}
    parts = {}
    for p in app.partitions:
        cnn = app.cnns[p.cnn]
        order = cnn.order()
        lo, hi = order.index(p.layers[0]), order.index(p.layers[-1])
        layers = order[lo:hi + 1] if len(p.layers) == 2 and hi > lo else list(p.layers)
        parts.setdefault(p.cnn, []).append((p.name, layers))
    return make_plan(list(app.cnns.values()), phases, reuse=reuse,
                     data_bytes=app.precision.data_bytes, app_parts=parts,
                     app_pipelines=[list(g) for g in app.pipelines])
