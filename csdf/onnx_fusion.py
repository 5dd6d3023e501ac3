"""Fusion as TensorRT does it: what the importer folds into the layer before it.

- BatchNormalization after a Conv folds into W and B: W' = W s, B' = (B - mean) s + beta
  with s = gamma / sqrt(var + eps). A BatchNormalization that cannot fold is, at inference,
  a per-channel scale s and shift beta - mean s: two parameters per channel, as TensorRT
  stores it (`bn_scale_shift`).
- An activation (Relu, Clip with constant bounds, Sigmoid, HardSigmoid, HardSwish, LeakyRelu) that is
  the only reader of a Conv, Gemm, BatchNormalization or Add output joins that layer.
- x * Sigmoid(x) is a fused "Swish"; x * HardSigmoid(x) with alpha 1/6, beta 1/2 is a fused
  "HardSwish" (what PyTorch exports for nn.Hardswish below opset 14).
- MatMul with constant weights followed by an Add of a constant vector: the Add is the bias.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import onnx

ACTIVATIONS = ("Relu", "Clip", "Sigmoid", "HardSigmoid", "HardSwish", "LeakyRelu")
FUSE_ACTIVATION_INTO = {"Conv", "Gemm", "BatchNormalization", "Add"}
HARDSWISH_ALPHA, HARDSWISH_BETA = 1.0 / 6.0, 0.5


def attributes(node: onnx.NodeProto) -> dict[str, Any]:
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def absorb(imp, layer, tensor: str) -> str:
    """Fold BN, a bias Add and activations that only read `tensor` into `layer`; return
    the tensor the fused layer finally produces. `imp` is the running csdf.onnx_import
    importer (constants, consumers, nodes already taken)."""
    nodes = imp.model.graph.node
    while True:
        acts = layer.hyper.get("activation", [])
        j = imp.sole_consumer(tensor)
        nxt = nodes[j] if j is not None else None
        if nxt is not None and not acts and layer.op == "Conv" \
                and nxt.op_type == "BatchNormalization" and all(t in imp.consts for t in nxt.input[1:5]):
            if _kept_apart(imp, layer, tensor, nxt):
                return tensor
            fold_bn(layer, nxt, imp.consts)
        elif nxt is not None and not acts and layer.hyper.get("from_matmul") and "B" not in layer.params \
                and nxt.op_type == "Add" and (bias := _bias_of(imp, nxt, tensor, layer)) is not None:
            if _kept_apart(imp, layer, tensor, nxt):
                return tensor
            layer.params["B"] = bias   # MatMul + constant Add: the Add is the Gemm's bias
        elif nxt is not None and nxt.op_type in ACTIVATIONS and act_known(imp, nxt):
            _point(imp, layer, f"act{len(acts)}", tensor)
            layer.hyper.setdefault("activation", []).append(nxt.op_type)
            layer.hyper.update(act_hyper(imp, nxt))
        elif (found := _gated(imp, tensor, "Sigmoid") or _gated(imp, tensor, "HardSigmoid")) is not None:
            j, gate = found
            _point(imp, layer, f"act{len(acts)}", tensor)
            _point(imp, layer, f"gate{len(acts)}", nodes[gate].output[0])
            swish = "Swish" if nodes[gate].op_type == "Sigmoid" else "HardSwish"
            layer.hyper.setdefault("activation", []).append(swish)
            nxt = nodes[j]
        else:
            return tensor
        layer.onnx_nodes.append(nxt.name or nxt.output[0])
        imp.done.add(j)
        tensor = nxt.output[0]


def _point(imp, layer, point: str, tensor: str) -> None:
    """Note that `tensor`, computed inside `layer` at `point` ("act<i>": what its i-th fused
    activation reads; "gate<i>": the gate of its i-th, a Swish or HardSwish), is a
    quantization point of a QDQ model (`imp.points`): csdf/onnx_qdq.py `attach` keeps its
    scale, and an int8 step rounds it there."""
    if tensor in imp.points:
        imp.inner.setdefault(layer.name, {})[point] = tensor


def _gated(imp, tensor: str, gate: str) -> tuple[int, int] | None:
    """Indices of the Mul of x * gate(x) and of the gate, when x feeds exactly that gate and
    that Mul (a HardSigmoid gate must be HardSwish's: alpha 1/6, beta 1/2); marks the gate
    done."""
    users = [u for u in imp.consumers.get(tensor, []) if u not in imp.done]
    if len(users) != 2 or tensor in imp.outputs or any(u in imp.grouped for u in users):
        return None
    nodes = imp.model.graph.node
    g = [u for u in users if nodes[u].op_type == gate]
    mul = [u for u in users if nodes[u].op_type == "Mul"]
    if len(g) != 1 or len(mul) != 1:
        return None
    if gate == "HardSigmoid":
        attrs = attributes(nodes[g[0]])
        if abs(attrs.get("alpha", 0.2) - HARDSWISH_ALPHA) > 1e-6 or abs(attrs.get("beta", 0.5) - HARDSWISH_BETA) > 1e-6:
            return None
    g_out = nodes[g[0]].output[0]
    if sorted(nodes[mul[0]].input) != sorted([tensor, g_out]) or imp.sole_consumer(g_out) != mul[0]:
        return None
    imp.done.add(g[0])
    return mul[0], g[0]


def _kept_apart(imp, layer, tensor: str, nxt: onnx.NodeProto) -> bool:
    """Whether `nxt` (a BatchNormalization or bias Add that would fold into `layer`) stays a
    layer of its own because `tensor`, between them, is a quantization point of a QDQ model:
    folding would change the values that point rounds. Noted in `imp.apart`."""
    if tensor not in imp.points:
        return False
    imp.apart[layer.name] = nxt.op_type
    return True


def _bias_of(imp, add: onnx.NodeProto, tensor: str, layer) -> np.ndarray | None:
    """The bias a MatMul layer's constant Add gives, or None when it is not one."""
    other = [t for t in add.input if t != tensor]
    const = imp.consts.get(other[0]) if len(other) == 1 else None
    out = layer.params["W"].shape[0]
    if const is None or const.size not in (1, out):
        return None
    return np.broadcast_to(const.astype(np.float32).reshape(-1), (out,)).copy()


def bn_scale_shift(bn: onnx.NodeProto, consts: dict) -> tuple[np.ndarray, np.ndarray]:
    """s = gamma / sqrt(var + eps) and beta - mean * s, in float64."""
    eps = float(attributes(bn).get("epsilon", 1e-5))
    gamma, beta, mean, var = (consts[t].astype(np.float64) for t in bn.input[1:5])
    scale = gamma / np.sqrt(var + eps)
    return scale, beta - mean * scale


def fold_bn(layer, bn: onnx.NodeProto, consts: dict) -> None:
    """W' = W * s, B' = (B - mean) * s + beta = B s + shift."""
    scale, shift = bn_scale_shift(bn, consts)
    w = layer.params["W"].astype(np.float64)
    b = layer.params.get("B", np.zeros(w.shape[0])).astype(np.float64)
    layer.params["W"] = (w * scale.reshape(-1, *[1] * (w.ndim - 1))).astype(np.float32)
    layer.params["B"] = (b * scale + shift).astype(np.float32)
    layer.param_sources.pop("W", None)
    layer.param_sources.pop("B", None)


def act_known(imp, node: onnx.NodeProto) -> bool:
    """An activation is fusable when its extra inputs (Clip's bounds) are constants."""
    return all(not t or t in imp.consts for t in node.input[1:])


def act_hyper(imp, node: onnx.NodeProto) -> dict[str, Any]:
    op, attrs = node.op_type, attributes(node)
    if op == "Clip":
        lo = imp.consts.get(node.input[1]) if len(node.input) > 1 and node.input[1] else None
        hi = imp.consts.get(node.input[2]) if len(node.input) > 2 and node.input[2] else None
        return {"clip_min": float(np.asarray(lo).reshape(-1)[0]) if lo is not None else float(attrs.get("min", -np.inf)),
                "clip_max": float(np.asarray(hi).reshape(-1)[0]) if hi is not None else float(attrs.get("max", np.inf))}
    if op == "HardSigmoid":
        return {"alpha": float(attrs.get("alpha", 0.2)), "beta": float(attrs.get("beta", 0.5))}
    if op == "LeakyRelu":   # its own key: a HardSigmoid's "alpha" may sit in the same hyper
        return {"leaky_alpha": float(attrs.get("alpha", 0.01))}
    return {}
