"""Per-layer work: multiply-accumulates, FLOPs and elements moved, from a csdf CNN.

The throughput models (explorer.throughput.device_profile) turn these counts into time. Counts are in
elements, not bytes, so one count serves every precision: bytes = elements x data_bytes
(tensors) or x par_bytes (parameters).

Conventions (stated, so tests can recompute them independently):
- Conv: MACs = output elements x (C_in / group) x kh x kw; Gemm: MACs = N x in x out.
- FLOPs = 2 x MACs, + 1 per output element for a bias, + 1 per output element per fused
  activation. Pools: one FLOP per window element (MaxPool compares, AveragePool adds);
  GlobalAveragePool one per input element. Element-wise Add/Mul/Sum: (inputs - 1) per output
  element. Softmax 3 per element; unfused BatchNormalization 2; unfused activations 1.
  Concat, Pad and Synthetic layers compute nothing, they only move data. Opaque layers: the
  MACs and FLOPs csdf.onnx_opaque.estimate_work counts over their ONNX nodes.
- Elements moved: every input edge read once, the output written once, parameters read once.
  Views (Input, Flatten, Reshape) move nothing: inference engines alias them.
- Halo: processed by parts in Φ phases, a kxk sliding window with stride s re-reads k - s rows
  of its input in each phase after the first (consecutive windows overlap).
"""
from __future__ import annotations

from dataclasses import dataclass
from math import prod

from csdf.model import CNN, Layer
from sdf3.errors import InputError

VIEW_OPS = {"Input", "Flatten", "Reshape"}
WINDOW_OPS = {"Conv", "MaxPool", "AveragePool"}
ACTIVATION_OPS = {"Relu", "Clip", "Sigmoid", "HardSigmoid", "HardSwish", "LeakyRelu", "Tanh"}
MOVE_OPS = {"Concat", "Pad", "Synthetic", "Identity", "Dropout"}
ELEMENTWISE_OPS = {"Add", "Mul", "Sum", "Sub", "Div", "Max", "Min"}


@dataclass(frozen=True)
class LayerCost:
    """The work of one layer for one frame (batch as in its shapes)."""
    macs: int
    flops: int
    in_elems: int        # tensor elements read (all inputs)
    out_elems: int       # tensor elements written
    param_elems: int     # parameter elements read
    halo_rows: int = 0   # input rows re-read per extra phase (k_eff - stride, >= 0)
    row_elems: int = 0   # elements in one input row (N x C_in x W_in)
    activations: tuple[str, ...] = ()   # fused activations, in order (engines may not fuse)

    def halo_elems(self, phases: int) -> int:
        """Extra input elements re-read when the layer runs in `phases` phases instead of 1."""
        return max(0, phases - 1) * self.halo_rows * self.row_elems

    def bytes(self, data_bytes: int, par_bytes: int, phases: int = 1) -> int:
        """Bytes moved at a precision, halo re-reads included."""
        tensors = self.in_elems + self.out_elems + self.halo_elems(phases)
        return tensors * data_bytes + self.param_elems * par_bytes


def _input_shapes(cnn: CNN, layer: Layer) -> list[tuple[int, int, int, int]]:
    return [cnn.edge_shape(src, layer.name) for src in layer.inputs]


def _pair(value, default: int) -> tuple[int, int]:
    if value is None:
        return default, default
    if isinstance(value, int):
        return value, value
    vals = list(value)
    return (int(vals[0]), int(vals[-1])) if vals else (default, default)


def _conv_macs(layer: Layer, in_shapes) -> int:
    out = layer.out_elements
    w = layer.params.get("W")
    if w is not None and w.ndim == 4:
        return out * int(w.shape[1] * w.shape[2] * w.shape[3])
    if not in_shapes:
        raise InputError(f"layer {layer.name}: Conv without weights or input shape")
    kh, kw = _pair(layer.hyper.get("kernel_shape"), 1)
    group = int(layer.hyper.get("group", 1))
    return out * (in_shapes[0][1] // group) * kh * kw


def _gemm_macs(layer: Layer, in_shapes) -> int:
    batch = layer.output_shape[0]
    w = layer.params.get("W")
    if w is not None and w.ndim == 2:
        return batch * int(w.shape[0] * w.shape[1])
    if not in_shapes:
        raise InputError(f"layer {layer.name}: Gemm without weights or input shape")
    n_in = prod(in_shapes[0]) // in_shapes[0][0]
    return batch * n_in * (layer.out_elements // batch)


def _halo(layer: Layer, in_shapes) -> tuple[int, int]:
    """(rows re-read per extra phase, elements per input row) for sliding windows."""
    if layer.op not in WINDOW_OPS or not in_shapes:
        return 0, 0
    kh, _ = _pair(layer.hyper.get("kernel_shape"), 1)
    sh, _ = _pair(layer.hyper.get("strides"), 1)
    dh, _ = _pair(layer.hyper.get("dilations"), 1)
    k_eff = (kh - 1) * dh + 1
    n, c, _, w = in_shapes[0]
    return max(0, k_eff - sh), n * c * w


def layer_cost(cnn: CNN, name: str) -> LayerCost:
    """The cost of layer `name` of `cnn` (see the module docstring for the conventions)."""
    layer = cnn.layer(name)
    op = layer.op
    in_shapes = _input_shapes(cnn, layer)
    out = layer.out_elements
    in_elems = sum(prod(s) for s in in_shapes)
    params = layer.param_count
    acts = len(layer.hyper.get("activation", []) or [])
    has_bias = "B" in layer.params
    macs = 0
    if op in VIEW_OPS:
        return LayerCost(0, 0, 0, 0, 0)
    if op == "Conv":
        macs = _conv_macs(layer, in_shapes)
        flops = 2 * macs
    elif op in ("Gemm", "MatMul"):
        macs = _gemm_macs(layer, in_shapes)
        flops = 2 * macs
    elif op in ("MaxPool", "AveragePool"):
        kh, kw = _pair(layer.hyper.get("kernel_shape"), 1)
        flops = out * kh * kw
    elif op in ("GlobalAveragePool", "GlobalMaxPool", "ReduceMean"):
        flops = in_elems
    elif op in ELEMENTWISE_OPS:
        flops = out * max(1, len(in_shapes) - 1)
    elif op == "Softmax":
        flops = 3 * out
    elif op == "BatchNormalization":
        flops = 2 * out
    elif op in ACTIVATION_OPS:
        flops = out
    elif op in MOVE_OPS:
        flops = 0
    elif op == "Opaque":   # ONNX nodes run verbatim: work estimated at import (csdf/onnx_opaque.py)
        macs, flops = int(layer.hyper.get("macs", 0)), int(layer.hyper.get("flops", out))
    else:
        raise InputError(f"layer {name} of {cnn.name}: operator {op} has no cost model")
    flops += (out if has_bias else 0) + acts * out
    halo_rows, row_elems = _halo(layer, in_shapes)
    return LayerCost(macs, flops, in_elems, out, params, halo_rows, row_elems,
                     tuple(layer.hyper.get("activation", []) or []))


def cnn_costs(cnn: CNN) -> dict[str, LayerCost]:
    """Costs of every layer of `cnn`, in topological order."""
    return {name: layer_cost(cnn, name) for name in cnn.order()}


def total_macs(cnn: CNN) -> int:
    return sum(c.macs for c in cnn_costs(cnn).values())
