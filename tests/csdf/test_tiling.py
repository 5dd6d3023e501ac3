"""Fused tile regions (csdf/tiling.py) against an independent computation: dependencies of
every output pixel enumerated from the definition of each op, coverage counted, and each
tile's chain run on ONNX Runtime from its input region with its own pads, equal to the crop
of the whole group's output (halos and border padding exact). Stride, asymmetric padding,
dilation, even kernels and pools on odd sizes; DeepThings' traversal on YOLOv2-16."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from csdf import tiling
from csdf.onnx_import import load_onnx
from sdf3.errors import InputError

# (op, kernel, stride, dilation, pads [t, l, b, r], out channels)
CHAIN = [
    ("Conv", (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 4),
    ("MaxPool", (2, 2), (2, 2), (1, 1), (0, 0, 0, 0), 4),
    ("Conv", (5, 4), (2, 2), (1, 1), (2, 1, 1, 2), 6),
    ("Conv", (3, 3), (1, 1), (2, 2), (2, 2, 2, 2), 5),
    ("AveragePool", (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 5),
    ("Conv", (1, 1), (1, 1), (1, 1), (0, 0, 0, 0), 3),
]
H, W = 37, 29


def chain_model(pads_override=None, in_hw=(H, W)) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    nodes, inits, x, c = [], [], "input", 3
    for k, (op, kern, stride, dil, pads, cout) in enumerate(CHAIN):
        name = f"l{k}"
        pads = list(pads_override[k] if pads_override else pads)
        if op == "Conv":
            w = rng.standard_normal((cout, c, *kern)).astype(np.float32)
            inits += [numpy_helper.from_array(w, f"{name}.w"), numpy_helper.from_array(
                rng.standard_normal(cout).astype(np.float32), f"{name}.b")]
            nodes.append(helper.make_node("Conv", [x, f"{name}.w", f"{name}.b"], [name], name=name,
                                          kernel_shape=list(kern), strides=list(stride),
                                          dilations=list(dil), pads=pads))
            c = cout
        else:
            extra = {"count_include_pad": 0} if op == "AveragePool" else {}
            nodes.append(helper.make_node(op, [x], [name], name=name, kernel_shape=list(kern),
                                          strides=list(stride), pads=pads, **extra))
        x = name
    nodes.append(helper.make_node("LeakyRelu", [x], ["output"], name="act", alpha=0.1))
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, *in_hw])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=7)


@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    path = tmp_path_factory.mktemp("t") / "chain.onnx"
    onnx.save(chain_model(), str(path))
    return load_onnx(path, "c")


GROUP = [f"l{k}" for k in range(len(CHAIN))]


def deps(out: range, kernel: int, stride: int, dil: int, pad: int, size: int) -> set[int]:
    """Input indices read by output indices `out`, from the op's definition."""
    return {o * stride - pad + i * dil for o in out for i in range(kernel)} & set(range(size))


def sizes_along(axis: int) -> list[int]:
    size, out = (H, W)[axis], []
    for op, kern, stride, dil, pads, _ in CHAIN:
        out.append(size)
        size = (size + pads[axis] + pads[axis + 2] - ((kern[axis] - 1) * dil[axis] + 1)) // stride[axis] + 1
    return out + [size]


@pytest.mark.parametrize("n,m", [(1, 1), (2, 3), (3, 2), (5, 4), (9, 7)])
def test_regions_equal_enumerated_dependencies_and_cover_once(cnn, n, m):
    tiles = tiling.tile_group(cnn, GROUP, n, m)
    assert [(t.i, t.j) for t in tiles] == [(i, j) for i in range(n) for j in range(m)]
    hs, ws = sizes_along(0), sizes_along(1)
    cover = np.zeros((hs[-1], ws[-1]), int)
    for t in tiles:
        cover[t.out_h.start:t.out_h.stop, t.out_w.start:t.out_w.stop] += 1
        need = [set(range(t.out_h.start, t.out_h.stop)), set(range(t.out_w.start, t.out_w.stop))]
        for k in reversed(range(len(CHAIN))):
            op, kern, stride, dil, pads, _ = CHAIN[k]
            lt = t.layers[k]
            for axis, span_out, span_in in ((0, lt.out_h, lt.in_h), (1, lt.out_w, lt.in_w)):
                assert set(range(span_out.start, span_out.stop)) == need[axis]
                need[axis] = deps(range(span_out.start, span_out.stop), kern[axis], stride[axis],
                                  dil[axis], pads[axis], (hs, ws)[axis][k])
                assert (span_in.start, span_in.stop) == (min(need[axis]), max(need[axis]) + 1)
                # halo exact at borders: pad only where the window passes the map's edge
                before = pads[axis] - span_out.start * stride[axis]
                after = (span_out.stop - 1) * stride[axis] - pads[axis] + (kern[axis] - 1) * dil[axis] \
                    - ((hs, ws)[axis][k] - 1)
                assert lt.pads[axis] == max(before, 0) and lt.pads[axis + 2] == max(after, 0)
    assert (cover == 1).all()  # every output pixel computed by exactly one tile


