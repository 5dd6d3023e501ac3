"""Read an ONNX model into a `csdf.CNN`, fusing as TensorRT does.

Fused mode (the default) gives the layers an inference engine actually runs, so buffer and
parameter counts match the deployed application: BatchNormalization after a Conv is folded
into the Conv's W and B; activations (Relu, Clip/Relu6, Sigmoid, HardSigmoid, HardSwish, LeakyRelu)
that are the only consumer of a Conv, Gemm, BatchNormalization or Add output are fused into
that layer; x * sigmoid(x) after a Conv becomes a fused "Swish"; MatMul with constant
weights becomes a Gemm (a following Add of a constant is its bias). Unfused mode keeps every
ONNX node as a layer. In both modes Dropout and Identity are removed, Constant nodes
become values, MatMul with constant weights is a `Gemm` layer (W [out, in]), ReduceMean over
H and W with keepdims is a `GlobalAveragePool`, and an Add or Mul with a constant operand
keeps it as param "C" (hyper "const_input": its operand index). A BatchNormalization that
follows no single-consumer Conv (DenseNet's pre-activation) stays a layer with the ONNX
params scale, B, input_mean, input_var and hyper "epsilon".

Shapes come from ONNX shape inference (symbolic batch dimensions are fixed to 1 first) and
are padded to 4-D [N, C, H, W] with trailing ones. Layer names are the ONNX node names with
every character outside [A-Za-z0-9_] replaced by "_" (dots would clash with qualified
"cnn.layer" names); a node without a name takes its first output's name.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from csdf.model import CNN, INPUT, Layer
from sdf3.errors import InputError

ACTIVATIONS = ("Relu", "Clip", "Sigmoid", "HardSigmoid", "HardSwish", "LeakyRelu")
FUSE_ACTIVATION_INTO = {"Conv", "Gemm", "BatchNormalization", "Add"}
SIMPLE_OPS = {"MaxPool", "AveragePool", "GlobalAveragePool", "Add", "Mul", "Concat",
              "Flatten", "Reshape", "Pad", "Softmax", "BatchNormalization", *ACTIVATIONS}
SUPPORTED = sorted({"Conv", "Gemm", "MatMul", "ReduceMean", "Identity", "Dropout",
                    "Constant", *SIMPLE_OPS})


def load_onnx(path: str | Path, name: str, fused: bool = True) -> CNN:
    """Load the ONNX file at `path` as CNN `name`. Raises InputError for a missing or
    non-ONNX file, and for an operator it cannot model (naming the operator and node)."""
    path = Path(path)
    model = _read(path)
    return _Importer(model, path, name, fused).run()


def _read(path: Path) -> onnx.ModelProto:
    if not path.is_file():
        raise InputError(f"{path}: model file not found")
    try:
        model = onnx.load(str(path))
    except Exception as err:  # onnx raises DecodeError and friends
        raise InputError(f"{path}: not an ONNX model ({type(err).__name__})") from None
    if not model.graph.node:
        raise InputError(f"{path}: not an ONNX model (no graph nodes)")
    _fix_batch(model)
    try:
        return onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception as err:
        raise InputError(f"{path}: ONNX shape inference failed: {str(err).splitlines()[0]}") from None


def _fix_batch(model: onnx.ModelProto) -> None:
    """Symbolic or unknown dimensions of graph inputs become 1 (batch 1, as in the paper)."""
    for value in model.graph.input:
        for dim in value.type.tensor_type.shape.dim:
            if not dim.HasField("dim_value") or dim.dim_value <= 0:
                dim.Clear()
                dim.dim_value = 1


def clean_name(text: str) -> str:
    """A layer name usable in qualified names, file names and SDF3 XML."""
    return re.sub(r"[^A-Za-z0-9_]+", "_", text).strip("_")


def _to4(shape: tuple[int, ...]) -> tuple[int, int, int, int]:
    if len(shape) > 4:
        raise ValueError(f"rank {len(shape)} > 4")
    return tuple(int(d) for d in shape) + (1,) * (4 - len(shape))  # type: ignore[return-value]


@dataclass
class _Importer:
    model: onnx.ModelProto
    path: Path
    name: str
    fused: bool
    consts: dict[str, np.ndarray] = field(default_factory=dict)
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    producer: dict[str, str] = field(default_factory=dict)   # tensor -> layer name
    consumers: dict[str, list[int]] = field(default_factory=dict)
    outputs: set[str] = field(default_factory=set)
    done: set[int] = field(default_factory=set)
    layers: list[Layer] = field(default_factory=list)
    names: set[str] = field(default_factory=set)

    # ---- set-up -----------------------------------------------------------------------
    def run(self) -> CNN:
        graph = self.model.graph
        for init in graph.initializer:
            self.consts[init.name] = numpy_helper.to_array(init)
        original = int(sum(a.size for a in self.consts.values()))
        for value in [*graph.input, *graph.value_info, *graph.output]:
            dims = value.type.tensor_type.shape.dim
            if value.type.tensor_type.HasField("shape") and all(d.HasField("dim_value") for d in dims):
                self.shapes[value.name] = tuple(d.dim_value for d in dims)
        for i, node in enumerate(graph.node):
            for t in node.input:
                if t:
                    self.consumers.setdefault(t, []).append(i)
        self.outputs = {o.name for o in graph.output}
        for value in graph.input:
            if value.name not in self.consts:
                layer = Layer(self._unique(value.name or "input"), INPUT,
                              output_shape=self._shape(value.name, "graph input"))
                self._emit(layer, value.name)
        for i, node in enumerate(graph.node):
            if i not in self.done:
                self._node(i, node)
        cnn = CNN(self.name, source=str(self.path), original_param_count=original)
        for layer in self.layers:
            cnn.add_layer(layer)
        outs = [self.producer[o] for o in (o.name for o in graph.output) if o in self.producer]
        cnn.outputs = list(dict.fromkeys(outs))
        return cnn

    # ---- helpers ----------------------------------------------------------------------
    def _fail(self, node: onnx.NodeProto, what: str) -> InputError:
        return InputError(f"{self.path}: node '{node.name or node.output[0]}' "
                          f"({node.op_type}): {what}")

    def _unique(self, raw: str) -> str:
        base = clean_name(raw) or "layer"
        name, k = base, 2
        while name in self.names:
            name, k = f"{base}_{k}", k + 1
        self.names.add(name)
        return name

    def _shape(self, tensor: str, where: str) -> tuple[int, int, int, int]:
        if tensor not in self.shapes:
            raise InputError(f"{self.path}: cannot infer the shape of tensor '{tensor}' ({where})")
        try:
            return _to4(self.shapes[tensor])
        except ValueError as err:
            raise InputError(f"{self.path}: tensor '{tensor}' ({where}): {err}, expected at most 4-D") from None

    def _emit(self, layer: Layer, tensor: str) -> None:
        self.layers.append(layer)
        self.producer[tensor] = layer.name

    def _const(self, tensor: str) -> np.ndarray | None:
        return self.consts.get(tensor) if tensor else None

    def _sole_consumer(self, tensor: str) -> int | None:
        """The index of the one node reading `tensor`, if exactly one does and it is not a
        graph output (a fused tensor must not be needed elsewhere)."""
        users = self.consumers.get(tensor, [])
        if len(users) == 1 and tensor not in self.outputs and users[0] not in self.done:
            return users[0]
        return None

    def _tensor_inputs(self, node: onnx.NodeProto) -> list[str]:
        """Layer names feeding the node's non-constant inputs, in operand order."""
        out = []
        for t in node.input:
            if not t or t in self.consts:
                continue
            if t not in self.producer:
                raise self._fail(node, f"input '{t}' is neither a graph input nor produced by a node")
            out.append(self.producer[t])
        return out

    def _new(self, node: onnx.NodeProto, op: str, **hyper: Any) -> Layer:
        layer = Layer(self._unique(node.name or node.output[0]), op, hyper=dict(hyper),
                      inputs=self._tensor_inputs(node), onnx_nodes=[node.name or node.output[0]])
        return layer

    # ---- nodes ------------------------------------------------------------------------
    def _node(self, i: int, node: onnx.NodeProto) -> None:
        op = node.op_type
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        if op == "Constant":
            self.consts[node.output[0]] = numpy_helper.to_array(attrs["value"]) if "value" in attrs \
                else np.asarray(next(iter(attrs.values())))
            return
        if op in ("Identity", "Dropout"):
            src = node.input[0]
            if src in self.consts:
                self.consts[node.output[0]] = self.consts[src]
            else:
                self.producer[node.output[0]] = self.producer[src]
                if node.output[0] in self.outputs:
                    self.outputs.add(src)
            return
        if any(o for o in node.output[1:] if self.consumers.get(o) or o in self.outputs):
            raise self._fail(node, "only the first output can be used")
        if op == "Conv":
            layer = self._conv(node, attrs)
        elif op in ("Gemm", "MatMul"):
            layer = self._gemm(node, attrs)
        elif op == "ReduceMean":
            layer = self._reduce_mean(node, attrs)
        elif op in SIMPLE_OPS:
            layer = self._simple(node, attrs)
        else:
            raise self._fail(node, f"operator {op} cannot be modelled (supported: {', '.join(SUPPORTED)})")
        out = node.output[0]
        if self.fused and layer.op in FUSE_ACTIVATION_INTO:
            out = self._absorb(layer, out)
        layer.output_shape = self._shape(out, f"output of {layer.name}")
        self._emit(layer, out)

    def _absorb(self, layer: Layer, tensor: str) -> str:
        """Fold BN, a bias Add and activations that only read `tensor` into `layer`;
        return the tensor the fused layer finally produces."""
        nodes = self.model.graph.node
        while True:
            acts = layer.hyper.get("activation", [])
            j = self._sole_consumer(tensor)
            nxt = nodes[j] if j is not None else None
            if nxt is not None and not acts and layer.op == "Conv" \
                    and nxt.op_type == "BatchNormalization" and all(t in self.consts for t in nxt.input[1:5]):
                self._fold_bn(layer, nxt)
            elif nxt is not None and not acts and layer.hyper.get("from_matmul") and "B" not in layer.params \
                    and nxt.op_type == "Add" and self._bias_of(nxt, tensor, layer):
                pass   # MatMul + constant Add: the Add is the Gemm's bias
            elif nxt is not None and nxt.op_type in ACTIVATIONS:
                attrs = {a.name: onnx.helper.get_attribute_value(a) for a in nxt.attribute}
                layer.hyper.setdefault("activation", []).append(nxt.op_type)
                layer.hyper.update(self._act_hyper(nxt, attrs))
            elif layer.op == "Conv" and (j := self._swish(tensor)) is not None:
                layer.hyper.setdefault("activation", []).append("Swish")
                nxt = nodes[j]
            else:
                return tensor
            layer.onnx_nodes.append(nxt.name or nxt.output[0])
            self.done.add(j)
            tensor = nxt.output[0]

    def _swish(self, tensor: str) -> int | None:
        """Index of the Mul of x * Sigmoid(x) when x feeds exactly that Sigmoid and Mul;
        marks the Sigmoid done."""
        users = self.consumers.get(tensor, [])
        if len(users) != 2 or tensor in self.outputs:
            return None
        nodes = self.model.graph.node
        sig = [u for u in users if nodes[u].op_type == "Sigmoid"]
        mul = [u for u in users if nodes[u].op_type == "Mul"]
        if len(sig) != 1 or len(mul) != 1:
            return None
        s_out = nodes[sig[0]].output[0]
        if sorted(nodes[mul[0]].input) != sorted([tensor, s_out]) or self._sole_consumer(s_out) != mul[0]:
            return None
        self.done.add(sig[0])
        return mul[0]

    def _bias_of(self, add: onnx.NodeProto, tensor: str, layer: Layer) -> bool:
        other = [t for t in add.input if t != tensor]
        const = self._const(other[0]) if len(other) == 1 else None
        out = layer.params["W"].shape[0]
        if const is None or const.size not in (1, out):
            return False
        layer.params["B"] = np.broadcast_to(const.astype(np.float32).reshape(-1), (out,)).copy()
        return True

    def _fold_bn(self, layer: Layer, bn: onnx.NodeProto) -> None:
        """W' = W * s, B' = (B - mean) * s + beta with s = gamma / sqrt(var + eps)."""
        eps = next((onnx.helper.get_attribute_value(a) for a in bn.attribute if a.name == "epsilon"), 1e-5)
        gamma, beta, mean, var = (self.consts[t].astype(np.float64) for t in bn.input[1:5])
        scale = gamma / np.sqrt(var + eps)
        w = layer.params["W"].astype(np.float64)
        b = layer.params.get("B", np.zeros(w.shape[0])).astype(np.float64)
        layer.params["W"] = (w * scale.reshape(-1, *[1] * (w.ndim - 1))).astype(np.float32)
        layer.params["B"] = ((b - mean) * scale + beta).astype(np.float32)

    def _act_hyper(self, node: onnx.NodeProto, attrs: dict[str, Any]) -> dict[str, Any]:
        op = node.op_type
        if op == "Clip":
            lo = self._const(node.input[1]) if len(node.input) > 1 else None
            hi = self._const(node.input[2]) if len(node.input) > 2 else None
            if (len(node.input) > 1 and node.input[1] and lo is None) or \
                    (len(node.input) > 2 and node.input[2] and hi is None):
                raise self._fail(node, "Clip bounds must be constants")
            return {"clip_min": float(lo) if lo is not None else float(attrs.get("min", -np.inf)),
                    "clip_max": float(hi) if hi is not None else float(attrs.get("max", np.inf))}
        if op == "HardSigmoid":
            return {"alpha": float(attrs.get("alpha", 0.2)), "beta": float(attrs.get("beta", 0.5))}
        if op == "LeakyRelu":   # its own key: a HardSigmoid's "alpha" may sit in the same hyper
            return {"leaky_alpha": float(attrs.get("alpha", 0.01))}
        return {}

    def _conv(self, node: onnx.NodeProto, attrs: dict[str, Any]) -> Layer:
        w = self._const(node.input[1])
        if w is None or w.ndim != 4:
            raise self._fail(node, "expected constant 4-D weights (2-D convolution)")
        layer = self._new(node, "Conv")
        if len(layer.inputs) != 1:
            raise self._fail(node, "expected one tensor input")
        params = {"W": w.astype(np.float32)}
        if len(node.input) > 2 and node.input[2]:
            b = self._const(node.input[2])
            if b is None:
                raise self._fail(node, "expected a constant bias")
            params["B"] = b.astype(np.float32)
        layer.params = params
        kernel = list(attrs.get("kernel_shape", w.shape[2:]))
        layer.hyper.update(self._window(node, attrs, kernel), group=int(attrs.get("group", 1)))
        return layer

    def _window(self, node: onnx.NodeProto, attrs: dict[str, Any], kernel: list[int]) -> dict[str, Any]:
        """kernel_shape, strides, dilations and explicit pads [top, left, bottom, right]."""
        strides = list(attrs.get("strides", [1, 1]))
        dilations = list(attrs.get("dilations", [1, 1]))
        pads = list(attrs.get("pads", [0, 0, 0, 0]))
        auto = attrs.get("auto_pad", b"NOTSET")
        auto = auto.decode() if isinstance(auto, bytes) else auto
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            in_shape = self._shape(node.input[0], f"input of {node.name}")
            pads = [0, 0, 0, 0]
            for d in range(2):
                size = in_shape[2 + d]
                out = -(-size // strides[d])
                total = max(0, (out - 1) * strides[d] + (kernel[d] - 1) * dilations[d] + 1 - size)
                small, big = total // 2, total - total // 2
                pads[d], pads[d + 2] = (small, big) if auto == "SAME_UPPER" else (big, small)
        elif auto == "VALID":
            pads = [0, 0, 0, 0]
        return {"kernel_shape": [int(k) for k in kernel], "strides": [int(s) for s in strides],
                "pads": [int(p) for p in pads], "dilations": [int(d) for d in dilations]}

    def _gemm(self, node: onnx.NodeProto, attrs: dict[str, Any]) -> Layer:
        b = self._const(node.input[1])
        if b is None or b.ndim != 2:
            raise self._fail(node, "expected constant 2-D weights")
        if attrs.get("transA", 0):
            raise self._fail(node, "transA=1 is not supported")
        layer = self._new(node, "Gemm")
        if len(layer.inputs) != 1:
            raise self._fail(node, "expected one tensor input")
        if node.op_type == "MatMul":
            layer.hyper["from_matmul"] = True
            layer.params = {"W": np.ascontiguousarray(b.T).astype(np.float32)}
            return layer
        w = b if attrs.get("transB", 0) else b.T
        layer.params = {"W": (np.ascontiguousarray(w) * float(attrs.get("alpha", 1.0))).astype(np.float32)}
        if len(node.input) > 2 and node.input[2]:
            c = self._const(node.input[2])
            if c is None or c.size not in (1, w.shape[0]):
                raise self._fail(node, "expected a constant bias of one value per output")
            bias = np.broadcast_to(c.reshape(-1), (w.shape[0],)) * float(attrs.get("beta", 1.0))
            layer.params["B"] = bias.astype(np.float32)
        return layer

    def _reduce_mean(self, node: onnx.NodeProto, attrs: dict[str, Any]) -> Layer:
        axes = attrs.get("axes")
        if axes is None and len(node.input) > 1:
            axes = self._const(node.input[1])
        rank = len(self.shapes.get(node.input[0], ()))
        axes = sorted(int(a) % rank for a in axes) if axes is not None and rank else None
        if axes != [2, 3] or not attrs.get("keepdims", 1):
            raise self._fail(node, "operator ReduceMean cannot be modelled except over H and W "
                             "with keepdims=1 (a global average pool)")
        return self._new(node, "GlobalAveragePool")

    def _simple(self, node: onnx.NodeProto, attrs: dict[str, Any]) -> Layer:
        op = node.op_type
        layer = self._new(node, op)
        if not layer.inputs:
            raise self._fail(node, "expected at least one tensor input")
        hyper = layer.hyper
        if op in ("MaxPool", "AveragePool"):
            hyper.update(self._window(node, attrs, list(attrs["kernel_shape"])))
            hyper["ceil_mode"] = int(attrs.get("ceil_mode", 0))
            if op == "AveragePool":
                hyper["count_include_pad"] = int(attrs.get("count_include_pad", 0))
        elif op in ("Concat", "Softmax", "Flatten"):
            rank = len(self.shapes.get(node.input[0], (0,) * 4))
            axis = int(attrs.get("axis", 1 if op != "Softmax" else -1))
            hyper["axis"] = axis + rank if axis < 0 else axis
        elif op == "Reshape":
            shape = self.shapes.get(node.output[0])
            hyper["shape"] = [int(d) for d in shape] if shape else None
        elif op == "Pad":
            pads = attrs.get("pads")
            if pads is None and len(node.input) > 1:
                pads = self._const(node.input[1])
            if pads is None or len(pads) != 8 or (len(node.input) > 3 and node.input[3]):
                raise self._fail(node, "expected constant pads for a 4-D tensor (no axes input)")
            mode = attrs.get("mode", b"constant")
            hyper["pads"] = [int(p) for p in pads]
            hyper["mode"] = mode.decode() if isinstance(mode, bytes) else mode
            value = self._const(node.input[2]) if len(node.input) > 2 and node.input[2] else None
            hyper["value"] = float(value) if value is not None else float(attrs.get("value", 0.0))
        elif op == "BatchNormalization":
            names = ("scale", "B", "input_mean", "input_var")
            for key, t in zip(names, node.input[1:5]):
                if self._const(t) is None:
                    raise self._fail(node, "expected constant scale, bias, mean and variance")
                layer.params[key] = self._const(t).astype(np.float32)
            hyper["epsilon"] = float(attrs.get("epsilon", 1e-5))
        elif op in ("Add", "Mul"):
            consts = [(k, t) for k, t in enumerate(node.input) if t in self.consts]
            if consts:   # x + c or x * c: the constant is a parameter of the layer
                k, t = consts[0]
                layer.params["C"] = self.consts[t].astype(np.float32)
                hyper["const_input"] = k
        elif op in ACTIVATIONS:
            hyper.update(self._act_hyper(node, attrs))
        return layer

