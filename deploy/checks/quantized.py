"""The int8 reference of an int8 deployment: the whole network quantized with the deployment's
own parameters and run as one ONNX Runtime session.

An int8 deployment stores each CNN's input and every layer's output in one byte with that
tensor's scale and zero point (deploy/quant/scales.py) and holds every layer weight W as
symmetric int8 per output channel (deploy/quant/weights.py `per_channel`). The reference is the
original ONNX model with
- QuantizeLinear -> DequantizeLinear (the stored type, the tensor's scale and zero point) after
  the graph input and after the ONNX tensor of every layer (`Layer.output_tensor`), placed as
  deploy/checks/rounding.py places the fp16 Casts;
- every Conv/Gemm weight replaced by the values the deployment holds,
  dequantized(per_channel(W)):
  - a layer whose W is an ONNX tensor verbatim (its `weight_source`, csdf/layer_attrs.py
    WeightParams): that tensor becomes
    DequantizeLinear(int8, per-channel scale) of the same name (axis 0 for Conv; a MatMul's
    [in, out] tensor, the transpose of the layer's W: axis 1), so ONNX Runtime fuses the
    DequantizeLinear -> Conv -> QuantizeLinear groups into its QLinearConv kernels, as it does
    for the deployment's step models;
  - a Conv whose W and B were folded from the BatchNormalization after it (param_sources lacks
    "W"): the Conv reads DequantizeLinear of the folded W and the folded B (fp32), writes the
    BatchNormalization's output tensor, and the BatchNormalization node is removed;
  - a Gemm (its W is the ONNX B transposed or scaled by alpha): it reads DequantizeLinear of
    the layer's W with transB=1, alpha=1, and the layer's B with beta=1.
  Biases stay fp32: ONNX Runtime quantizes a Conv's fp32 bias itself (int32, the input scale
  times each channel's weight scale) when it fuses the group, for both computations alike.
A model that is already quantized (QDQ: `CNN.quantized`) is its own reference, unchanged: the
deployment uses its scales and weights.

With an opset below 13 (DequantizeLinear has no axis) the weights are replaced by their
dequantized fp32 values instead.
"""
from __future__ import annotations

from pathlib import Path
from typing import Collection

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from csdf.layer_attrs import OpAttrs, WeightParams
from csdf.model import CNN
from csdf.onnx_inputs import with_shapes
from deploy.checks.rounding import SUFFIX, rounded
from deploy.quant.calibration import stored
from deploy.quant.scales import ActivationScales, key
from deploy.quant.weights import dequantized, per_channel
from sdf3.errors import InputError

_TYPES = {"uint8": (TensorProto.UINT8, np.uint8), "int8": (TensorProto.INT8, np.int8)}


def quantized_reference(model_path: str | Path, cnn: CNN, scales: ActivationScales,
                        name: str | None = None) -> onnx.ModelProto:
    """The int8 reference of a deployment of `cnn` (the import of the model at `model_path`,
    `name` its name in `scales`' keys, else `cnn.name`), its graph inputs at the CNN's
    static shapes (module docstring)."""
    model = onnx.load(str(model_path))
    if cnn.quantized is not None:
        return model
    with_shapes(model, dict(cnn.input_shapes))
    tensors = stored(cnn, model)
    cnn_name = name or cnn.name
    missing = [layer for layer in tensors.values() if key(cnn_name, layer) not in scales.by_tensor]
    if missing:
        raise InputError(f"{model_path}: no activation scale for layer(s) {', '.join(missing[:5])} "
                         f"(keys '{cnn_name}/<layer>'), expected one for every stored tensor")
    model = held_weights(model, cnn)
    elem, np_type = _TYPES[scales.dtype]
    inits = []

    def trip(tensor: str, src: str, dst: str) -> list[onnx.NodeProto]:
        s = scales.of(cnn_name, tensors[tensor])
        scale, zero = dst + "_scale", dst + "_zero_point"
        inits.extend([numpy_helper.from_array(np.array(s.scale, np.float32), scale),
                      numpy_helper.from_array(np.array(s.zero_point, np_type), zero)])
        return [helper.make_node("QuantizeLinear", [src, scale, zero], [dst + "_q"]),
                helper.make_node("DequantizeLinear", [dst + "_q", scale, zero], [dst])]

    out = rounded(model, list(tensors), trip=trip)
    out.graph.initializer.extend(inits)
    return out


