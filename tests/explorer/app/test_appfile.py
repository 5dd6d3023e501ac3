"""Application files: the worked example against the paper's Table 1, partitions, J,
schedules, overrides, and one clear InputError for each bad input of DESIGN.md."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from conftest import data_path
from explorer.app.model import PRECISIONS
from explorer.app.appfile import load_app
from sdf3.errors import InputError

ROOT = Path(__file__).resolve().parents[3]
APPS = ROOT / "apps"


def _write(tmp_path: Path, doc: dict, name: str = "app.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _tiny_app(tmp_path: Path, tiny_onnx: Path, **extra) -> dict:
    if tiny_onnx != tmp_path / "tiny.onnx":
        shutil.copy(tiny_onnx, tmp_path / "tiny.onnx")
    cnn = {"name": "tiny", "model": "tiny.onnx", "fps": 30}
    cnn.update(extra.pop("cnn", {}))
    return {"name": "t", "precision": "fp16", "memory": "1MB", "cnns": [cnn], **extra}


# ---- the worked example ------------------------------------------------------------------
def test_worked_example_matches_table1():
    app = load_app(APPS / "worked_example.yaml")
    assert [p.name for p in app.partitions] == ["CNN1.P1", "CNN2.P2", "CNN2.P3"]
    assert app.pipelines == [["CNN1.P1"], ["CNN2.P2", "CNN2.P3"]]
    assert app.schedules == {"CNN1.P1": ["l1", "l2", "l3", "l4", "l5"],
                             "CNN2.P2": ["l1", "l2"], "CNN2.P3": ["l3", "l4"]}
    assert app.precision == PRECISIONS["fp32"]
    sizes = {}
    for cnn in app.cnns.values():
        for u, v in cnn.edges():
            sizes[f"{cnn.name}.e{u[1:]}{v[1:]}"] = cnn.edge_elements(u, v)
    assert sizes["CNN2.e23"] == 6272 and app.cnns["CNN2"].edge_shape("l2", "l3") == (1, 8, 28, 28)
    assert sizes["CNN2.e34"] == 10
    # Table 1 from the paper's data file: every buffer's edge has that size; e23(1), e23(2)
    # are the two copies of CNN2's edge that crosses P2 -> P3.
    table1 = yaml.safe_load(data_path("paper", "worked_example.yaml").read_text())["table1_naive"]
    for row in table1:
        (edge,) = row["edges"]
        assert sizes[edge.split("(")[0]] == row["size"], edge
    crossing = sum(app.cnns[p.cnn].edge_elements(u, v) for p in app.partitions
                   for u, v in app.cnns[p.cnn].graph.out_edges(p.layers) if v not in p.layers)
    assert sum(sizes.values()) + crossing == 59658
    # Section 2.1's layer l2: a 5x5 'same' conv over the [1, 3, 32, 32] input
    assert app.cnns["CNN1"].layer("l2").hyper["kernel_shape"] == [5, 5]
    assert app.cnns["CNN1"].layer("l1").op == "Input"
    assert app.cnns["CNN1"].outputs == ["l5"]


# ---- ONNX-backed apps --------------------------------------------------------------------
def test_default_partition_and_overrides(tmp_path, tiny_onnx):
    path = _write(tmp_path, _tiny_app(tmp_path, tiny_onnx))
    app = load_app(path)
    cnn = app.cnns["tiny"]
    assert [(p.name, p.layers, p.processor) for p in app.partitions] == [("tiny.all", cnn.order(), "gpu")]
    assert app.pipelines == [["tiny.all"]]
    assert app.memory == 2**20 and app.fps == {"tiny": 30.0}
    assert app.precision.data_bytes == 2 and app.precision.par_bytes == 2
    assert cnn.source == str(tmp_path / "tiny.onnx")
    assert app.path == path.resolve()
    over = load_app(path, mem="0.5KB", fps="tiny=12.5", precision="mixed")
    assert over.memory == 512 and over.fps == {"tiny": 12.5}
    assert (over.precision.data_bytes, over.precision.par_bytes) == (2, 1)
    assert load_app(path, fps="7").fps == {"tiny": 7.0}


def test_partitions_and_pipeline(tmp_path, tiny_onnx):
    parts = [{"name": "tail", "layers": ["gap", "fc"], "processor": "cpu"},
             {"name": "head", "layers": ["input", "conv2"]}]
    doc = _tiny_app(tmp_path, tiny_onnx, cnn={"partitions": parts},
                    pipelines=[["tiny.head", "tiny.tail"]],
                    schedules={"tiny.tail": ["gap", "flat", "fc"]})
    app = load_app(_write(tmp_path, doc))
    assert [(p.name, p.layers, p.processor) for p in app.partitions] == [
        ("tiny.head", ["input", "conv1", "conv2"], "gpu"), ("tiny.tail", ["gap", "flat", "fc"], "cpu")]
    assert app.pipelines == [["tiny.head", "tiny.tail"]]
    assert app.pipeline_of("tiny.tail") == ["tiny.head", "tiny.tail"]


BAD = [
    # (change to the document, expected message fragment)
    (lambda d: d.update(colour="red"), r"app.yaml: colour: unknown key"),
    (lambda d: d["cnns"][0].update(weights="x"), r"cnns\[0\].weights: unknown key"),
    (lambda d: d["cnns"][0].update(partitions=[{"name": "a", "layers": ["input", "fc"], "cpu": 1}]),
     r"cnns\[0\].partitions\[0\].cpu: unknown key"),
    (lambda d: d["cnns"][0].update(partitions=[{"name": "a", "layers": ["input", "foo"]}]),
     r"app.yaml: cnns\[0\].partitions\[0\].layers: layer 'foo' is not in model tiny"),
    (lambda d: d["cnns"][0].update(partitions=[{"name": "a", "layers": ["input", "conv2"]},
                                               {"name": "b", "layers": ["conv2", "fc"]}]),
     r"partitions\[1\].layers: partition tiny.b overlaps another at layer 'conv2'"),
    (lambda d: d["cnns"][0].update(partitions=[{"name": "a", "layers": ["input", "conv1"]},
                                               {"name": "b", "layers": ["gap", "fc"]}]),
     r"cnns\[0\].partitions: layers 'conv2'..'conv2' of tiny are in no partition"),
    (lambda d: d["cnns"][0].update(partitions=[{"name": "a", "layers": ["input", "gap"]}]),
     r"layers 'flat'..'fc' of tiny are in no partition"),
    (lambda d: d["cnns"][0].update(partitions=[{"name": "a", "layers": ["fc", "input"]}]),
     r"'fc' comes after 'input'"),
    (lambda d: d.update(pipelines=[["tiny.all", "tiny.nope"]]), r"pipelines\[0\]: unknown partition 'tiny.nope'"),
    (lambda d: d.update(pipelines=[["tiny.all"], ["tiny.all"]]), r"pipelines\[1\]: partition 'tiny.all' is already"),
    (lambda d: d["cnns"][0].update(model="missing.onnx"), r"cnns\[0\].model: model file 'missing.onnx' not found"),
    (lambda d: d["cnns"][0].update(model="app.yaml"), r"cnns\[0\].model: .*not an ONNX model"),
    (lambda d: d["cnns"][0].update(model="zoo:alexnet"), r"cnns\[0\].model: .*alexnet"),
    (lambda d: d.update(memory="-8MB"), r"app.yaml: memory: memory must not be negative"),
    (lambda d: d.update(memory="eight MB"), r"app.yaml: memory: expected a memory figure"),
    (lambda d: d.update(memory="8kB"), r"unknown memory unit 'kB'"),
    (lambda d: d.update(precision="fp64"), r"precision: expected one of fp32, fp16, mixed, int8"),
    (lambda d: d.update(prefer="speed"), r"app.yaml: prefer: expected one of memory, fps, got 'speed'"),
    (lambda d: d["cnns"][0].update(fps=-1), r"cnns\[0\].fps: throughput must be a number >= 0"),
    (lambda d: d.update(schedules={"tiny.all": ["input", "conv2", "conv1", "gap", "flat", "fc"]}),
     r"schedules.tiny.all: layer 'conv2' fires before its producer 'conv1'"),
    (lambda d: d.update(schedules={"tiny.all": ["input", "conv1"]}), r"layer 'conv2' of the partition never fires"),
    (lambda d: d.update(schedules={"tiny.x": ["input"]}), r"schedules.tiny.x: unknown partition"),
    (lambda d: d["cnns"].append(dict(d["cnns"][0])), r"cnns\[1\].name: CNN 'tiny' is listed twice"),
    (lambda d: d.update(search={"population": 0}), r"search.population: expected a positive integer"),
    (lambda d: d.update(search={"mutation": 2.0}), r"search.mutation: expected a probability"),
    (lambda d: d.update(search={"workers": -1}), r"search.workers: expected a non-negative integer"),
]


@pytest.mark.parametrize("change, message", BAD)
def test_bad_input_one_clear_line(tmp_path, tiny_onnx, change, message):
    doc = _tiny_app(tmp_path, tiny_onnx)
    change(doc)
    with pytest.raises(InputError, match=message) as info:
        load_app(_write(tmp_path, doc))
    assert "\n" not in str(info.value)


def test_bad_overrides_and_files(tmp_path, tiny_onnx):
    path = _write(tmp_path, _tiny_app(tmp_path, tiny_onnx))
    with pytest.raises(InputError, match="--fps: unknown CNN 'other'"):
        load_app(path, fps="other=3")
    with pytest.raises(InputError, match="--mem: memory must not be negative"):
        load_app(path, mem="-1")
    with pytest.raises(InputError, match="not found"):
        load_app(tmp_path / "none.yaml")
    (tmp_path / "broken.yaml").write_text("cnns: [\n")
    with pytest.raises(InputError, match="broken.yaml: not valid YAML"):
        load_app(tmp_path / "broken.yaml")


def test_unrunnable_model_named(tmp_path):
    """A model that cannot run as layers (here a rank-5 output) is refused with the app key,
    the file and the tensor; an unknown operator (Tanh is not modelled) is an opaque layer."""
    import numpy as np
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    graph = h.make_graph([h.make_node("Tanh", ["input"], ["t"], name="squash"),
                          h.make_node("Unsqueeze", ["t", "ax"], ["out"], name="five")], "g",
                         [h.make_tensor_value_info("input", T.FLOAT, [1, 3, 4, 4])],
                         [h.make_tensor_value_info("out", T.FLOAT, [1, 3, 4, 4, 1])],
                         [onnx.numpy_helper.from_array(np.array([4], np.int64), "ax")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    onnx.save(model, str(tmp_path / "m.onnx"))
    path = _write(tmp_path, {"cnns": [{"name": "m", "model": "m.onnx"}]})
    with pytest.raises(InputError, match=r"cnns\[0\].model: .*m.onnx: tensor 'out' .*rank 5 > 4"):
        load_app(path)
    model.graph.node.pop()
    model.graph.output[0].CopyFrom(h.make_tensor_value_info("t", T.FLOAT, [1, 3, 4, 4]))
    onnx.save(model, str(tmp_path / "m.onnx"))
    assert load_app(path).cnns["m"].layer("squash").op == "Opaque"


def test_synthetic_errors(tmp_path):
    base = {"layers": ["a", "b", "c"], "edges": {"a->b": [1, 2, 4, 4], "b->c": [1, 2, 4, 4]}}
    for change, message in [
        ({"edges": {"a->b": [1, 2, 4], "b->c": [1, 2, 4, 4]}}, r"edges.a->b: expected a shape \[N, C, H, W\]"),
        ({"edges": {"a->x": [1, 2, 4, 4]}}, r"edges.a->x: expected 'src->dst' naming two listed layers"),
        ({"edges": {"a->b": [1, 2, 4, 4], "a->c": [1, 3, 4, 4], "b->c": [1, 2, 4, 4]}},
         "layer a has outgoing edges of different shapes"),
        ({"colour": 1}, "unknown key 'colour'"),
    ]:
        spec = {**base, **change}
        path = _write(tmp_path, {"cnns": [{"name": "s", "model": {"synthetic": spec}}]})
        with pytest.raises(InputError, match=r"app.yaml: cnns\[0\].model.synthetic.*" + message):
            load_app(path)


# ---- the shipped apps --------------------------------------------------------------------
@pytest.mark.parametrize("path", sorted(APPS.glob("*.yaml")), ids=lambda p: p.stem)
def test_shipped_apps_load(path):
    app = load_app(path)
    assert app.partitions and all(sum(len(p.layers) for p in app.partitions_of(c)) == len(app.cnns[c].graph)
                                  for c in app.cnns)
    assert sorted(n for group in app.pipelines for n in group) == sorted(p.name for p in app.partitions)


@pytest.mark.parametrize("stem", ["table12_app3_mobilenet_v2_pipelined", "table12_app4_efficientnet_b0_pipelined"])
def test_pipelined_split_balanced(stem):
    """Head and tail carry roughly equal FLOPs (explorer.throughput.costs) and one edge crosses."""
    from explorer.throughput.costs import layer_cost
    app = load_app(APPS / f"{stem}.yaml")
    (cnn,) = app.cnns.values()
    head, tail = app.partitions
    assert (head.processor, tail.processor) == ("gpu", "cpu")
    flops = {p.name: sum(layer_cost(cnn, n).flops for n in p.layers) for p in (head, tail)}
    share = flops[head.name] / sum(flops.values())
    assert 0.35 < share < 0.65
    crossing = [(u, v) for u, v in cnn.edges() if u in head.layers and v in tail.layers]
    assert len(crossing) == 1


def test_table13_requirements():
    """Table 13's constraints as the paper states them (MB = 2^20 bytes)."""
    paper = yaml.safe_load(data_path("paper", "table13.yaml").read_text())["apps"]
    files = {"MobileNet-sequential": "table13_mobilenet_sequential", "ResNet-sequential": "table13_resnet_sequential",
             "MobileNet-pipelined": "table13_mobilenet_pipelined", "Multi-CNN": "table13_multi_cnn"}
    for key, stem in files.items():
        app = load_app(APPS / f"{stem}.yaml")
        assert app.memory == paper[key]["memory_mb"] * 2**20
        assert set(app.fps.values()) == {paper[key]["fps"]}
        assert len(app.cnns) == len(paper[key]["cnns"])
    assert load_app(APPS / "table13_mobilenet_sequential.yaml").precision.name == "fp16"


def test_prefer_from_the_file_and_the_command_line_wins(tmp_path, tiny_onnx):
    doc = _tiny_app(tmp_path, tiny_onnx)
    assert load_app(_write(tmp_path, doc)).prefer is None
    doc["prefer"] = "memory"
    path = _write(tmp_path, doc)
    assert load_app(path).prefer == "memory" and load_app(path, prefer="fps").prefer == "fps"
