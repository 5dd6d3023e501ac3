"""onnx.helper-style building blocks with explicit shapes and O(1)-scaled random weights.

A `Net` collects nodes, initializers (raw data) and the shape of every tensor; each op function
appends one node, computes its output shape (written as value_info, so strict shape inference
cross-checks it) and returns the output tensor name, which is also the node name.

Random weights would let activations drift by orders of magnitude over 50-120 layers, and a
trained network's BatchNormalization statistics match the data it sees. So `to_model`
calibrates, as training would: one ONNX Runtime pass over a seeded N(0, 1) input, in a copy
of the graph where each BatchNormalization is an InstanceNormalization with the same
effective affine transform, measures every BN input; the running mean and variance are then
that input's statistics perturbed by the BN's seeded offsets (mean + N(0, 0.1) sd, var x
U(0.5, 1.5)), so each BN output is O(1) and gamma/beta stay moderate. The classifier is
scaled so the logits spread by about 2 (softmax neither uniform nor one-hot).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 13  # the newest TensorRT 8.2 (JetPack 4.6, Jetson TX2) reads
IR_VERSION = 7  # the IR of onnx 1.8, which introduced opset 13; onnx 1.23 would write 14
INPUT = "input"
OUTPUT = "output"
BN_EPS = 1e-5
LOGIT_SPREAD = 2.0


@dataclass
class BNDraw:
    """The seeded draws of one BatchNormalization; running stats are set at calibration."""

    x: str
    gamma: np.ndarray
    beta: np.ndarray
    mean_offset: np.ndarray  # running_mean = mean(x) + offset * sd(x)
    var_factor: np.ndarray  # running_var = var(x) * factor


@dataclass
class Net:
    """A graph under construction; `shapes` is indexed by tensor name, `bns` by BN node name."""

    name: str
    seed: int
    rng: np.random.Generator
    nodes: list[onnx.NodeProto] = field(default_factory=list)
    inits: list[onnx.TensorProto] = field(default_factory=list)
    shapes: dict[str, list[int]] = field(default_factory=dict)
    bns: dict[str, BNDraw] = field(default_factory=dict)
    classifier: str | None = None  # the Gemm to scale at calibration


def new_net(name: str, seed: int, shape: tuple[int, ...] = (1, 3, 224, 224)) -> tuple[Net, str]:
    """A net with the float32 NCHW graph input "input"."""
    net = Net(name, seed, np.random.default_rng(seed))
    net.shapes[INPUT] = list(shape)
    return net, INPUT


def _init(net: Net, name: str, array: np.ndarray) -> str:
    # np.array keeps 0-d arrays 0-d (Clip bounds must be scalars); ascontiguousarray would not
    net.inits.append(numpy_helper.from_array(np.array(array, dtype=np.float32, order="C"), name))
    return name


def _node(net: Net, op: str, inputs: list[str], name: str, shape: list[int], **attrs) -> str:
    if name in net.shapes:
        raise ValueError(f"{net.name}: duplicate tensor name {name}")
    net.nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
    net.shapes[name] = list(shape)
    return name


def _out_hw(size: int, k: int, s: int, pad_total: int) -> int:
    return (size + pad_total - k) // s + 1


def conv(net: Net, x: str, cout: int, k: int, name: str, stride: int = 1, group: int = 1,
         pad: int | None = None, bias: bool = False) -> str:
    """Conv k x k with symmetric padding (k//2 by default); He-normal weights, bias ~ N(0, 0.01)."""
    n, cin, h, w = net.shapes[x]
    if cin % group or cout % group:
        raise ValueError(f"{name}: channels {cin}->{cout} not divisible by group {group}")
    p = k // 2 if pad is None else pad
    fan_in = cin // group * k * k
    weight = net.rng.standard_normal((cout, cin // group, k, k)) * np.sqrt(2.0 / fan_in)
    inputs = [x, _init(net, f"{name}.weight", weight)]
    if bias:
        inputs.append(_init(net, f"{name}.bias", net.rng.standard_normal(cout) * 0.01))
    shape = [n, cout, _out_hw(h, k, stride, 2 * p), _out_hw(w, k, stride, 2 * p)]
    return _node(net, "Conv", inputs, name, shape, kernel_shape=[k, k], strides=[stride, stride],
                 pads=[p, p, p, p], dilations=[1, 1], group=group)


def batchnorm(net: Net, x: str, name: str) -> str:
    """BatchNormalization (inference); gamma ~ U(0.7, 1.3), beta ~ N(0, 0.1), stats calibrated."""
    c = net.shapes[x][1]
    draw = BNDraw(x, net.rng.uniform(0.7, 1.3, c), net.rng.normal(0.0, 0.1, c),
                  net.rng.normal(0.0, 0.1, c), net.rng.uniform(0.5, 1.5, c))
    net.bns[name] = draw
    _init(net, f"{name}.weight", draw.gamma)
    _init(net, f"{name}.bias", draw.beta)
    inputs = [x] + [f"{name}.{p}" for p in ("weight", "bias", "running_mean", "running_var")]
    return _node(net, "BatchNormalization", inputs, name, net.shapes[x], epsilon=BN_EPS)


def relu(net: Net, x: str, name: str) -> str:
    return _node(net, "Relu", [x], name, net.shapes[x])


def relu6(net: Net, x: str, name: str) -> str:
    """ReLU6 as Clip(0, 6); opset 13 takes min/max as inputs."""
    lo = _init(net, f"{name}.min", np.array(0.0))
    hi = _init(net, f"{name}.max", np.array(6.0))
    return _node(net, "Clip", [x, lo, hi], name, net.shapes[x])


def leaky_relu(net: Net, x: str, name: str, alpha: float = 0.1) -> str:
    """LeakyRelu (Darknet's "leaky" activation has slope 0.1)."""
    return _node(net, "LeakyRelu", [x], name, net.shapes[x], alpha=alpha)


def sigmoid(net: Net, x: str, name: str) -> str:
    return _node(net, "Sigmoid", [x], name, net.shapes[x])


def mul(net: Net, a: str, b: str, name: str) -> str:
    """Element-wise product with broadcasting (b may be [N, C, 1, 1])."""
    return _node(net, "Mul", [a, b], name, net.shapes[a])


def swish(net: Net, x: str, name: str) -> str:
    """Swish / SiLU as Sigmoid + Mul (HardSwish and other opset-14 ops are not available)."""
    return mul(net, x, sigmoid(net, x, f"{name}.sigmoid"), name)


def add(net: Net, a: str, b: str, name: str) -> str:
    return _node(net, "Add", [a, b], name, net.shapes[a])


def concat(net: Net, xs: list[str], name: str) -> str:
    n, _, h, w = net.shapes[xs[0]]
    c = sum(net.shapes[x][1] for x in xs)
    return _node(net, "Concat", xs, name, [n, c, h, w], axis=1)


def _pool(net: Net, op: str, x: str, k: int, stride: int, pad: int, name: str, **attrs) -> str:
    n, c, h, w = net.shapes[x]
    shape = [n, c, _out_hw(h, k, stride, 2 * pad), _out_hw(w, k, stride, 2 * pad)]
    return _node(net, op, [x], name, shape, kernel_shape=[k, k], strides=[stride, stride],
                 pads=[pad, pad, pad, pad], **attrs)


def maxpool(net: Net, x: str, k: int, stride: int, pad: int, name: str) -> str:
    return _pool(net, "MaxPool", x, k, stride, pad, name)


def avgpool(net: Net, x: str, k: int, stride: int, pad: int, name: str) -> str:
    """AveragePool; padded cells are not counted (count_include_pad=0, as TF's SAME does)."""
    return _pool(net, "AveragePool", x, k, stride, pad, name, count_include_pad=0)


def global_avgpool(net: Net, x: str, name: str) -> str:
    n, c, _, _ = net.shapes[x]
    return _node(net, "GlobalAveragePool", [x], name, [n, c, 1, 1])


def conv_bn(net: Net, x: str, cout: int, k: int, name: str, act: str | None = "relu", **kw) -> str:
    """Conv (no bias) + BatchNormalization + activation ("relu", "relu6", "swish" or None)."""
    y = conv(net, x, cout, k, name, **kw)
    y = batchnorm(net, y, f"{name}.bn")
    if act is None:
        return y
    return {"relu": relu, "relu6": relu6, "swish": swish}[act](net, y, f"{name}.{act}")


def classifier(net: Net, x: str, classes: int, name: str = "fc") -> str:
    """GlobalAveragePool + Flatten + Gemm (transB=1, W [out, in]) + Softmax -> "output"."""
    if net.shapes[x][2:] != [1, 1]:
        x = global_avgpool(net, x, "pool")
    n, c, _, _ = net.shapes[x]
    flat = _node(net, "Flatten", [x], "flatten", [n, c], axis=1)
    _init(net, f"{name}.weight", net.rng.standard_normal((classes, c)) / np.sqrt(c))  # rescaled later
    _init(net, f"{name}.bias", net.rng.standard_normal(classes) * 0.01)
    logits = _node(net, "Gemm", [flat, f"{name}.weight", f"{name}.bias"], name, [n, classes], transB=1)
    net.classifier = name
    return _node(net, "Softmax", [logits], OUTPUT, [n, classes], axis=1)


def _round(a: np.ndarray, digits: int = 4) -> np.ndarray:
    """Round to `digits` significant digits so last-bit differences between CPU kernels vanish."""
    a = np.asarray(a, dtype=np.float64)
    mag = np.where(a == 0, 1.0, 10.0 ** (digits - 1 - np.floor(np.log10(np.abs(np.where(a == 0, 1.0, a))))))
    return np.round(a * mag) / mag


def _graph(net: Net, nodes: list[onnx.NodeProto], inits: list[onnx.TensorProto], outputs: list[str],
           value_info: bool) -> onnx.ModelProto:
    def info(name: str) -> onnx.ValueInfoProto:
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, net.shapes[name])

    inner = [info(n.output[0]) for n in nodes if n.output[0] not in outputs] if value_info else []
    graph = helper.make_graph(nodes, net.name, [info(INPUT)], [info(o) for o in outputs], inits,
                              value_info=inner)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                             ir_version=IR_VERSION, producer_name="memtrade.zoo")


def _calibrate(net: Net, seed: int) -> dict[str, np.ndarray]:
    """One ONNX Runtime pass with BN as InstanceNormalization; returns the new initializers."""
    import onnxruntime as ort

    bn_params = {f"{name}.{p}" for name in net.bns for p in ("weight", "bias")}
    nodes, inits = [], [t for t in net.inits if t.name not in bn_params]
    for node in net.nodes:
        draw = net.bns.get(node.name)
        if draw is None:
            nodes.append(node)
            continue
        # IN normalises by the actual stats; scale/bias make it equal the final BN exactly
        root = np.sqrt(draw.var_factor)
        inits.append(numpy_helper.from_array((draw.gamma / root).astype(np.float32), f"{node.name}.cal_s"))
        inits.append(numpy_helper.from_array(
            (draw.beta - draw.gamma * draw.mean_offset / root).astype(np.float32), f"{node.name}.cal_b"))
        nodes.append(helper.make_node("InstanceNormalization", [draw.x, f"{node.name}.cal_s", f"{node.name}.cal_b"],
                                      node.output, name=node.name, epsilon=BN_EPS))
    probes = sorted({d.x for d in net.bns.values()} | ({"flatten"} & net.shapes.keys()))
    model = _graph(net, nodes, inits, [OUTPUT] + [p for p in probes if p != OUTPUT], value_info=False)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1  # one thread: the same sums in the same order every run
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    # the calibration input's own stream, so it does not depend on how many weights were drawn
    x = np.random.default_rng([seed, 1]).standard_normal(net.shapes[INPUT]).astype(np.float32)
    names = [o.name for o in session.get_outputs()]
    found = dict(zip(names, session.run(names, {INPUT: x})))
    new: dict[str, np.ndarray] = {}
    for name, draw in net.bns.items():
        t = found[draw.x].astype(np.float64)
        mean, var = t.mean(axis=(0, 2, 3)), t.var(axis=(0, 2, 3))
        new[f"{name}.running_mean"] = _round(mean + draw.mean_offset * np.sqrt(var + BN_EPS))
        new[f"{name}.running_var"] = _round(var * draw.var_factor)
    if net.classifier is not None:
        w = {t.name: t for t in net.inits}[f"{net.classifier}.weight"]
        weight = numpy_helper.to_array(w).astype(np.float64)
        logits = found["flatten"].astype(np.float64) @ weight.T
        new[f"{net.classifier}.weight"] = weight * _round(LOGIT_SPREAD / max(float(logits.std()), 1e-12), 3)
    return new


def to_model(net: Net) -> onnx.ModelProto:
    """The finished, calibrated ModelProto: opset 13, IR 7, value_info for every inner tensor."""
    new = _calibrate(net, net.seed)
    inits = [t for t in net.inits if t.name not in new]
    inits += [numpy_helper.from_array(new[k].astype(np.float32), k) for k in sorted(new)]
    return _graph(net, net.nodes, inits, [OUTPUT], value_info=True)
