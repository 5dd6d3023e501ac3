"""Which ONNX nodes the importer makes layers (the rest go to opaque groups,
csdf/onnx_opaque.py), and the valid-looking nodes it refuses outright.

A node is a layer when its operator is modelled, every tensor it reads or writes has a
static shape of rank 4 or less with H and W (where they can be followed from the graph
input) on axes 2 and 3, and its operator-specific conditions hold: constant Conv weights
of a 2-D convolution, Gemm/MatMul of a 2-D tensor by constant 2-D weights, ReduceMean over
H and W, Softmax over one axis (before opset 13 only where the flattened axes are 1),
constant Pad pads and value, Add/Mul operands of the output's rank, BatchNormalization
with constant statistics (inference mode), Clip with constant bounds.
"""
from __future__ import annotations

import onnx

from csdf.onnx_fusion import ACTIVATIONS, act_known, attributes

SIMPLE_OPS = {"MaxPool", "AveragePool", "GlobalAveragePool", "Add", "Mul", "Concat",
              "Flatten", "Reshape", "Pad", "Softmax", "BatchNormalization", *ACTIVATIONS}
MODELLED = sorted({"Conv", "Gemm", "MatMul", "ReduceMean", "Identity", "Dropout", *SIMPLE_OPS})


def modellable(imp, node: onnx.NodeProto) -> bool:
    """True when the node can be (or fuse into) a layer; False sends it to an opaque
    group. Raises for a valid-looking node that cannot run at all."""
    op = node.op_type
    if node.domain not in ("", "ai.onnx") or op not in MODELLED:
        return False
    if op in ("Identity", "Dropout"):
        return True
    if any(o for o in node.output[1:] if imp.consumers.get(o) or o in imp.outputs):
        return False
    tensors = [t for t in node.input if t and t not in imp.consts]
    ranks = [imp._rank(t) for t in [*tensors, node.output[0]]]
    if not tensors or any(r is None or r > 4 for r in ranks):
        return False
    if any(imp.axes.get(t, (2, 3)) != (2, 3) for t in tensors):
        return False   # H and W are not axes 2 and 3 (a channels-last tensor)
    attrs = attributes(node)
    rank = ranks[0]
    if op == "Conv":
        w = imp._const(node.input[1])
        if w is None or w.ndim != 4 or len(tensors) != 1 or rank != 4 or (
                len(node.input) > 2 and node.input[2] and node.input[2] not in imp.consts):
            return False
        group, cin = int(attrs.get("group", 1)), imp.shapes[tensors[0]][1]
        if group < 1 or cin % group or w.shape[1] * group != cin or w.shape[0] % group:
            raise imp.fail(node, f"group {group} does not divide the {cin} input channels "
                            f"into the weights' {w.shape[1]} per group (output {w.shape[0]})")
        return True
    if op in ("Gemm", "MatMul"):
        b = imp._const(node.input[1])
        return (b is not None and b.ndim == 2 and rank == 2 and len(tensors) == 1
                and not attrs.get("transA", 0) and (len(node.input) < 3 or not node.input[2]
                                                   or node.input[2] in imp.consts))
    if op == "ReduceMean":
        axes = attrs.get("axes")
        if axes is None and len(node.input) > 1 and node.input[1]:
            axes = imp._const(node.input[1])
        return axes is not None and rank == 4 and sorted(int(a) % 4 for a in axes) == [2, 3]
    if op in ("MaxPool", "AveragePool", "GlobalAveragePool"):
        return rank == 4 and len(attrs.get("kernel_shape", [1, 1])) == 2
    if op == "Softmax":   # before opset 13 Softmax normalises over all axes from `axis` on
        axis = int(attrs.get("axis", 1 if imp.opset < 13 else -1)) % rank
        return imp.opset >= 13 or all(d == 1 for d in imp.shapes[tensors[0]][axis + 1:])
    if op == "Pad":
        pads = attrs.get("pads")
        if pads is None and len(node.input) > 1:
            pads = imp._const(node.input[1])
        value_ok = len(node.input) < 3 or not node.input[2] or node.input[2] in imp.consts
        return (pads is not None and len(pads) == 8 and value_ok
                and not (len(node.input) > 3 and node.input[3]))
    if op in ("Add", "Mul"):
        return all(r == ranks[-1] for r in ranks)
    if op == "BatchNormalization":
        return all(t in imp.consts for t in node.input[1:5]) and not attrs.get("training_mode", 0)
    if op in ACTIVATIONS:
        return act_known(imp, node)
    return True

