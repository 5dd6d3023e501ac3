"""A QDQ model's quantization points inside what the import fuses (SiLU, the gates of
squeeze-excitation blocks, HardSwish as a node or by parts) are kept by the layer they fall
in, with the model's own scales: every QuantizeLinear of the model is a layer's output or a
point kept inside a layer, and the layers are those of the fp32 network."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper as nh

from csdf.onnx_import import load_onnx
from onnx_cases import qdq_blocks, qdq_export, qdq_opaque

pytest.importorskip("onnxruntime.quantization")


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("qdq_points")
    fp32 = qdq_blocks(folder / "net.onnx")
    return fp32, qdq_export(fp32, folder / "net.qdq.onnx")


def _quantize_nodes(path: Path) -> dict[str, tuple[float, int]]:
    """Each activation QuantizeLinear of the model: its fp32 input -> (scale, zero point)."""
    model = onnx.load(str(path))
    consts = {t.name: nh.to_array(t) for t in model.graph.initializer}
    return {n.input[0]: (float(consts[n.input[1]]), int(consts[n.input[2]]))
            for n in model.graph.node if n.op_type == "QuantizeLinear" and n.input[0] not in consts}


def test_the_layers_are_those_the_fp32_network_fuses_to(models):
    """All but a Relu before a QuantizeLinear, which quantize_static removes (the stored
    range, from 0 up, clamps as the Relu did)."""
    fp32, qdq = (load_onnx(p, "net") for p in models)

    def acts(layer, drop=()):
        return [a for a in layer.hyper.get("activation", []) if a not in drop] or None
    assert [(l.name, l.op, acts(l), l.inputs) for l in qdq.layers()] == \
        [(l.name, l.op, acts(l, ("Relu",)), l.inputs) for l in fp32.layers()]
    assert {a for l in qdq.layers() for a in l.hyper.get("activation", [])} == \
        {"Swish", "Sigmoid", "HardSwish", "HardSigmoid"}
    assert not qdq.quantized.apart


def test_every_quantize_node_is_a_layer_output_or_a_point_inside_one(models):
    qdq = load_onnx(models[1], "net")
    found = qdq.quantized
    want = Counter(_quantize_nodes(models[1]).values())
    kept = Counter((s.scale[0], s.zero_point[0]) for s in [*found.activations.values(), *found.inner.values()])
    assert kept == want and len(found.inner) > 0 and found.unkept == ()


def test_each_point_sits_where_the_fused_activation_reads_it(models):
    """act0: the layer's main node's output, which its first activation reads; gate0: the
    Sigmoid or HardSigmoid output a Swish or HardSwish by parts multiplies with; each with
    the scale of the model's QuantizeLinear on that tensor."""
    qdq = load_onnx(models[1], "net")
    points = _quantize_nodes(models[1])
    nodes = {n.name: n for n in onnx.load(str(models[0])).graph.node}
    readers: dict[str, list] = {}
    for n in nodes.values():
        for t in n.input:
            readers.setdefault(t, []).append(n)
    expected = {}
    for layer in qdq.layers():
        acts = layer.hyper.get("activation", [])
        if not acts:
            continue
        main = nodes[layer.onnx_nodes[0]].output[0]
        if main in points:
            expected[f"{layer.name}@act0"] = points[main]
        gates = [n.output[0] for n in readers[main] if n.op_type in ("Sigmoid", "HardSigmoid")]
        if acts[0] in ("Swish", "HardSwish") and gates:
            expected[f"{layer.name}@gate0"] = points[gates[0]]
    assert {k: (s.scale[0], s.zero_point[0]) for k, s in qdq.quantized.inner.items()} == expected
    by_form = {tuple(l.hyper.get("activation", [])) + (len(l.onnx_nodes),): qdq.quantized.points_of(l.name)
               for l in qdq.layers()}
    assert by_form[("Swish", 2)] == ("act0", "gate0")         # x * Sigmoid(x)
    assert by_form[("Sigmoid", 2)] == ("act0",)                # a squeeze-excitation gate
    assert by_form[("HardSigmoid", 2)] == ("act0",)
    hardswish = [qdq.quantized.points_of(l.name) for l in qdq.layers() if l.hyper.get("activation") == ["HardSwish"]]
    assert sorted(hardswish) == [("act0",), ("act0", "gate0")]  # the node; x * HardSigmoid(x)


def test_a_point_between_the_nodes_of_an_opaque_layer_is_kept_by_its_tensor(tmp_path):
    qdq = load_onnx(qdq_opaque(tmp_path), "net")
    assert [(l.name, l.op) for l in qdq.layers()] == [("input", "Input"), ("Conv_1", "Conv"),
                                                      ("Erf_3", "Opaque"), ("Conv_4", "Conv")]
    (name, scale), = qdq.quantized.inner.items()
    assert name == "Erf_3@/Erf_2/out" and scale.scale == (float(np.float32(1 / 127)),) and scale.zero_point == (0,)
    assert qdq.quantized.unkept == () and qdq.quantized.points_of("Erf_3") == ("/Erf_2/out",)
