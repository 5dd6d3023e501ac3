"""ONNX models written with onnx.helper in the node order real exporters use, for the import
and deployment tests of real-CNN patterns and valid models once mis-handled. Weights are
scaled so outputs are of order 1 (checked by `deploy_diff`)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh


class Net:
    """A graph under construction: nodes in the order they are added, seeded weights."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)
        self.nodes: list = []
        self.inits: list = []
        self.k = 0

    def name(self, hint: str) -> str:
        self.k += 1
        return f"/{hint}_{self.k}/out"

    def init(self, name: str, value, dtype=np.float32) -> str:
        self.inits.append(nh.from_array(np.asarray(value, dtype), name))
        return name

    def weight(self, name: str, shape, fan_in: int) -> str:
        return self.init(name, self.rng.standard_normal(shape) / np.sqrt(fan_in))

    def const(self, value, dtype=np.float32) -> str:
        """A Constant node (as PyTorch writes scalars and shapes), appended where called."""
        out = self.name("Constant")
        self.nodes.append(h.make_node("Constant", [], [out], value=nh.from_array(np.asarray(value, dtype)),
                                      name=out.rsplit("/", 1)[0]))
        return out

    def op(self, op: str, ins: list[str], name: str | None = None, **attrs) -> str:
        out = self.name(op)
        self.nodes.append(h.make_node(op, ins, [out], name=name or out.rsplit("/", 1)[0], **attrs))
        return out

    def conv(self, x: str, cin: int, cout: int, k: int = 3, group: int = 1, name=None, **attrs) -> str:
        w = self.weight(f"{name or 'conv'}{self.k}.weight", (cout, cin // group, k, k), cin // group * k * k)
        b = self.init(f"{name or 'conv'}{self.k}.bias", self.rng.standard_normal(cout) * 0.1)
        return self.op("Conv", [x, w, b], name=name, kernel_shape=[k, k], pads=[k // 2] * 4,
                       group=group, **attrs)

    def bn(self, x: str, c: int) -> str:
        p = f"bn{self.k}"
        ins = [self.init(f"{p}.g", self.rng.uniform(0.8, 1.2, c)), self.init(f"{p}.b", self.rng.standard_normal(c) * 0.1),
               self.init(f"{p}.m", self.rng.standard_normal(c) * 0.1), self.init(f"{p}.v", self.rng.uniform(0.8, 1.2, c))]
        return self.op("BatchNormalization", [x, *ins])

    def save(self, path: Path, inputs: list[tuple[str, list]], outputs: list[tuple[str, list | None]],
             opset: int = 13, elem=T.FLOAT, **save_kw) -> Path:
        graph = h.make_graph(self.nodes, "net", [h.make_tensor_value_info(n, elem, s) for n, s in inputs],
                             [h.make_tensor_value_info(n, elem, s) for n, s in outputs], self.inits)
        model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
        model.ir_version = 8
        onnx.checker.check_model(model)
        onnx.save(model, str(path), **save_kw)
        return path


def mobilenet_block(path: Path) -> Path:
    """Conv+BN+Clip(0, 6) as torch.onnx writes Relu6: the Clip's bounds are Constant nodes
    placed after the Conv, then a depthwise conv + Clip, a pointwise conv, a residual Add."""
    n = Net(1)
    x = n.op("Relu", [n.bn(n.conv("input", 3, 8), 8)])
    c = n.conv(x, 8, 8, group=8)
    lo, hi = n.const(0.0), n.const(6.0)          # after the Conv that feeds the Clip
    y = n.op("Clip", [n.bn(c, 8), lo, hi])
    z = n.conv(y, 8, 8, k=1)
    n.op("Add", [x, z])
    n.nodes[-1].output[0] = "output"
    return n.save(path, [("input", [1, 3, 12, 10])], [("output", [1, 8, 12, 10])])


def hardswish_block(path: Path, opset: int) -> Path:
    """Conv + HardSwish as exported: x * HardSigmoid(x, 1/6, 1/2) at opset 13, a HardSwish
    node at opset 17; then a HardSigmoid gate of an SE block."""
    n = Net(2)
    c = n.conv("input", 3, 8)
    if opset >= 14:
        a = n.op("HardSwish", [c])
    else:
        a = n.op("Mul", [c, n.op("HardSigmoid", [c], alpha=1.0 / 6, beta=0.5)])
    g = n.op("GlobalAveragePool", [a])
    s = n.op("HardSigmoid", [n.conv(g, 8, 8, k=1)], alpha=1.0 / 6, beta=0.5)
    n.op("Mul", [a, s])
    n.nodes[-1].output[0] = "output"
    return n.save(path, [("input", [1, 3, 8, 8])], [("output", [1, 8, 8, 8])], opset=opset)


def mnasnet_head(path: Path, keepdims: int) -> Path:
    """x.mean([2, 3]) (ReduceMean keepdims=0, a global pool and a flatten) + Linear."""
    n = Net(3)
    c = n.op("Relu", [n.conv("input", 3, 8)])
    m = n.op("ReduceMean", [c], axes=[2, 3], keepdims=keepdims)
    flat = m if not keepdims else n.op("Flatten", [m])
    w = n.weight("fc.weight", (5, 8), 8)
    b = n.init("fc.bias", n.rng.standard_normal(5) * 0.1)
    n.op("Gemm", [flat, w, b], transB=1)
    n.nodes[-1].output[0] = "output"
    return n.save(path, [("input", [1, 3, 8, 8])], [("output", [1, 5])])


def shuffle_block(path: Path) -> Path:
    """ShuffleNet's channel shuffle as torch exports x.view(b, g, c/g, h, w).transpose(1, 2)
    .view(b, c, h, w): shapes from Shape/Gather/Unsqueeze/Concat of static dims (Constant
    nodes after their consumers' producers), a 5-D Reshape, Transpose, Reshape back."""
    n = Net(4)
    c = n.op("Relu", [n.conv("input", 3, 8)])
    shp = n.op("Shape", [c])
    batch = n.op("Gather", [shp, n.const(0, np.int64)], axis=0)
    h_ = n.op("Gather", [shp, n.const(2, np.int64)], axis=0)
    w_ = n.op("Gather", [shp, n.const(3, np.int64)], axis=0)
    dims = [n.op("Unsqueeze", [d, n.const([0], np.int64)]) for d in (batch, h_, w_)]
    five = n.op("Concat", [dims[0], n.const([2], np.int64), n.const([4], np.int64), dims[1], dims[2]], axis=0)
    r = n.op("Reshape", [c, five], name="/shuffle/Reshape")
    t = n.op("Transpose", [r], perm=[0, 2, 1, 3, 4], name="/shuffle/Transpose")
    back = n.op("Reshape", [t, n.const([1, 8, 8, 6], np.int64)], name="/shuffle/Reshape_1")
    n.op("Conv", [back, n.weight("pw.weight", (8, 8, 1, 1), 8)], kernel_shape=[1, 1])
    n.nodes[-1].output[0] = "output"
    return n.save(path, [("input", [1, 3, 8, 6])], [("output", [1, 8, 8, 6])])


def shuffle_block_folded(path: Path, opset: int) -> Path:
    """ShuffleNetV2's channel shuffle as the TorchScript exporter writes it at opset 17 with
    static shapes: constant folding leaves the view shapes as Constant nodes baked for the
    whole height, the second with a -1 ([1, -1, H, W]), then a 3x3 conv that needs rows
    from neighbouring parts."""
    n = Net(6)
    c = n.op("Relu", [n.conv("input", 3, 8)])
    r = n.op("Reshape", [c, n.const([1, 2, 4, 8, 6], np.int64)], name="/shuffle/Reshape")
    t = n.op("Transpose", [r], perm=[0, 2, 1, 3, 4], name="/shuffle/Transpose")
    back = n.op("Reshape", [t, n.const([1, -1, 8, 6], np.int64)], name="/shuffle/Reshape_1")
    n.conv(back, 8, 8)
    n.nodes[-1].output[0] = "output"
    return n.save(path, [("input", [1, 3, 8, 6])], [("output", [1, 8, 8, 6])], opset=opset)


def dynamo_block(path: Path) -> Path:
    """A channels-last block as torch.onnx's default (dynamo) exporter writes it at opset 18:
    nodes named `node_<aten op>`, tensors named after the aten op (`conv2d`, `permute`),
    initializers by module path (`block.norm.weight`, a folded conv bias `...weight_bias`),
    shape and index constants as `val_<n>` initializers; LayerNormalization (stash_type 1),
    Linear as MatMul + Add, and `select` as a Gather with a 0-d index (two halves of the
    channels, added), GELU in its Erf form, permute back, residual Add."""
    rng = np.random.default_rng(9)
    c, hh, ww = 8, 6, 5
    inits = {
        "stem.weight": rng.standard_normal((c, 3, 3, 3)) / np.sqrt(27),
        "stem.weight_bias": rng.standard_normal(c) * 0.1,
        "block.norm.weight": rng.uniform(0.8, 1.2, c), "block.norm.bias": rng.standard_normal(c) * 0.1,
        "val_1": rng.standard_normal((c // 2, c)) / np.sqrt(c // 2),
        "block.fc.bias": rng.standard_normal(c) * 0.1,
        "val_2": np.array([1, hh, ww, 2, c // 2], np.int64), "val_3": np.array(0, np.int64),
        "val_4": np.array(1, np.int64), "val_5": np.array(np.sqrt(0.5), np.float32),
        "val_6": np.array(1.0, np.float32), "val_7": np.array(0.5, np.float32),
    }
    tensors = [nh.from_array(np.asarray(v, np.float32 if np.asarray(v).dtype.kind == "f" else v.dtype), k)
               for k, v in inits.items()]
    node = h.make_node
    nodes = [
        node("Conv", ["input", "stem.weight", "stem.weight_bias"], ["conv2d"], name="node_Conv_0",
             kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        node("Transpose", ["conv2d"], ["permute"], name="node_permute", perm=[0, 2, 3, 1]),
        node("LayerNormalization", ["permute", "block.norm.weight", "block.norm.bias"], ["layer_norm"],
             name="node_layer_norm", axis=-1, epsilon=1e-5, stash_type=1),
        node("Reshape", ["layer_norm", "val_2"], ["view"], name="node_view"),
        node("Gather", ["view", "val_3"], ["select"], name="node_select", axis=3),
        node("Gather", ["view", "val_4"], ["select_1"], name="node_select_1", axis=3),
        node("Add", ["select", "select_1"], ["add"], name="node_add"),
        node("MatMul", ["add", "val_1"], ["val_8"], name="node_MatMul_3"),
        node("Add", ["val_8", "block.fc.bias"], ["linear"], name="node_linear"),
        node("Mul", ["linear", "val_5"], ["mul"], name="node_mul"),
        node("Erf", ["mul"], ["erf"], name="node_Erf_5"),
        node("Add", ["erf", "val_6"], ["add_1"], name="node_add_1"),
        node("Mul", ["linear", "add_1"], ["mul_1"], name="node_mul_1"),
        node("Mul", ["mul_1", "val_7"], ["gelu"], name="node_gelu"),
        node("Transpose", ["gelu"], ["permute_1"], name="node_permute_1", perm=[0, 3, 1, 2]),
        node("Add", ["permute_1", "conv2d"], ["output"], name="node_add_2"),
    ]
    graph = h.make_graph(nodes, "main_graph", [h.make_tensor_value_info("input", T.FLOAT, [1, 3, hh, ww])],
                         [h.make_tensor_value_info("output", T.FLOAT, [1, c, hh, ww])], tensors)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)], producer_name="pytorch")
    model.ir_version = 10
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))
    return path


def convnext_block(path: Path, opset: int = 13) -> Path:
    """ConvNeXt's block: depthwise 7x7 conv, permute to channels-last, LayerNorm (decomposed
    at opset 13 as exported), Linear 4x, GELU (Erf form), Linear, layer scale, permute back,
    residual Add."""
    n = Net(5)
    c = 8
    x = n.conv("input", 3, c, k=3)
    d = n.conv(x, c, c, k=7, group=c)
    t = n.op("Transpose", [d], perm=[0, 2, 3, 1])
    if opset >= 17:
        ln = n.op("LayerNormalization", [t, n.init("ln.weight", n.rng.uniform(0.8, 1.2, c)),
                                         n.init("ln.bias", n.rng.standard_normal(c) * 0.1)], axis=-1, epsilon=1e-6)
    else:
        mean = n.op("ReduceMean", [t], axes=[-1])
        diff = n.op("Sub", [t, mean])
        var = n.op("ReduceMean", [n.op("Pow", [diff, n.const(2.0)])], axes=[-1])
        std = n.op("Sqrt", [n.op("Add", [var, n.const(1e-6)])])
        ln = n.op("Add", [n.op("Mul", [n.op("Div", [diff, std]), n.init("ln.weight", n.rng.uniform(0.8, 1.2, c))]),
                          n.init("ln.bias", n.rng.standard_normal(c) * 0.1)])
    m1 = n.op("Add", [n.init("fc1.bias", n.rng.standard_normal(4 * c) * 0.1),
                      n.op("MatMul", [ln, n.weight("fc1.weight", (c, 4 * c), c)])])
    gelu = n.op("Mul", [n.op("Mul", [m1, n.op("Add", [n.op("Erf", [n.op("Div", [m1, n.const(1.4142135)])]),
                                                       n.const(1.0)])]), n.const(0.5)])
    m2 = n.op("Add", [n.init("fc2.bias", n.rng.standard_normal(c) * 0.1),
                      n.op("MatMul", [gelu, n.weight("fc2.weight", (4 * c, c), 4 * c)])])
    back = n.op("Transpose", [m2], perm=[0, 3, 1, 2])
    scaled = n.op("Mul", [n.init("layer_scale", np.full((c, 1, 1), 0.5)), back])
    n.op("Add", [scaled, x])
    n.nodes[-1].output[0] = "output"
    return n.save(path, [("input", [1, 3, 6, 5])], [("output", [1, c, 6, 5])], opset=opset)


def shared_weights(path: Path) -> Path:
    """Two convs reading one initializer (a weight-tied export), then a standalone BN after
    a Concat (DenseNet's pre-activation): 2 parameters per channel."""
    n = Net(6)
    c0 = n.op("Relu", [n.conv("input", 3, 4)])
    w = n.weight("tied.weight", (4, 4, 3, 3), 36)
    a = n.op("Conv", [c0, w], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    b = n.op("Conv", [n.op("Relu", [a]), w], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    cat = n.op("Concat", [a, b], axis=1)
    n.op("Relu", [n.bn(cat, 8)])
    n.nodes[-1].output[0] = "output"
    return n.save(path, [("input", [1, 3, 6, 6])], [("output", [1, 8, 6, 6])])


def fan_out_block(path: Path) -> Path:
    """One tensor read by three layers with different windows and strides: a
    stem conv + Relu, then a 3x3 conv (stride 1, then a 3x3 stride 2), a 5x5 conv of
    stride 2 and a 3x3 max pool of stride 2 all read it; their outputs are concatenated
    and mixed by a 1x1 conv. 19 rows: parts of 3 rows leave a last part of 1 row."""
    n = Net(26)
    t = n.op("Relu", [n.conv("input", 3, 8)])
    a = n.conv(n.op("Relu", [n.conv(t, 8, 8)]), 8, 8, strides=[2, 2])
    b = n.conv(t, 8, 8, k=5, strides=[2, 2])
    c = n.op("MaxPool", [t], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2])
    n.conv(n.op("Concat", [a, b, c], axis=1), 24, 8, k=1)
    n.nodes[-1].output[0] = "output"
    return n.save(path, [("input", [1, 3, 19, 11])], [("output", [1, 8, 10, 6])])


def region_block(path: Path, c: int = 8) -> Path:
    """A by-parts region that region steps are tested on: a 3x3 stem conv +
    Relu on 25 rows (padding rows at both borders; 25 rows divide by no band of 2 or 3),
    a stride-2 3x3 depthwise conv + Clip (13 rows), a pointwise conv, a 3x3 conv and a
    residual Add joining the pointwise conv's output, then a 3x3 max pool of stride 1 and a
    3x3 max pool of stride 2 in ceil mode (windows past the last column: 6x3 out, where floor
    mode would give 6x2). `c`: channels after the stem."""
    n = Net(27)
    x = n.op("Relu", [n.conv("input", 3, c)])
    lo, hi = n.const(0.0), n.const(6.0)
    d = n.op("Clip", [n.conv(x, c, c, group=c, strides=[2, 2]), lo, hi])
    p = n.conv(d, c, c, k=1)
    r = n.op("Add", [p, n.op("Relu", [n.conv(p, c, c)])])
    m = n.op("MaxPool", [r], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1])
    n.op("MaxPool", [m], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)
    n.nodes[-1].output[0] = "output"
    return n.save(path, [("input", [1, 3, 25, 11])], [("output", [1, c, 6, 3])])


def joins_block(path: Path, h: int = 11) -> Path:
    """conv 3x3 (pads 1) -> relu -> depthwise 3x3 stride 2 -> relu6 -> two 1x1 convs of equal
    ports joined to it by a residual Add, a Concat with a max pool, and a 3x3 conv at the
    end (`output`); input [1, 3, h, 9]. Layers a, b, c, c2, r, p, cat, d."""
    n = Net(3)
    a = n.op("Relu", [n.conv("input", 3, 8, name="a")])
    b = n.op("Clip", [n.conv(a, 8, 8, group=8, name="b", strides=[2, 2]), n.const(0.0), n.const(6.0)])
    c = n.conv(n.conv(b, 8, 8, k=1, name="c"), 8, 8, k=1, name="c2")
    r = n.op("Add", [c, b], name="r")
    p = n.op("MaxPool", [r], name="p", kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1])
    n.conv(n.op("Concat", [r, p], name="cat", axis=1), 16, 4, name="d")
    n.nodes[-1].output[0] = "output"
    return n.save(path, [("input", [1, 3, h, 9])], [("output", [1, 4, (h + 1) // 2, 5])])


def branches_block(path: Path, height: int = 8, c_kernel: int = 1) -> Path:
    """input x [1, 3, height, 8] read by two 3x3 convs (a: 4 channels with a bias, b: 4 without),
    their Add s, then conv c (6 channels, c_kernel x c_kernel, stride 2, 'same' pads): the
    input has two readers, a and b one each; weights named wa, ba, wb, wc."""
    rng = np.random.default_rng(0)
    w = lambda n, s: nh.from_array(rng.standard_normal(s).astype(np.float32), n)  # noqa: E731
    k = c_kernel
    nodes = [h.make_node("Conv", ["x", "wa", "ba"], ["a"], name="a", pads=[1, 1, 1, 1]),
             h.make_node("Conv", ["x", "wb"], ["b"], name="b", pads=[1, 1, 1, 1]),
             h.make_node("Add", ["a", "b"], ["s"], name="s"),
             h.make_node("Conv", ["s", "wc"], ["y"], name="c", strides=[2, 2], kernel_shape=[k, k],
                          pads=[k // 2] * 4)]
    graph = h.make_graph(nodes, "branches", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, height, 8])],
                          [h.make_tensor_value_info("y", T.FLOAT, [1, 6, (height + 1) // 2, 4])],
                          [w("wa", (4, 3, 3, 3)), w("ba", (4,)), w("wb", (4, 3, 3, 3)),
                           w("wc", (6, 4, k, k))])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def text_detector_head(path: Path, bias: float = -10.0) -> Path:
    """A text detector's forms as paddle2onnx exports PP-OCRv4's (dynamic N, H, W; opset 11):
    a stride-2 conv + HardSwish (x * HardSigmoid(x, 0.2, 0.5)), a stride-2 conv, an SE gate
    whose GlobalAveragePool output is reshaped by a Shape -> Slice -> Concat chain, a
    nearest Resize by scales 2 (asymmetric, floor) added to the finer map and concatenated
    with it, a 3x3 conv + BN + Relu, and two ConvTranspose 2x2 stride 2 (bias as an Add, BN +
    Relu between) to a Sigmoid: with `bias` -10 the map of a random frame lies near 0
    (outputs up to ~3e-4). Layers named by node (Conv_1 ... Add_30; the Sigmoid fused into
    Add_30); input_shape [1, 3, 16, 16] gives a [1, 1, 32, 32] map."""
    n = Net(31)
    c1 = n.conv("x", 3, 8, strides=[2, 2])
    a1 = n.op("Mul", [c1, n.op("HardSigmoid", [c1], alpha=0.2, beta=0.5)])
    c2 = n.conv(a1, 8, 8, strides=[2, 2])
    g = n.op("GlobalAveragePool", [c2])
    batch = n.op("Slice", [n.op("Shape", [g]), n.const([0], np.int64), n.const([1], np.int64),
                           n.const([0], np.int64)])
    g = n.op("Reshape", [g, n.op("Concat", [batch, n.const([8, 1, 1], np.int64)], axis=0)])
    se = n.op("Mul", [c2, n.op("HardSigmoid", [n.conv(g, 8, 8, k=1)], alpha=0.2, beta=0.5)])
    up = n.op("Resize", [se, n.const(np.zeros(0, np.float32)), n.const([1, 1, 2, 2])], mode="nearest",
              coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    d = n.op("Relu", [n.bn(n.conv(n.op("Concat", [n.op("Add", [up, a1]), up], axis=1), 16, 8), 8)])
    t = n.op("ConvTranspose", [d, n.weight("t1.w", (8, 4, 2, 2), 8)], kernel_shape=[2, 2], strides=[2, 2])
    t = n.op("Relu", [n.bn(n.op("Add", [t, n.init("t1.b", n.rng.standard_normal((4, 1, 1)) * 0.1)]), 4)])
    t = n.op("ConvTranspose", [t, n.weight("t2.w", (4, 1, 2, 2), 4)], kernel_shape=[2, 2], strides=[2, 2])
    n.op("Sigmoid", [n.op("Add", [t, n.init("t2.b", np.full((1, 1, 1), bias))])])
    n.nodes[-1].output[0] = "y"
    return n.save(path, [("x", ["N", 3, "H", "W"])], [("y", ["N", 1, "H", "W"])], opset=11)


def qdq_blocks(path: Path) -> Path:
    """The forms torchvision's EfficientNet and MobileNetV3 export (opset 17), 8x8 frames:
    Conv + SiLU (x * Sigmoid(x)), a depthwise Conv + SiLU, a squeeze-excitation block
    (GlobalAveragePool -> 1x1 Conv + SiLU -> 1x1 Conv + Sigmoid -> Mul), a Conv + HardSwish
    node, a squeeze-excitation block (Relu, HardSigmoid gate), a Conv + x * HardSigmoid(x)
    (HardSwish by parts, as exported below opset 14) and a last Conv."""
    n = Net(3)

    def silu(x: str) -> str:
        return n.op("Mul", [x, n.op("Sigmoid", [x])])

    def se(x: str, c: int, act, gate: str) -> str:
        s = act(n.conv(n.op("GlobalAveragePool", [x]), c, c // 2, k=1))
        s = n.op(gate, [n.conv(s, c // 2, c, k=1)], **({"alpha": 1.0 / 6, "beta": 0.5} if gate == "HardSigmoid" else {}))
        return n.op("Mul", [x, s])

    x = silu(n.conv("input", 3, 8))
    x = se(silu(n.conv(x, 8, 8, group=8)), 8, silu, "Sigmoid")
    x = se(n.op("HardSwish", [n.conv(x, 8, 8, k=1)]), 8, lambda s: n.op("Relu", [s]), "HardSigmoid")
    c = n.conv(x, 8, 8)
    x = n.op("Mul", [c, n.op("HardSigmoid", [c], alpha=1.0 / 6, beta=0.5)])
    n.conv(x, 8, 6, k=1)
    n.nodes[-1].output[0] = "output"
    return n.save(path, [("input", [1, 3, 8, 8])], [("output", [1, 6, 8, 8])], opset=17)


def qdq_export(source: Path, target: Path, frames: int = 4) -> Path:
    """`source` quantized by ONNX Runtime's quantize_static as a user exports a QDQ model:
    per-channel int8 weights, int8 activations, calibrated on `frames` seeded normal frames."""
    from onnxruntime import quantization as q
    shape = [d.dim_value for d in onnx.load(str(source)).graph.input[0].type.tensor_type.shape.dim]

    class Frames(q.CalibrationDataReader):
        def __init__(self):
            self.left = iter({"input": np.random.default_rng(i).standard_normal(shape, dtype=np.float32)}
                             for i in range(frames))

        def get_next(self):
            return next(self.left, None)

    q.quantize_static(str(source), str(target), Frames(), quant_format=q.QuantFormat.QDQ, per_channel=True,
                      activation_type=q.QuantType.QInt8, weight_type=q.QuantType.QInt8)
    return target


def qdq_opaque(folder: Path) -> Path:
    """Conv -> Erf -> Erf -> Conv quantized by `qdq_export`, with one more quantization point
    (QuantizeLinear -> DequantizeLinear, int8, scale 1/127) on the first Erf's output: a point
    between two nodes the import runs as one opaque layer."""
    n = Net(8)
    x = n.op("Erf", [n.op("Erf", [n.conv("input", 3, 4)])])
    n.conv(x, 4, 4, k=1)
    n.nodes[-1].output[0] = "output"
    qdq = qdq_export(n.save(folder / "erf.onnx", [("input", [1, 3, 8, 8])], [("output", [1, 4, 8, 8])]),
                     folder / "erf.qdq.onnx")
    model = onnx.load(str(qdq))
    first = next(k for k, node in enumerate(model.graph.node) if node.op_type == "Erf")
    t = model.graph.node[first].output[0]
    for node in model.graph.node[first + 1:]:
        node.input[:] = [f"{t}_dq" if i == t else i for i in node.input]
    model.graph.initializer.extend([nh.from_array(np.array(1 / 127, np.float32), f"{t}_scale"),
                                    nh.from_array(np.array(0, np.int8), f"{t}_zero_point")])
    pair = [h.make_node("QuantizeLinear", [t, f"{t}_scale", f"{t}_zero_point"], [f"{t}_q"]),
            h.make_node("DequantizeLinear", [f"{t}_q", f"{t}_scale", f"{t}_zero_point"], [f"{t}_dq"])]
    for k, node in enumerate(pair):
        model.graph.node.insert(first + 1 + k, node)
    onnx.checker.check_model(model)
    onnx.save(model, str(qdq))
    return qdq


def qdq_matmul(folder: Path) -> Path:
    """Conv + Relu -> GlobalAveragePool -> Flatten -> MatMul -> Add (a Linear layer as some
    exporters write it), quantized by `qdq_export`: the MatMul's [in, out] weight has one
    scale per output (axis 1), and its output is a quantization point before the Add."""
    n = Net(5)
    f = n.op("Flatten", [n.op("GlobalAveragePool", [n.op("Relu", [n.conv("input", 3, 16)])])], axis=1)
    w = n.init("fc.w", n.rng.standard_normal((16, 10)) / 4)
    n.op("Add", [n.op("MatMul", [f, w], name="mm"), n.init("fc.b", n.rng.standard_normal(10) * 0.1)])
    n.nodes[-1].output[0] = "output"
    n.save(folder / "mm.onnx", [("input", [1, 3, 8, 8])], [("output", [1, 10])], opset=17)
    return qdq_export(folder / "mm.onnx", folder / "mm.qdq.onnx")
