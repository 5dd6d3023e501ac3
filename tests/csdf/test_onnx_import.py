"""ONNX import: shapes, fusion as TensorRT does it, BN folding checked numerically with ONNX
Runtime (the original model against a model rebuilt from the imported layers), and errors."""
from __future__ import annotations

from math import prod
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from csdf.onnx_import import load_onnx
from sdf3.errors import InputError


def _init(name, arr):
    return nh.from_array(np.asarray(arr, dtype=np.float32), name)


def _save(path, nodes, inits, in_shape, out_name="out", out_shape=None, opset=13):
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("input", T.FLOAT, in_shape)],
                         [h.make_tensor_value_info(out_name, T.FLOAT, out_shape)], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def _run(model, x):
    sess = ort.InferenceSession(model.SerializeToString() if isinstance(model, onnx.ModelProto)
                                else str(model), providers=["CPUExecutionProvider"])
    return sess.run(None, {sess.get_inputs()[0].name: x})[0]


def _se_net(path: Path, seed: int = 0) -> Path:
    """A MobileNetV2/EfficientNet-like block: conv+BN+Relu, depthwise conv+BN+Relu6 (Clip),
    pointwise conv, residual Add, squeeze-excite with Swish and Sigmoid, Mul, two pools,
    Concat, GAP, Flatten, Dropout, Gemm, Softmax. Input [N, 3, 8, 8] with a symbolic N."""
    rng = np.random.default_rng(seed)
    inits, nodes = [], []

    def conv(name, x, cin, cout, k, group=1, bias=True):
        inits.append(_init(name + "_W", rng.standard_normal((cout, cin // group, k, k)) * 0.3))
        ins = [x, name + "_W"]
        if bias:
            inits.append(_init(name + "_B", rng.standard_normal(cout) * 0.1))
            ins.append(name + "_B")
        nodes.append(h.make_node("Conv", ins, [name], name=name, group=group,
                                 pads=[k // 2] * 4, kernel_shape=[k, k]))
        return name

    def bn(name, x, c):
        for s, v in (("g", rng.uniform(0.5, 1.5, c)), ("b", rng.standard_normal(c) * 0.1),
                     ("m", rng.standard_normal(c) * 0.1), ("v", rng.uniform(0.5, 2, c))):
            inits.append(_init(f"{name}_{s}", v))
        nodes.append(h.make_node("BatchNormalization", [x] + [f"{name}_{s}" for s in "gbmv"],
                                 [name], name=name, epsilon=1e-3))
        return name

    x = bn("bn1", conv("c1", "input", 3, 8, 3, bias=False), 8)
    nodes.append(h.make_node("Relu", [x], ["r1"], name="r1"))
    y = bn("bn2", conv("dw", "r1", 8, 8, 3, group=8), 8)
    inits += [_init("lo", 0.0), _init("hi", 6.0)]
    nodes.append(h.make_node("Clip", [y, "lo", "hi"], ["clip"], name="clip"))
    conv("pw", "clip", 8, 8, 1)
    nodes.append(h.make_node("Add", ["r1", "pw"], ["add"], name="add"))
    nodes.append(h.make_node("GlobalAveragePool", ["add"], ["se_gap"], name="se_gap"))
    conv("se1", "se_gap", 8, 2, 1)
    nodes.append(h.make_node("Sigmoid", ["se1"], ["se1_sig"], name="se1_sig"))
    nodes.append(h.make_node("Mul", ["se1", "se1_sig"], ["se1_swish"], name="se1_swish"))
    conv("se2", "se1_swish", 2, 8, 1)
    nodes.append(h.make_node("Sigmoid", ["se2"], ["se2_sig"], name="se2_sig"))
    nodes.append(h.make_node("Mul", ["add", "se2_sig"], ["scale"], name="scale"))
    nodes.append(h.make_node("MaxPool", ["scale"], ["mp"], name="mp", kernel_shape=[2, 2], strides=[2, 2]))
    nodes.append(h.make_node("AveragePool", ["scale"], ["ap"], name="ap", kernel_shape=[2, 2], strides=[2, 2]))
    nodes.append(h.make_node("Concat", ["mp", "ap"], ["cat"], name="cat", axis=1))
    nodes.append(h.make_node("GlobalAveragePool", ["cat"], ["gap"], name="gap"))
    nodes.append(h.make_node("Flatten", ["gap"], ["flat"], name="flat", axis=1))
    nodes.append(h.make_node("Dropout", ["flat"], ["drop"], name="drop"))
    inits += [_init("fc_W", rng.standard_normal((5, 16)) * 0.3), _init("fc_B", rng.standard_normal(5) * 0.1)]
    nodes.append(h.make_node("Gemm", ["drop", "fc_W", "fc_B"], ["fc"], name="fc", transB=1))
    nodes.append(h.make_node("Softmax", ["fc"], ["out"], name="prob", axis=1))
    return _save(path, nodes, inits, ["N", 3, 8, 8], out_shape=["N", 5])


def _rebuild(cnn) -> onnx.ModelProto:
    """An ONNX model written from the imported layers alone (independent of the importer):
    if folding or fusion lost anything, its output differs from the original model's."""
    nodes, inits = [], []
    for layer in cnn.layers():
        name, hy = layer.name, layer.hyper
        if layer.op == "Input":
            continue
        ins = list(layer.inputs)
        for key, arr in layer.params.items():
            inits.append(nh.from_array(arr, f"{name}_{key}"))
        out = name + "_pre" if hy.get("activation") else name
        if layer.op == "Conv":
            nodes.append(h.make_node("Conv", ins + [f"{name}_W"] + ([f"{name}_B"] if "B" in layer.params else []),
                                     [out], kernel_shape=hy["kernel_shape"], strides=hy["strides"],
                                     pads=hy["pads"], dilations=hy["dilations"], group=hy["group"]))
        elif layer.op == "Gemm":
            nodes.append(h.make_node("Gemm", ins + [f"{name}_W", f"{name}_B"], [out], transB=1))
        elif layer.op in ("MaxPool", "AveragePool"):
            nodes.append(h.make_node(layer.op, ins, [out], kernel_shape=hy["kernel_shape"],
                                     strides=hy["strides"], pads=hy["pads"]))
        elif layer.op == "BatchNormalization":   # inference form: x * scale + B per channel
            inits[-2:] = [nh.from_array(layer.params[k].reshape(1, -1, 1, 1), f"{name}_{k}") for k in ("scale", "B")]
            nodes += [h.make_node("Mul", ins + [f"{name}_scale"], [out + "_s"]),
                      h.make_node("Add", [out + "_s", f"{name}_B"], [out])]
        elif layer.op in ("Concat", "Flatten", "Softmax"):
            nodes.append(h.make_node(layer.op, ins, [out], axis=hy["axis"]))
        else:
            nodes.append(h.make_node(layer.op, ins, [out]))
        for i, act in enumerate(hy.get("activation", [])):
            src, dst = out, (name if i == len(hy["activation"]) - 1 else f"{name}_a{i}")
            if act == "Swish":
                nodes += [h.make_node("Sigmoid", [src], [dst + "_s"]), h.make_node("Mul", [src, dst + "_s"], [dst])]
            elif act == "Clip":
                inits += [_init(dst + "_lo", hy["clip_min"]), _init(dst + "_hi", hy["clip_max"])]
                nodes.append(h.make_node("Clip", [src, dst + "_lo", dst + "_hi"], [dst]))
            else:
                nodes.append(h.make_node(act, [src], [dst]))
            out = dst
        if layer.op == "Clip":   # unfused Relu6
            inits += [_init(name + "_lo", hy["clip_min"]), _init(name + "_hi", hy["clip_max"])]
            nodes[-1].input.extend([name + "_lo", name + "_hi"])
    shape = list(cnn.layer(cnn.order()[0]).output_shape)
    graph = h.make_graph(nodes, "re", [h.make_tensor_value_info(cnn.order()[0], T.FLOAT, shape)],
                         [h.make_tensor_value_info(cnn.outputs[0], T.FLOAT, None)], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def test_fused_layers_shapes_and_activations(tmp_path):
    cnn = load_onnx(_se_net(tmp_path / "se.onnx"), "se")
    ops = [(n, cnn.layer(n).op, cnn.layer(n).hyper.get("activation", [])) for n in cnn.order()]
    assert ops == [("input", "Input", []), ("c1", "Conv", ["Relu"]), ("dw", "Conv", ["Clip"]),
                   ("pw", "Conv", []), ("add", "Add", []), ("se_gap", "GlobalAveragePool", []),
                   ("se1", "Conv", ["Swish"]), ("se2", "Conv", ["Sigmoid"]), ("scale", "Mul", []),
                   ("mp", "MaxPool", []), ("ap", "AveragePool", []), ("cat", "Concat", []),
                   ("gap", "GlobalAveragePool", []), ("flat", "Flatten", []), ("fc", "Gemm", []),
                   ("prob", "Softmax", [])]
    assert cnn.layer("input").output_shape == (1, 3, 8, 8)     # symbolic batch fixed to 1
    assert cnn.layer("dw").hyper["group"] == 8
    assert cnn.layer("dw").hyper["clip_min"] == 0.0 and cnn.layer("dw").hyper["clip_max"] == 6.0
    assert cnn.edge_shape("scale", "mp") == (1, 8, 8, 8)
    assert cnn.edge_shape("mp", "cat") == (1, 8, 4, 4)
    assert cnn.layer("cat").output_shape == (1, 16, 4, 4)
    assert cnn.layer("fc").output_shape == (1, 5, 1, 1)          # 2-D [N, C] padded to 4-D
    assert set(cnn.graph.predecessors("add")) == {"c1", "pw"}    # the residual edge
    assert set(cnn.graph.predecessors("scale")) == {"add", "se2"}
    assert cnn.outputs == ["prob"]
    assert cnn.source.endswith("se.onnx")
    # parameters: folded conv W + B, Gemm W + B; counted independently
    convs = [(8, 3, 3, 3), (8, 1, 3, 3), (8, 8, 1, 1), (2, 8, 1, 1), (8, 2, 1, 1)]
    expected = sum(prod(s) + s[0] for s in convs) + 5 * 16 + 5
    assert cnn.param_count == expected
    # before folding: c1 has no bias, two BNs of 4 x 8 values, and the Clip bounds
    assert cnn.original_param_count == expected - 8 + 2 * 4 * 8 + 2
    # edges: one per (producer, consumer) pair
    assert len(cnn.edges()) == 18
    assert cnn.edge_elements_total == sum(prod(cnn.edge_shape(u, v)) for u, v in cnn.graph.edges)


def test_fused_model_reproduces_original_outputs(tmp_path):
    path = _se_net(tmp_path / "se.onnx")
    cnn = load_onnx(path, "se")
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(_run(_rebuild(cnn), x), _run(path, x), rtol=1e-4, atol=1e-5)


def test_unfused_keeps_every_onnx_node(tmp_path):
    path = _se_net(tmp_path / "se.onnx")
    cnn = load_onnx(path, "se", fused=False)
    model = onnx.load(str(path))
    kept = [n.name for n in model.graph.node if n.op_type != "Dropout"]
    assert cnn.order()[1:] == kept
    bn = cnn.layer("bn1")
    assert bn.op == "BatchNormalization" and bn.params.keys() == {"scale", "B"}   # 2 per channel
    assert bn.param_count == 2 * 8
    assert cnn.layer("c1").params.keys() == {"W"}
    assert cnn.layer("clip").hyper["clip_max"] == 6.0
    x = np.random.default_rng(2).standard_normal((1, 3, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(_run(_rebuild(cnn), x), _run(path, x), rtol=1e-4, atol=1e-5)


def test_bn_folding_numerically(tmp_path, tiny_onnx):
    """Folded W, B in a bare conv reproduce conv + BN of the original (ONNX Runtime)."""
    cnn = load_onnx(tiny_onnx, "tiny")
    conv = cnn.layer("conv1")
    assert conv.hyper["activation"] == ["Relu"] and conv.onnx_nodes == ["conv1", "bn1", "relu1"]
    original = onnx.load(str(tiny_onnx))
    del original.graph.node[3:]                      # keep conv1, bn1, relu1
    original.graph.output[0].CopyFrom(h.make_tensor_value_info("r1", T.FLOAT, [1, 4, 8, 8]))
    folded = _save(tmp_path / "folded.onnx",
                   [h.make_node("Conv", ["input", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
                    h.make_node("Relu", ["c"], ["out"])],
                   [nh.from_array(conv.params["W"], "W"), nh.from_array(conv.params["B"], "B")],
                   [1, 3, 8, 8])
    x = np.random.default_rng(3).standard_normal((1, 3, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(_run(folded, x), _run(original, x), rtol=1e-5, atol=1e-5)
    # and by hand: B' = (0 - mean) * gamma / sqrt(var + eps) + beta
    init = {i.name: nh.to_array(i).astype(np.float64) for i in original.graph.initializer}
    scale = init["g"] / np.sqrt(init["v"] + 1e-5)
    np.testing.assert_allclose(conv.params["B"], -init["m"] * scale + init["b"], rtol=1e-6)


def test_gemm_forms_normalised(tmp_path):
    """Gemm with transB=0, alpha, beta; MatMul + Add: all become W [out, in] and B."""
    rng = np.random.default_rng(4)
    wa, c = rng.standard_normal((6, 3)), rng.standard_normal(3)
    wm, bm = rng.standard_normal((3, 4)), rng.standard_normal(4)
    path = _save(tmp_path / "g.onnx",
                 [h.make_node("Gemm", ["input", "wa", "c"], ["g"], name="g", alpha=0.5, beta=2.0),
                  h.make_node("MatMul", ["g", "wm"], ["mm"], name="mm"),
                  h.make_node("Add", ["mm", "bm"], ["out"], name="bias")],
                 [_init("wa", wa), _init("c", c), _init("wm", wm), _init("bm", bm)], [1, 6], out_shape=[1, 4])
    cnn = load_onnx(path, "g")
    assert cnn.order() == ["input", "g", "mm"]
    g, mm = cnn.layer("g"), cnn.layer("mm")
    assert g.params["W"].shape == (3, 6) and mm.params["W"].shape == (4, 3)
    x = rng.standard_normal((1, 6)).astype(np.float32)
    y = x @ g.params["W"].T + g.params["B"]
    y = y @ mm.params["W"].T + mm.params["B"]
    np.testing.assert_allclose(y, _run(path, x), rtol=1e-5, atol=1e-5)
    unfused = load_onnx(path, "g", fused=False)
    assert unfused.order() == ["input", "g", "mm", "bias"]
    assert unfused.layer("bias").params["C"].shape == (1, 4, 1, 1)   # [N, C] aligned, padded to 4-D


def test_auto_pad_pad_reshape_and_names(tmp_path):
    """SAME_UPPER with stride 2 on an odd height, a Pad node, Reshape to [N, -1], and node
    names with dots and slashes."""
    rng = np.random.default_rng(5)
    path = _save(tmp_path / "p.onnx",
                 [h.make_node("Pad", ["input", "pads"], ["p"], name="features.0/pad"),
                  h.make_node("Conv", ["p", "w"], ["c"], name="features.1/conv", auto_pad="SAME_UPPER",
                              strides=[2, 2], kernel_shape=[4, 4]),
                  h.make_node("Reshape", ["c", "shape"], ["out"], name="reshape")],
                 [nh.from_array(np.array([0, 0, 1, 2, 0, 0, 1, 2], np.int64), "pads"),
                  _init("w", rng.standard_normal((2, 3, 4, 4))),
                  nh.from_array(np.array([1, -1], np.int64), "shape")], [1, 3, 7, 6], out_shape=[1, 50])
    cnn = load_onnx(path, "p")
    assert cnn.order() == ["input", "features_0_pad", "features_1_conv", "reshape"]
    assert cnn.layer("features_0_pad").output_shape == (1, 3, 9, 10)
    assert cnn.layer("features_0_pad").hyper["pads"] == [0, 0, 1, 2, 0, 0, 1, 2]
    conv = cnn.layer("features_1_conv")
    # out = ceil(9/2) = 5, ceil(10/2) = 5; total pad = (5-1)*2 + 4 - 9 = 3 (H), 2 (W); extra at the end
    assert conv.output_shape == (1, 2, 5, 5)
    assert conv.hyper["pads"] == [1, 1, 2, 1]
    assert cnn.layer("reshape").output_shape == (1, 50, 1, 1)


def test_unknown_operator_is_an_opaque_layer(tmp_path):
    """LRN is not modelled: it becomes one opaque layer holding the node verbatim, run whole
    (LRN mixes neighbouring channels only, but it is not a recognised per-pixel pattern)."""
    path = _save(tmp_path / "u.onnx", [h.make_node("LRN", ["input"], ["out"], name="norm1", size=3)],
                 [], [1, 3, 4, 4], out_shape=[1, 3, 4, 4])
    cnn = load_onnx(path, "u")
    layer = cnn.layer("norm1")
    assert layer.op == "Opaque" and layer.hyper["onnx_ops"] == ["LRN"] and not layer.hyper["per_pixel"]
    assert layer.output_shape == (1, 3, 4, 4) and cnn.outputs == ["norm1"]


def test_refusals_name_the_node(tmp_path):
    """What cannot run at all is refused with one line: a rank-5 tensor leaving the model's
    layers, an unresolved dynamic shape."""
    path = _save(tmp_path / "r.onnx", [h.make_node("Reshape", ["input", "s"], ["out"], name="to5d")],
                 [nh.from_array(np.array([1, 3, 2, 2, 4], np.int64), "s")], [1, 3, 4, 4], out_shape=[1, 3, 2, 2, 4])
    with pytest.raises(InputError, match=r"tensor 'out' .*rank 5 > 4, expected at most 4-D") as err:
        load_onnx(path, "r")
    assert "\n" not in str(err.value)
    dyn = _save(tmp_path / "d.onnx", [h.make_node("Reshape", ["input", "s"], ["out"], name="dyn")],
                [], [1, 3, 4, 4], out_shape=None)
    g = onnx.load(str(dyn))
    g.graph.input.append(h.make_tensor_value_info("s", T.INT64, [2]))
    onnx.save(g, str(dyn))
    with pytest.raises(InputError, match="graph input 's': expected one graph input"):
        load_onnx(dyn, "d")


def test_missing_and_non_onnx_files(tmp_path):
    with pytest.raises(InputError, match="not found"):
        load_onnx(tmp_path / "nope.onnx", "x")
    bad = tmp_path / "bad.onnx"
    bad.write_text("name: not a model\n")
    with pytest.raises(InputError, match="not an ONNX model"):
        load_onnx(bad, "x")


@pytest.mark.parametrize("name", ["mobilenet_v2", "efficientnet_b0"])
def test_zoo_models_fused_import_is_faithful(name):
    """Real architectures (BN folding, Relu6, Swish, squeeze-excite): the model rebuilt from
    the fused layers gives the original's outputs."""
    zoo = pytest.importorskip("csdf.zoo")
    path = zoo.model_path(name)
    cnn = load_onnx(path, name)
    assert cnn.param_count < cnn.original_param_count      # BN parameters folded away
    x = np.random.default_rng(6).standard_normal(cnn.layer("input").output_shape).astype(np.float32)
    np.testing.assert_allclose(_run(_rebuild(cnn), x), _run(path, x), rtol=1e-3, atol=1e-5)
