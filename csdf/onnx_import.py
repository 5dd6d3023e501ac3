"""Read an ONNX model into a `csdf.CNN`, fusing as TensorRT does.

Fused mode (the default) gives the layers an inference engine actually runs, so buffer and
parameter counts match the deployed application (csdf/onnx_fusion.py: BN folding, fused
activations, Swish and HardSwish patterns, MatMul biases). Unfused mode keeps every modelled
ONNX node as a layer. In both modes:
- constants are read wherever they appear in node order, and nodes computing only from
  constants or static shapes are evaluated (csdf/onnx_consts.py); nodes no graph output
  needs are dropped; Dropout and Identity are removed;
- MatMul of a 2-D tensor by constant weights is a `Gemm` layer (W [out, in]); ReduceMean
  over H and W (keepdims 0 or 1) is a `GlobalAveragePool` (its [N, C] output is [N, C, 1, 1]
  in 4-D, a flatten for free); an Add or Mul with a constant operand keeps it as param "C"
  (broadcast-aligned to 4-D; hyper "const_input": its operand index);
- a BatchNormalization that follows no single-consumer Conv (DenseNet's pre-activation) is
  a layer with params "scale" and "B" (2 per channel, the inference form);
- nodes that cannot be layers (unknown operators, tensors above 4-D, MatMul on 4-D
  tensors, Softmax over flattened axes before opset 13, ...) become opaque layers run
  verbatim (csdf/onnx_opaque.py).

Refused, with one line naming the node or tensor: a tensor crossing a layer boundary whose
shape is unknown or above 4-D, more than one graph input, a Conv whose group does not
divide its channels.

Shapes come from ONNX shape inference, once the graph inputs are static (the app file's
`input_shape`, a dynamic batch 1: csdf/onnx_inputs.py), and are padded to 4-D
[N, C, H, W] with trailing ones. Layer names: see csdf/node_names.py and docs/appfile.md.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import onnx

from csdf import onnx_opaque, onnx_qdq, qdq_checks, shape_checks
from csdf.layer_attrs import OpaqueAttrs
from csdf.model import CNN, INPUT, Layer
from csdf.node_names import layer_name
from csdf.onnx_consts import fold_constants, live_nodes, opsets, reinfer, static_shapes
from csdf.onnx_fusion import (ACTIVATIONS, FUSE_ACTIVATION_INTO, absorb, act_hyper,
                              attributes, bn_scale_shift)
from csdf.onnx_inputs import FixedInputs, fix_inputs
from csdf.onnx_support import modellable
from sdf3.errors import InputError



def load_onnx(path: str | Path, name: str, fused: bool = True, input_shape: Any = None) -> CNN:
    """Load the ONNX file at `path` as CNN `name`; `input_shape` fixes dynamic graph-input
    dimensions (csdf/onnx_inputs.py). Raises InputError for a missing or non-ONNX file and
    for a model that cannot run as layers (see the module docstring)."""
    path = Path(path)
    model, fixed = _read(path, input_shape)
    qdq_checks.check(model, path)                    # its scales and zero points are legal
    model, quantized = onnx_qdq.fold(model)          # a QDQ model: its int8 network
    points = frozenset(quantized.activations) if quantized is not None else frozenset()
    importer = _Importer(model, path, name, fused, points=points)
    cnn = onnx_qdq.attach(importer.run(), quantized, importer.inner, importer.apart)
    cnn.input_shapes = dict(fixed.shapes)
    cnn.batch_fixed = fixed.batch_fixed
    return cnn


def _read(path: Path, input_shape: Any = None) -> tuple[onnx.ModelProto, FixedInputs]:
    if not path.is_file():
        raise InputError(f"{path}: model file not found")
    try:
        model = onnx.load(str(path))
    except Exception as err:  # onnx raises DecodeError and friends
        raise InputError(f"{path}: not an ONNX model ({type(err).__name__})") from None
    if not model.graph.node:
        raise InputError(f"{path}: not an ONNX model (no graph nodes)")
    fixed = fix_inputs(model, str(path), input_shape)
    try:
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception as err:
        raise InputError(f"{path}: ONNX shape inference failed: {str(err).splitlines()[0]}") from None
    shape_checks.check(inferred, path, fixed.shapes, layer_name)   # what inference lets through
    return inferred, fixed


def _to4(shape: tuple[int, ...]) -> tuple[int, int, int, int]:
    if len(shape) > 4:
        raise ValueError(f"rank {len(shape)} > 4")
    return tuple(int(d) for d in shape) + (1,) * (4 - len(shape))  # type: ignore[return-value]


def _align4(const: np.ndarray, rank: int) -> np.ndarray:
    """A constant broadcast against a rank-`rank` tensor, shaped for its 4-D padded form."""
    arr = np.asarray(const, np.float32)
    if arr.ndim > rank:
        return arr
    return arr.reshape((1,) * (rank - arr.ndim) + arr.shape + (1,) * (4 - rank))


@dataclass
class _Importer:
    model: onnx.ModelProto
    path: Path
    name: str
    fused: bool
    consts: dict[str, np.ndarray] = field(default_factory=dict)
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    types: dict[str, int] = field(default_factory=dict)
    producer: dict[str, str] = field(default_factory=dict)   # tensor -> layer name
    consumers: dict[str, list[int]] = field(default_factory=dict)
    outputs: set[str] = field(default_factory=set)
    done: set[int] = field(default_factory=set)
    grouped: set[int] = field(default_factory=set)            # nodes of opaque groups
    layers: list[Layer] = field(default_factory=list)
    names: set[str] = field(default_factory=set)
    # a QDQ model's quantization points (csdf/onnx_qdq.py), and where fusion met them
    # (csdf/onnx_fusion.py): layer -> point -> tensor inside it; layer -> the op kept apart
    points: frozenset[str] = frozenset()
    inner: dict[str, dict[str, str]] = field(default_factory=dict)
    apart: dict[str, str] = field(default_factory=dict)

    # ---- set-up -----------------------------------------------------------------------
    def run(self) -> CNN:
        graph = self.model.graph
        self.opset = opsets(self.model).get("", 1)
        self.shapes, self.types = static_shapes(self.model)
        live = live_nodes(graph)
        self.consts, folded = fold_constants(self.model, self.shapes, live)
        if any(o and o not in self.shapes for i in live - folded for o in graph.node[i].output):
            self.shapes, self.types = reinfer(self.model, self.consts, folded)
        self.from_ort = self._shapes_from_ort(live - folded)
        if self.from_ort:     # Shape nodes of those tensors now fold: their int chains go
            self.consts, folded = fold_constants(self.model, self.shapes, live)
        for init in graph.initializer:
            self.shapes.setdefault(init.name, tuple(init.dims))
        original = int(sum(int(np.prod(i.dims)) for i in {i.name: i for i in graph.initializer}.values()))
        self.done = folded | (set(range(len(graph.node))) - live)
        for i, node in enumerate(graph.node):
            if i not in self.done:
                for t in node.input:
                    if t:
                        self.consumers.setdefault(t, []).append(i)
        self.outputs = {o.name for o in graph.output}
        inputs = [v for v in graph.input if v.name not in self.consts]
        if len(inputs) > 1:
            raise InputError(f"{self.path}: graph input '{inputs[1].name}': expected one graph input "
                             f"per CNN, the model has {len(inputs)} ({', '.join(v.name for v in inputs)})")
        for value in inputs:
            layer = Layer(self._unique(value.name or "input"), INPUT,
                          output_shape=self._shape(value.name, "graph input"))
            self._emit(layer, value.name)
        for unit in self._units():
            if isinstance(unit, frozenset):
                self._opaque(unit)
            elif unit not in self.done:
                self._node(unit, graph.node[unit])
        self._outputs_of_inputs()
        cnn = CNN(self.name, source=str(self.path), original_param_count=original,
                  shapes_from_ort=self.from_ort)
        for layer in self.layers:
            cnn.add_layer(layer)
        outs = [self.producer[o.name] for o in graph.output if o.name in self.producer]
        cnn.outputs = list(dict.fromkeys(outs))
        return cnn

    def _units(self) -> list:
        """Nodes to read, in a topological order: node indices, and frozensets for opaque
        groups (each read as one unit where its first node stands)."""
        nodes = self.model.graph.node
        todo = [i for i in range(len(nodes)) if i not in self.done]
        made = {o: i for i in todo for o in nodes[i].output if o}
        edges = [(made[t], i) for i in todo for t in nodes[i].input if t in made]
        self._refuse_cycles(todo, edges)
        inputs = [v.name for v in self.model.graph.input if v.name not in self.consts]
        self.axes = onnx_opaque.layouts(nodes, todo, inputs, self.shapes, self.consts, self.opset)
        unknown = {i for i in todo if not self._modellable(nodes[i])}
        groups = onnx_opaque.groups(nodes, unknown, edges) if unknown else []
        unit_of: dict[int, Any] = {i: i for i in todo}
        for grp in groups:
            self.grouped |= grp
            for i in grp:
                unit_of[i] = frozenset(grp)
        dag = nx.DiGraph()
        dag.add_nodes_from(dict.fromkeys(unit_of[i] for i in todo))
        dag.add_edges_from((unit_of[u], unit_of[v]) for u, v in edges if unit_of[u] != unit_of[v])
        first = {u: (min(u) if isinstance(u, frozenset) else u) for u in dag}
        return list(nx.lexicographical_topological_sort(dag, key=first.__getitem__))

    def _shapes_from_ort(self, nodes: set[int]) -> int:
        """Shapes ONNX inference left unknown, from one ONNX Runtime run when the graph
        inputs are static (csdf/onnx_ort_shapes.py); how many were taken."""
        from csdf import onnx_ort_shapes
        graph = self.model.graph
        missing = [o for i in sorted(nodes) for o in graph.node[i].output
                   if o and o not in self.shapes and o not in self.consts]
        inputs = onnx_ort_shapes.static_inputs(self.model, self.consts) if missing else None
        if not inputs or len(inputs) > 1:
            return 0                     # nothing missing, dynamic or several inputs: refused below
        found = onnx_ort_shapes.shapes_from_run(self.model, missing, inputs, str(self.path))
        for tensor, (shape, elem) in found.items():
            self.shapes[tensor] = shape
            self.types.setdefault(tensor, elem)
        return len(found)

    def _refuse_cycles(self, todo: list[int], edges: list[tuple[int, int]]) -> None:
        """ONNX graphs are acyclic (onnx.checker does not always say so): one line naming the
        nodes of a cycle rather than a failed sort deeper down."""
        graph = nx.DiGraph(edges)
        graph.add_nodes_from(todo)
        if nx.is_directed_acyclic_graph(graph):
            return
        nodes = self.model.graph.node
        loop = [u for u, _ in nx.find_cycle(graph)]
        names = " -> ".join(f"'{nodes[i].name or nodes[i].output[0]}' ({nodes[i].op_type})"
                            for i in loop + loop[:1])
        raise InputError(f"{self.path}: the graph has a cycle: {names}; expected an acyclic ONNX "
                         f"graph (each tensor computed before it is read)")

    def _outputs_of_inputs(self) -> None:
        """A graph output that is a graph input passed through (Identity, Dropout) gets a
        layer of its own, so that running the CNN writes it."""
        for out in self.model.graph.output:
            src = self.producer.get(out.name)
            if src is not None and any(l.name == src and l.op == INPUT for l in self.layers):
                layer = Layer(self._unique(out.name), "Identity", inputs=[src],
                              output_shape=self._shape(out.name, "graph output"), onnx_nodes=[out.name])
                self._emit(layer, out.name)

    # ---- helpers ----------------------------------------------------------------------
    def fail(self, node: onnx.NodeProto, what: str) -> InputError:
        return InputError(f"{self.path}: node '{node.name or node.output[0]}' "
                          f"({node.op_type}): {what}")

    _fail = fail

    def _unique(self, raw: str) -> str:
        base = layer_name(raw)
        name, k = base, 2
        while name in self.names:
            name, k = f"{base}_{k}", k + 1
        self.names.add(name)
        return name

    def shape4(self, tensor: str, where: str) -> tuple[int, int, int, int]:
        if tensor not in self.shapes:
            raise InputError(f"{self.path}: cannot infer the shape of tensor '{tensor}' ({where}); "
                             f"expected static shapes")
        try:
            return _to4(self.shapes[tensor])
        except ValueError as err:
            raise InputError(f"{self.path}: tensor '{tensor}' ({where}): {err}, expected at most "
                             f"4-D where it crosses a layer boundary") from None

    _shape = shape4

    def _emit(self, layer: Layer, tensor: str) -> None:
        self.layers.append(layer)
        self.producer[tensor] = layer.name
        layer.output_tensor = tensor

    def _const(self, tensor: str) -> np.ndarray | None:
        return self.consts.get(tensor) if tensor else None

    def sole_consumer(self, tensor: str) -> int | None:
        """The index of the one node reading `tensor`, if exactly one does, it is not a
        graph output (a fused tensor must not be needed elsewhere) and not opaque."""
        users = [u for u in self.consumers.get(tensor, []) if u not in self.done]
        if len(users) == 1 and tensor not in self.outputs and users[0] not in self.grouped:
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

    def _rank(self, tensor: str) -> int | None:
        shape = self.shapes.get(tensor)
        return None if shape is None else len(shape)

    def _modellable(self, node: onnx.NodeProto) -> bool:
        return modellable(self, node)

    # ---- nodes ------------------------------------------------------------------------
    def _node(self, i: int, node: onnx.NodeProto) -> None:
        op = node.op_type
        attrs = attributes(node)
        if op in ("Identity", "Dropout"):
            src = node.input[0]
            if src in self.consts:
                self.consts[node.output[0]] = self.consts[src]
            else:
                self.producer[node.output[0]] = self.producer[src]
                if node.output[0] in self.outputs:
                    self.outputs.add(src)
            return
        if op == "Conv":
            layer = self._conv(node, attrs)
        elif op in ("Gemm", "MatMul"):
            layer = self._gemm(node, attrs)
        elif op == "ReduceMean":
            layer = self._new(node, "GlobalAveragePool")
        else:
            layer = self._simple(node, attrs)
        out = node.output[0]
        if self.fused and layer.op in FUSE_ACTIVATION_INTO:
            out = absorb(self, layer, out)
        layer.output_shape = self._shape(out, f"output of {layer.name}")
        self._emit(layer, out)

    def _opaque(self, group: frozenset) -> None:
        for layer, tensor in onnx_opaque.build(self, sorted(group)):
            self._emit(layer, tensor)
            # a QDQ model's points between the layer's nodes: its steps round there too
            # (deploy/steps/opaque.py), each point named by its ONNX tensor
            for raw in OpaqueAttrs.of(layer).nodes:
                node = onnx.NodeProto.FromString(raw)
                for t in node.output:
                    if t in self.points and t != tensor:
                        self.inner.setdefault(layer.name, {})[t] = t
        self.done |= group

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
            layer.param_sources["B"] = node.input[2]
        layer.params = params
        layer.param_sources["W"] = node.input[1]
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
            layer.param_sources["W"] = node.input[1]   # one tensor, however many layers read it
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
            axis = int(attrs.get("axis", -1 if op == "Softmax" and self.opset >= 13 else 1))
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
            value = np.asarray(value).reshape(-1)[0] if value is not None and np.size(value) else None
            hyper["value"] = float(value) if value is not None else float(attrs.get("value", 0.0))
        elif op == "BatchNormalization":
            scale, shift = bn_scale_shift(node, self.consts)   # inference form: 2 per channel
            layer.params = {"scale": scale.astype(np.float32), "B": shift.astype(np.float32)}
        elif op in ("Add", "Mul"):
            consts = [(k, t) for k, t in enumerate(node.input) if t in self.consts]
            if consts:   # x + c or x * c: the constant is a parameter of the layer
                k, t = consts[0]
                layer.params["C"] = _align4(self.consts[t], len(self.shapes[node.output[0]]))
                layer.param_sources["C"] = t
                hyper["const_input"] = k
        elif op in ACTIVATIONS:
            hyper.update(act_hyper(self, node))
        return layer