@pytest.mark.parametrize("n,m", [(2, 2), (3, 4)])
def test_each_tile_computes_the_crop_of_the_whole_output(cnn, n, m):
    x = np.random.default_rng(1).standard_normal((1, 3, H, W)).astype(np.float32)
    whole = ort.InferenceSession(chain_model().SerializeToString(), providers=["CPUExecutionProvider"])
    (ref,) = whole.run(None, {"input": x})
    tiles = tiling.tile_group(cnn, GROUP, n, m)
    out = np.full_like(ref, np.nan)
    for t in tiles:
        model = chain_model([lt.pads for lt in t.layers], (t.in_h.size, t.in_w.size))
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        (y,) = sess.run(None, {"input": x[:, :, t.in_h.start:t.in_h.stop, t.in_w.start:t.in_w.stop]})
        assert y.shape[2:] == (t.out_h.size, t.out_w.size)
        out[:, :, t.out_h.start:t.out_h.stop, t.out_w.start:t.out_w.stop] = y
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_grid_is_deepthings():
    # DeepThings' grid(): ceil(size / parts) each, the last tile to the end
    assert [(s.start, s.stop) for s in tiling.grid(76, 5)] == [(0, 16), (16, 32), (32, 48), (48, 64), (64, 76)]
    assert [(s.start, s.stop) for s in tiling.grid(38, 2)] == [(0, 19), (19, 38)]
    with pytest.raises(ValueError):
        tiling.grid(9, 4)  # 3, 3, 3, then nothing
    with pytest.raises(ValueError):
        tiling.grid(3, 4)


def test_yolo_traversal_is_deepthings():
    """On YOLOv2-16 the regions equal DeepThings' traversal(): conv [o1*s - f/2, o2*s + f/2]
    clipped to the map, pool [o1*s, o2*s + s - 1] (inclusive bounds)."""
    import csdf.zoo as zoo
    from csdf.zoo.yolo import LAYERS
    y = load_onnx(zoo.model_path("yolov2_16"), "y")
    names = [n for n in y.order() if n != "input"]
    for n in (1, 3, 5):
        tiles = tiling.tile_group(y, names, n, n)
        # corner, edge and interior tiles: at most 9 tile models (the last row/column may differ)
        assert len(tiling.distinct_shapes(tiles)) <= min(n, 4) ** 2
        for t in tiles:
            h1, h2 = t.out_h.start, t.out_h.stop - 1
            for k in reversed(range(16)):
                lt = t.layers[k]
                size = tiling.in_hw(y, names[k])[0]
                if LAYERS[k][0] == "conv":
                    f = LAYERS[k][2]
                    h1, h2 = max(h1 - f // 2, 0), min(h2 + f // 2, size - 1)
                else:
                    h1, h2 = 2 * h1, 2 * h2 + 1
                assert (lt.in_h.start, lt.in_h.stop - 1) == (h1, h2)


def test_groups_must_be_chains(cnn):
    with pytest.raises(InputError, match=r"l0: its output is read outside the group \(l1\)"):
        tiling.check_group(cnn, ["l0", "l2"])
    with pytest.raises(InputError, match="no such layer"):
        tiling.check_group(cnn, ["nope"])
    with pytest.raises(InputError, match="Input"):
        tiling.check_group(cnn, ["input", "l0"])
