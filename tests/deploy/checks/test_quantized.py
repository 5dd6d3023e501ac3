"""The int8 reference (deploy/checks/quantized.py): QuantizeLinear -> DequantizeLinear on exactly
the tensors a deployment stores, with their scales; every Conv/Gemm weight the deployment's
dequantized(per_channel(W)) (a BatchNorm folded into its conv included); run by ONNX Runtime it
equals a numpy fake-quant computation of the network within the int8 tolerance; a QDQ model is
its own reference; and the int8 verdict's tolerance against damage."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from conftest import write_tiny_onnx
from csdf.onnx_import import load_onnx
from deploy.checks.rounding import SUFFIX
from deploy.checks.quantized import quantized_reference, write_reference
from deploy.quant import calibration
from deploy.quant.weights import dequantized, per_channel
from deploy.run import verdict
from test_calibration import ort_quantized
from test_onnx_qdq import SHAPE, fp32_model


def _setup(tmp_path: Path, make=fp32_model, frames: int = 6):
    path = make(tmp_path / "net.onnx")
    cnn = load_onnx(path, "net")
    shape = next(iter(cnn.input_shapes.values()))
    found, _ = calibration.frames(None, shape, count=frames, seed=7)
    return path, cnn, calibration.activation_scales(path, cnn, found)


def session(model: onnx.ModelProto, fused: bool = True) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    if not fused:
        opts.add_session_config_entry("session.disable_quant_qdq", "1")
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def _consts(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    return {t.name: nh.to_array(t) for t in model.graph.initializer}


def test_the_q_dq_pairs_sit_on_exactly_the_stored_tensors(tmp_path):
    path, cnn, scales = _setup(tmp_path)
    ref = quantized_reference(path, cnn, scales)
    onnx.checker.check_model(ref)
    init = _consts(ref)
    pairs = {}
    for q in ref.graph.node:
        if q.op_type == "QuantizeLinear":
            dq = [n for n in ref.graph.node if n.op_type == "DequantizeLinear" and n.input[0] == q.output[0]]
            assert len(dq) == 1 and list(dq[0].input[1:]) == list(q.input[1:])
            pairs[dq[0].output[0].removesuffix(SUFFIX)] = (float(init[q.input[1]]), int(init[q.input[2]]), init[q.input[2]].dtype)
    layers = {layer.output_tensor: layer.name for layer in cnn.layers()}
    assert set(pairs) == set(layers) == {"input", "r1", "r2", "c3", "a3", "c4", "cat", "output"}
    for tensor, layer in layers.items():
        s = scales.of("net", layer)
        assert pairs[tensor] == (np.float32(s.scale), s.zero_point, np.uint8), (tensor, pairs[tensor], s)
    # everything the model computed before still reads the rounded tensors: the graph's
    # output is the DequantizeLinear's, and no node but the QuantizeLinear reads an exact value
    exact = {q.input[0] for q in ref.graph.node if q.op_type == "QuantizeLinear"}
    readers = [n for n in ref.graph.node if n.op_type != "QuantizeLinear" and set(n.input) & exact]
    assert not readers and [o.name for o in ref.graph.output] == ["output"]


def test_its_weights_are_the_deployment_s(tmp_path):
    """Conv weights verbatim: the ONNX tensor itself is DequantizeLinear(int8, scale) of
    per_channel(W); a conv with a BatchNorm folded into it reads the folded, quantized W and
    the folded B and writes the BatchNorm's output, which is gone; the Gemm reads its layer's W."""
    for make, name in ((fp32_model, "small"), (write_tiny_onnx, "tiny")):
        (tmp_path / name).mkdir()
        path, cnn, scales = _setup(tmp_path / name, make)
        ref = quantized_reference(path, cnn, scales)
        init = _consts(ref)
        made = {n.output[0]: n for n in ref.graph.node}
        convs = {n.name: n for n in ref.graph.node if n.op_type in ("Conv", "Gemm")}
        for layer in cnn.layers():
            if "W" not in layer.params:
                continue
            node = convs[layer.onnx_nodes[0]]
            dq = made[node.input[1]]
            assert dq.op_type == "DequantizeLinear" and dq.attribute[0].i == 0
            q, scale = per_channel(layer.params["W"])
            np.testing.assert_array_equal(init[dq.input[0]], q)
            np.testing.assert_array_equal(init[dq.input[1]], scale)
            if "B" in layer.params:
                np.testing.assert_array_equal(init[node.input[2]], layer.params["B"])
        if name == "tiny":
            assert not [n for n in ref.graph.node if n.op_type == "BatchNormalization"]
            assert convs["conv1"].output[0] == "n1" and "w1" not in init and "c1" not in made
            assert {a.name: h.get_attribute_value(a) for a in convs["fc"].attribute}["transB"] == 1


def _conv(x: np.ndarray, w: np.ndarray, b: np.ndarray, stride: int = 1, group: int = 1) -> np.ndarray:
    """Convolution of one NCHW image, pads k // 2, in float64."""
    k = w.shape[2]
    xp = np.pad(x[0].astype(np.float64), ((0, 0), (k // 2, k // 2), (k // 2, k // 2)))
    cin, hgt, wid = x.shape[1:]
    oh, ow = (hgt + 2 * (k // 2) - k) // stride + 1, (wid + 2 * (k // 2) - k) // stride + 1
    out = np.zeros((w.shape[0], oh, ow))
    per = w.shape[0] // group
    for c in range(w.shape[0]):
        g = c // per
        for i in range(oh):
            for j in range(ow):
                patch = xp[g * (cin // group):(g + 1) * (cin // group), i * stride:i * stride + k, j * stride:j * stride + k]
                out[c, i, j] = np.sum(patch * w[c]) + b[c]
    return out[None]


def _numpy_small(x: np.ndarray, cnn, scales) -> np.ndarray:
    """The 8-layer graph (test_onnx_qdq.fp32_model) in float64 with the deployment's weights,
    each stored tensor quantized to uint8 and back."""
    def fq(layer, v):
        return scales.dequantize("net", layer, scales.quantize("net", layer, np.asarray(v, np.float32)))

    def conv(layer, v, **kw):
        p = cnn.layer(layer).params
        return _conv(v, dequantized(*per_channel(p["W"])), p["B"], **kw)

    x = fq("input", x)
    r1 = fq("conv1", np.maximum(conv("conv1", x), 0))
    r2 = fq("dw2", np.maximum(conv("dw2", r1, stride=2, group=8), 0))
    c3 = fq("pw3", conv("pw3", r2))
    a3 = fq("add3", c3 + r2)
    c4 = fq("pw4", conv("pw4", a3))
    cat = fq("cat", np.concatenate([a3, c4], axis=1))
    return fq("conv5", conv("conv5", cat))


def test_run_by_onnx_runtime_it_equals_numpy_fake_quant(tmp_path):
    path, cnn, scales = _setup(tmp_path)
    sess = session(quantized_reference(path, cnn, scales))
    step = verdict.int8_step(scales, "net/conv5")
    assert step == scales.of("net", "conv5").scale
    worst = 0.0
    for seed in range(5):
        x = np.random.default_rng(seed).standard_normal(SHAPE, dtype=np.float32)
        got = sess.run(None, {"input": x})[0]
        want = _numpy_small(x, cnn, scales)
        units = np.abs(got - want) / step
        np.testing.assert_allclose(units, np.rint(units), atol=1e-3)   # both on the output's grid
        worst = max(worst, float(np.rint(units).max()))
    assert worst <= verdict.INT8_UNITS, worst
    assert worst <= 2, worst           # fused integer kernels vs float64: a unit or two


def test_below_opset_13_the_weights_are_their_dequantized_values(tmp_path):
    """DequantizeLinear has no axis before opset 13: each weight is an fp32 initializer of
    dequantized(per_channel(W)), and the output is the opset-13 reference's within a unit
    or two (fp32 convolutions instead of QLinearConv)."""
    path, cnn, scales = _setup(tmp_path)
    old = onnx.load(str(path))
    old.opset_import[0].version = 12
    onnx.save(old, str(tmp_path / "old.onnx"))
    ref = quantized_reference(tmp_path / "old.onnx", cnn, scales)
    init = _consts(ref)
    assert not [n for n in ref.graph.node if n.op_type == "DequantizeLinear" and n.input[0] in init
                and init[n.input[0]].dtype == np.int8]
    conv1 = next(n for n in ref.graph.node if n.name == "conv1")
    np.testing.assert_array_equal(init[conv1.input[1]], dequantized(*per_channel(cnn.layer("conv1").params["W"])))
    new = session(quantized_reference(path, cnn, scales))
    x = {"input": np.random.default_rng(3).standard_normal(SHAPE, dtype=np.float32)}
    units = np.abs(session(ref).run(None, x)[0] - new.run(None, x)[0]) / scales.of("net", "conv5").scale
    assert np.rint(units).max() <= 2, units.max()


def test_a_qdq_model_is_its_own_reference(tmp_path):
    fp32 = fp32_model(tmp_path / "fp32.onnx")
    frames, _ = calibration.frames(None, tuple(SHAPE), count=4, seed=1)
    qdq_path = ort_quantized(fp32, frames, tmp_path / "qdq.onnx")
    cnn = load_onnx(qdq_path, "net")
    scales = calibration.qdq_scales(cnn)
    ref = quantized_reference(qdq_path, cnn, scales)
    assert ref.SerializeToString() == onnx.load(str(qdq_path)).SerializeToString()
    write_reference(qdq_path, tmp_path / "ref.onnx", cnn, scales)
    assert onnx.load(str(tmp_path / "ref.onnx")).graph == ref.graph


def test_the_written_reference_is_the_reference(tmp_path):
    path, cnn, scales = _setup(tmp_path)
    write_reference(path, tmp_path / "ref.onnx", cnn, scales)
    assert onnx.load(str(tmp_path / "ref.onnx")).graph == quantized_reference(path, cnn, scales).graph


def test_a_missing_scale_is_one_line(tmp_path):
    from dataclasses import replace

    from sdf3.errors import InputError
    path, cnn, scales = _setup(tmp_path)
    short = replace(scales, by_tensor={k: v for k, v in scales.by_tensor.items() if k != "net/pw4"})
    with pytest.raises(InputError, match="no activation scale for layer.* pw4"):
        quantized_reference(path, cnn, short)


def damaged(ref: onnx.ModelProto, tensor: str, how: str, rows: int) -> onnx.ModelProto:
    """`tensor` written at twice its scale (read back at its own), or its rows 1 and rows-2
    swapped where its readers read it (also benchmarks/int8_tolerance.py's damage)."""
    m = onnx.ModelProto()
    m.CopyFrom(ref)
    if how == "scale":
        q = next(n for n in m.graph.node if n.op_type == "QuantizeLinear" and n.output[0] == tensor + "_q")
        s = next(t for t in m.graph.initializer if t.name == q.input[1])
        m.graph.initializer.append(nh.from_array(nh.to_array(s) * np.float32(2), q.input[1] + "_x2"))
        q.input[1] += "_x2"
        return m
    idx = list(range(rows))
    idx[1], idx[rows - 2] = idx[rows - 2], idx[1]
    m.graph.initializer.append(nh.from_array(np.array(idx, np.int64), "swap"))
    for n in m.graph.node:
        for k, t in enumerate(n.input):
            if t == tensor:
                n.input[k] = tensor + "_swapped"
    at = next(i for i, n in enumerate(m.graph.node) if tensor in n.output)
    m.graph.node.insert(at + 1, h.make_node("Gather", [tensor, "swap"], [tensor + "_swapped"], axis=2))
    return m


def test_the_int8_tolerance_passes_fp32_steps_and_fails_damage(tmp_path):
    """The reference against the same model with ONNX Runtime's QDQ fusion off (every layer
    computed in fp32 between DequantizeLinear and QuantizeLinear): within INT8_UNITS steps of
    the output scale at every seed; a tensor written at twice its scale, or two of its rows
    swapped, at least 4x the tolerance away."""
    path, cnn, scales = _setup(tmp_path)
    ref = quantized_reference(path, cnn, scales)
    tol = verdict.tolerance("int8", None, 1.0, None, verdict.int8_step(scales, ["net/conv5"]))
    assert tol == verdict.INT8_UNITS * scales.of("net", "conv5").scale
    fused, plain = session(ref), session(ref, fused=False)
    broken = [session(damaged(ref, "a3", how, 8), fused=False) for how in ("scale", "rows")]
    for seed in range(20):
        x = {"input": np.random.default_rng(100 + seed).standard_normal(SHAPE, dtype=np.float32)}
        want = fused.run(None, x)[0]
        assert np.abs(plain.run(None, x)[0] - want).max() <= tol
        for sess in broken:
            assert np.abs(sess.run(None, x)[0] - want).max() >= 4 * tol


def test_a_band_of_rows_through_qlinearconv_is_the_whole_layer_s_rows():
    """What the int8 verdict relies on for deep networks: QLinearConv on a band of rows (the
    halo rows read, no padding above or below) gives each element bit for bit what it gives
    on the whole map."""
    rng = np.random.default_rng(0)
    cin, cout, hgt, wid = 8, 16, 12, 9
    w = rng.integers(-127, 128, (cout, cin, 3, 3)).astype(np.int8)
    ws = (rng.random(cout) * 0.01 + 1e-3).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)

    def model(pads, rows):
        inits = [nh.from_array(w, "wq"), nh.from_array(ws, "ws"), nh.from_array(b, "b"),
                 nh.from_array(np.array(0.02, np.float32), "xs"), nh.from_array(np.array(128, np.uint8), "xz"),
                 nh.from_array(np.array(0.05, np.float32), "ys"), nh.from_array(np.array(100, np.uint8), "yz")]
        nodes = [h.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
                 h.make_node("DequantizeLinear", ["wq", "ws"], ["w"], axis=0),
                 h.make_node("Conv", ["xd", "w", "b"], ["c"], pads=pads),
                 h.make_node("QuantizeLinear", ["c", "ys", "yz"], ["yq"])]
        g = h.make_graph(nodes, "g", [h.make_tensor_value_info("xq", T.UINT8, [1, cin, rows, wid])],
                         [h.make_tensor_value_info("yq", T.UINT8, None)], inits)
        m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
        m.ir_version = 8
        return session(m)

    whole, band = model([1, 1, 1, 1], hgt), model([0, 1, 0, 1], 5)
    for seed in range(4):
        x = np.random.default_rng(seed).integers(0, 256, (1, cin, hgt, wid)).astype(np.uint8)
        full = whole.run(None, {"xq": x})[0]
        for top in range(0, hgt - 4, 2):
            np.testing.assert_array_equal(band.run(None, {"xq": x[:, :, top:top + 5]})[0], full[:, :, top + 1:top + 4])