def held_weights(model: onnx.ModelProto, cnn: CNN, only: Collection[str] | None = None) -> onnx.ModelProto:
    """A copy of `model` computing every Conv/Gemm layer (of `only`, when given: layer names)
    with the weights an int8 deployment holds (module docstring); initializers no longer read
    are dropped."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    axis_ok = _opset(out) >= 13
    nodes = {n.name or n.output[0]: n for n in graph.node}
    done: set[str] = set()
    removed: list[onnx.NodeProto] = []
    added: list[onnx.NodeProto] = []
    for layer in cnn.layers():
        if layer.op not in ("Conv", "Gemm") or "W" not in layer.params:
            continue
        if only is not None and layer.name not in only:
            continue
        params = WeightParams.of(layer)
        q, scale = per_channel(params.weight)
        source = params.weight_source
        main = nodes[layer.onnx_nodes[0]]
        if source:
            if source in done:
                continue
            done.add(source)
            transposed = OpAttrs.of(layer).from_matmul     # MatMul's tensor: W transposed
            _drop_constant(graph, source)
            added += _weight(graph, source, q.T if transposed else q, scale, 1 if transposed else 0,
                             axis_ok)
            continue
        w_name = f"{layer.name}{SUFFIX}_W"
        added += _weight(graph, w_name, q, scale, 0, axis_ok)
        b_name = f"{layer.name}{SUFFIX}_B"
        if "B" in layer.params:
            graph.initializer.append(numpy_helper.from_array(params.bias.astype(np.float32), b_name))
        if layer.op == "Conv":
            bn = next(nodes[n] for n in layer.onnx_nodes if nodes[n].op_type == "BatchNormalization")
            main.input[1] = w_name
            if len(main.input) > 2:
                main.input[2] = b_name
            else:
                main.input.append(b_name)
            main.output[0] = bn.output[0]
            removed.append(bn)
        else:    # Gemm
            main.input[1] = w_name
            if "B" in layer.params:
                if len(main.input) > 2:
                    main.input[2] = b_name
                else:
                    main.input.append(b_name)
            _set(main, transB=1, alpha=1.0, beta=1.0)
    kept = [n for n in graph.node if all(n is not r for r in removed)]
    del graph.node[:]
    graph.node.extend(added + kept)
    read = {t for n in graph.node for t in n.input}
    unused = [t for t in graph.initializer if t.name not in read]
    for t in unused:
        graph.initializer.remove(t)
    names = {t.name for t in unused}
    for v in [v for v in graph.input if v.name in names]:
        graph.input.remove(v)
    return out


def _weight(graph: onnx.GraphProto, name: str, q: np.ndarray, scale: np.ndarray, axis: int,
            axis_ok: bool) -> list[onnx.NodeProto]:
    """Tensor `name` as DequantizeLinear(q, scale, axis) (nodes returned, initializers added),
    or, without DequantizeLinear's axis, as an initializer of the dequantized values."""
    if not axis_ok:
        values = dequantized(np.moveaxis(q, axis, 0), scale)
        graph.initializer.append(numpy_helper.from_array(np.moveaxis(values, 0, axis), name))
        return []
    graph.initializer.extend([numpy_helper.from_array(q, name + "_quantized"),
                              numpy_helper.from_array(scale.astype(np.float32), name + "_scale")])
    return [helper.make_node("DequantizeLinear", [name + "_quantized", name + "_scale"], [name],
                             axis=axis, name=name + "_DequantizeLinear")]


def _drop_constant(graph: onnx.GraphProto, name: str) -> None:
    """Remove the initializer or Constant node that holds tensor `name`."""
    for t in [t for t in graph.initializer if t.name == name]:
        graph.initializer.remove(t)
    for v in [v for v in graph.input if v.name == name]:
        graph.input.remove(v)
    for n in [n for n in graph.node if n.op_type == "Constant" and list(n.output) == [name]]:
        graph.node.remove(n)


def _set(node: onnx.NodeProto, **values) -> None:
    keep = [a for a in node.attribute if a.name not in values]
    del node.attribute[:]
    node.attribute.extend(keep + [helper.make_attribute(k, v) for k, v in values.items()])


def _opset(model: onnx.ModelProto) -> int:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)


def write_reference(source: str | Path, target: Path, cnn: CNN, scales: ActivationScales,
                    name: str | None = None) -> None:
    """The int8 reference of `cnn` (imported from `source`) written to `target`, self-contained
    (external weights embedded) and with the CNN's static input shapes, as the deployment's
    reference file."""
    model = quantized_reference(source, cnn, scales, name)
    with_shapes(model, dict(cnn.input_shapes))
    onnx.save(model, str(target))
