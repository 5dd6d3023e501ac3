"""Typed views of a layer's ONNX-style attributes (`Layer.hyper`, csdf/model.py): the keys
and ONNX's defaults are read here once, so the code that sizes a layer's windows (csdf.parts)
and builds its step models (deploy/steps) reads fields. An attribute the layer does not give
is None where its readers default it differently (a Conv's kernel is its W's), else ONNX's
default. `with_hyper` is the layer with some attributes changed (a part's pads, a tile's)."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from csdf.model import Layer


def _ints(values: Any) -> tuple[int, ...] | None:
    return None if values is None else tuple(int(v) for v in values)


def with_hyper(layer: Layer, **changes: Any) -> Layer:
    """`layer` with the attributes in `changes` set (the others kept)."""
    return replace(layer, hyper={**layer.hyper, **changes})


@dataclass(frozen=True)
class WindowAttrs:
    """A Conv's or pool's window: kernel_shape, strides, pads ([top, left, bottom, right]),
    dilations (each None when not given), group, ceil_mode and count_include_pad (None when
    not given: a node keeps ONNX's own default), auto_pad."""
    kernel_shape: tuple[int, ...] | None
    strides: tuple[int, ...] | None
    pads: tuple[int, ...] | None
    dilations: tuple[int, ...] | None
    group: int = 1
    ceil_mode: int | None = None
    count_include_pad: int | None = None
    auto_pad: Any = "NOTSET"

    @classmethod
    def of(cls, layer: Layer) -> WindowAttrs:
        h = layer.hyper
        ceil, count = h.get("ceil_mode"), h.get("count_include_pad")
        return cls(_ints(h.get("kernel_shape")), _ints(h.get("strides")), _ints(h.get("pads")),
                   _ints(h.get("dilations")), int(h.get("group", 1)),
                   None if ceil is None else int(ceil), None if count is None else int(count),
                   h.get("auto_pad", "NOTSET"))

    @property
    def kernel(self) -> tuple[int, ...]:
        return self.kernel_shape or (1, 1)

    @property
    def stride(self) -> tuple[int, ...]:
        return self.strides or (1, 1)

    @property
    def dilation(self) -> tuple[int, ...]:
        return self.dilations or (1, 1)

    @property
    def pad(self) -> tuple[int, ...]:
        return self.pads or (0, 0, 0, 0)

    @property
    def counts_pad(self) -> bool:
        """An AveragePool that divides by the padded window (count_include_pad 1)."""
        return bool(self.count_include_pad)


@dataclass(frozen=True)
class ActivationAttrs:
    """The activations fused into a layer, in order, and their parameters: Clip's bounds
    (None: unbounded), HardSigmoid's alpha and beta, LeakyRelu's alpha."""
    activation: tuple[str, ...] = ()
    clip: tuple[float | None, float | None] = (None, None)
    alpha: float = 0.2
    beta: float = 0.5
    leaky_alpha: float = 0.01

    @classmethod
    def of(cls, layer: Layer) -> ActivationAttrs:
        h = layer.hyper
        lo, hi = h.get("clip_min"), h.get("clip_max")
        if lo is None and "clip" in h:
            lo, hi = h.get("clip")
        return cls(tuple(h.get("activation", []) or []), (lo, hi), float(h.get("alpha", 0.2)),
                   float(h.get("beta", 0.5)), float(h.get("leaky_alpha", 0.01)))


@dataclass(frozen=True)
class PadAttrs:
    """A Pad layer: its pads (4 values [top, left, bottom, right] or ONNX's 8), the value
    and mode, and `fill_rows`: rows of a part that lies wholly in the vertical padding."""
    pads: tuple[int, ...]
    value: float = 0.0
    mode: str = "constant"
    fill_rows: int = 1

    @classmethod
    def of(cls, layer: Layer) -> PadAttrs:
        h = layer.hyper
        return cls(_ints(h.get("pads", [])) or (), float(h.get("value", 0.0)),
                   str(h.get("mode", "constant")), int(h.get("fill_rows", 1)))


@dataclass(frozen=True)
class OpAttrs:
    """The other attributes step builders read: `axis` (Concat, Softmax; None when not
    given), `const_input` (where an elementwise op's constant operand goes; None: last),
    an opaque group's source `opset` ([domain, version] pairs) and `ir_version`, and
    `from_matmul` (a Gemm whose W is a MatMul's tensor, transposed)."""
    axis: int | None = None
    const_input: int | None = None
    opset: tuple[tuple[str, int], ...] | None = None
    ir_version: int | None = None
    from_matmul: bool = False

    @classmethod
    def of(cls, layer: Layer) -> OpAttrs:
        h = layer.hyper
        axis, const, opset, ir = h.get("axis"), h.get("const_input"), h.get("opset"), \
            h.get("ir_version")
        return cls(None if axis is None else int(axis), None if const is None else int(const),
                   None if opset is None else tuple((str(d), int(v)) for d, v in opset),
                   None if ir is None else int(ir), bool(h.get("from_matmul", False)))


@dataclass(frozen=True)
class OpaqueAttrs:
    """An opaque group of ONNX nodes run as one layer (csdf/onnx_opaque.py): its serialized
    nodes, the tensors it reads (their shapes and element types), the tensor it computes and
    its shape, the constants its nodes read that are not parameters, and for a group run by
    parts the axis of the height in each Reshape's output (`h_axis`) and those outputs'
    full static shapes (`shapes`)."""
    nodes: tuple[bytes, ...]
    tensor_inputs: tuple[str, ...]
    in_shapes: tuple[tuple[int, ...], ...]
    in_types: tuple[int | None, ...]
    output: str
    out_shape: tuple[int, ...]
    consts: dict[str, Any]
    h_axis: dict[str, int]
    shapes: dict[str, tuple[int, ...]]

    @classmethod
    def of(cls, layer: Layer) -> OpaqueAttrs:
        h = layer.hyper
        return cls(tuple(h.get("nodes", [])), tuple(h.get("tensor_inputs", [])),
                   tuple(tuple(int(v) for v in s) for s in h.get("in_shapes", [])),
                   tuple(h.get("in_types", [])), str(h.get("output")),
                   tuple(int(v) for v in h.get("out_shape", [])), dict(h.get("consts", {})),
                   dict(h.get("h_axis", {})),
                   {t: tuple(int(v) for v in s) for t, s in h.get("shapes", {}).items()})


@dataclass(frozen=True)
class WeightParams:
    """A layer's folded weight W and bias B (None when it has none), a BatchNormalization's
    per-channel `scale`, and the ONNX tensor W was taken from verbatim (`weight_source`;
    None for a folded or built W)."""
    weight: Any = None
    bias: Any = None
    scale: Any = None
    weight_source: str | None = None

    @classmethod
    def of(cls, layer: Layer) -> WeightParams:
        p = layer.params
        return cls(p.get("W"), p.get("B"), p.get("scale"), layer.param_sources.get("W"))
