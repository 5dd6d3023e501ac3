"""The deployment manifest as records: what `explore deploy` writes and `explore run` (the
executor, the checks, the profilers) reads. manifest.json is these records as JSON
(deploy/runtime/manifest.py reads and writes it); the TensorRT board runner reads the same
JSON with plain dicts under Python 3.6, so `to_dict` writes exactly the keys it reads.

`from_dict` checks the types of what it reads (a manifest.json is a file a user may edit):
a key missing or of the wrong type is one line naming it (InputError). Whether the values
agree with each other (offsets inside buffers, slots inside rings, models present) is the
job of deploy/checks/manifest_check.py.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from deploy.quant.scales import ActivationScales
from deploy.runtime.json_fields import Fields
from deploy.runtime.step_records import (Binding, ManifestPartition, Shape, Step, TileCall,
                                         TiledGroup, TileMid)
from sdf3.errors import InputError

__all__ = ["FORMAT", "VERSION", "Manifest", "ManifestPartition", "Step", "Binding", "TiledGroup",
           "TileCall", "TileMid", "StoredEdge", "ArenaBuffer", "Port", "CnnInfo", "SourceModel", "StepModel",
           "ProfileModel", "ProfilePort", "Shape"]

FORMAT = "memtrade-deployment"
VERSION = 2
# the arena's element type -> its bytes; the integer types are an int8 plan's (quantized)
DTYPE_BYTES = {"float32": 4, "float16": 2, "uint8": 1, "int8": 1}
QUANT_DTYPES = ("uint8", "int8")

@dataclass(frozen=True)
class StoredEdge:
    """Where an edge lives: buffer, host and device offsets, its NCHW shape, `slots` rows
    held (a ring when fewer than the height), layout (nchw, hncw: rows outermost, tile: a
    fused-tiled group's per-tile tensor), its bytes and the bytes of one row; `dtype` its
    element type where each tensor is stored at its layer's precision (precision: auto),
    None where every edge has the manifest's `dtype`."""
    buffer: int
    offset: int
    device_offset: int
    shape: Shape
    slots: int
    layout: str
    bytes: int
    row_bytes: int
    dtype: str | None = None

    @property
    def whole(self) -> bool:
        """Holds every row of its tensor."""
        return self.slots == self.shape[2]

    @property
    def stored_shape(self) -> list[int]:
        """The array shape of the whole region: NCHW, or slots-first for hncw."""
        n, c, h, w = self.shape
        return [n, c, h, w] if self.layout == "nchw" else [self.slots, n, c, w]

    def to_dict(self) -> dict[str, Any]:
        return {"buffer": self.buffer, "offset": self.offset, "device_offset": self.device_offset,
                "shape": list(self.shape), "slots": self.slots, "layout": self.layout,
                "bytes": self.bytes, "row_bytes": self.row_bytes,
                **({"dtype": self.dtype} if self.dtype is not None else {})}

    @classmethod
    def from_dict(cls, data: Any, where: str) -> StoredEdge:
        r = Fields(data, where)
        shape = r.ints("shape")
        if len(shape) != 4 or r.str("layout") not in ("nchw", "hncw", "tile"):
            raise InputError(f"{where}: expected a 4-D 'shape' and layout nchw, hncw or tile")
        dtype = r.str("dtype", None)
        if dtype is not None and dtype not in DTYPE_BYTES:
            raise InputError(f"{where}: key 'dtype' must be one of {', '.join(DTYPE_BYTES)}, "
                             f"got {dtype!r}")
        return cls(r.int("buffer"), r.int("offset"), r.int("device_offset", 0), shape,
                   r.int("slots"), r.str("layout"), r.int("bytes"), r.int("row_bytes"), dtype)


@dataclass(frozen=True)
class ArenaBuffer:
    index: int
    offset: int
    device_offset: int
    bytes: int
    edges: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "offset": self.offset, "device_offset": self.device_offset,
                "bytes": self.bytes, "edges": list(self.edges)}

    @classmethod
    def from_dict(cls, data: Any, where: str) -> ArenaBuffer:
        r = Fields(data, where)
        if not isinstance(r.raw("offset", None), int) or not isinstance(r.raw("bytes", None), int):
            raise InputError(f"{where}: expected integer 'offset' and 'bytes'")
        return cls(r.int("index", 0), r.int("offset"), r.int("device_offset", 0), r.int("bytes"),
                   r.strs("edges", ()))


@dataclass(frozen=True)
class Port:
    """A CNN's input or output: its layer, NCHW shape and (outputs) stored layout, and as the
    unmodified model names it (deploy/build/model_ports.py): its tensor's name, shape and
    element type (None for a network without an ONNX model)."""
    layer: str
    shape: Shape
    layout: str | None = None
    tensor: str | None = None
    tensor_shape: Shape | None = None
    dtype: str | None = None

    @property
    def stored_shape(self) -> list[int]:
        n, c, h, w = self.shape
        return [h, n, c, w] if self.layout == "hncw" else [n, c, h, w]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"layer": self.layer, "shape": list(self.shape)}
        if self.layout is not None:
            out["layout"] = self.layout
        if self.tensor is not None:
            out.update(tensor=self.tensor, tensor_shape=list(self.tensor_shape or ()), dtype=self.dtype)
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str) -> Port:
        r = Fields(data, where)
        return cls(r.str("layer", ""), r.ints("shape"), r.str("layout", None), r.str("tensor", None),
                   r.ints("tensor_shape", None), r.str("dtype", None))


SOURCE_KINDS = ("float32", "float16", "qdq")


@dataclass(frozen=True)
class SourceModel:
    """The ONNX model the app names for a CNN, as `explore deploy` found it: its absolute
    path, the SHA-256 of that file, and what it computes in: "float32", "float16" (a model
    stored in fp16) or "qdq" (already quantized). The run compares an int8 deployment with it
    (deploy/run/vs_fp32.py) when it is fp32 and unchanged."""
    path: str
    sha256: str
    kind: str = "float32"

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "sha256": self.sha256, "kind": self.kind}

    @classmethod
    def from_dict(cls, data: Any, where: str) -> SourceModel:
        r = Fields(data, where)
        kind = r.str("kind", "float32")
        if kind not in SOURCE_KINDS:
            raise InputError(f"{where}.kind: expected one of {', '.join(SOURCE_KINDS)}, got {kind!r}")
        return cls(r.str("path"), r.str("sha256"), kind)


@dataclass(frozen=True)
class CnnInfo:
    """A CNN's ports, its reference model (a path inside the deployment), its partitions and
    the source model the app names (None for a zoo network)."""
    inputs: tuple[Port, ...]
    outputs: tuple[Port, ...]
    reference: str | None
    partitions: tuple[str, ...]
    source: SourceModel | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {"inputs": [p.to_dict() for p in self.inputs],
               "outputs": [p.to_dict() for p in self.outputs],
               "reference": self.reference, "partitions": list(self.partitions)}
        if self.source is not None:
            out["source"] = self.source.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str) -> CnnInfo:
        r = Fields(data, where)
        ins = tuple(Port.from_dict(p, f"{where}.inputs[{i}]") for i, p in enumerate(r.list("inputs")))
        outs = tuple(Port.from_dict(p, f"{where}.outputs[{i}]") for i, p in enumerate(r.list("outputs")))
        if not ins or any(len(p.shape) != 4 for p in ins):
            raise InputError(f"{where}.inputs: expected a list of 4-D shapes")
        if any(len(p.shape) != 4 or p.layout not in ("nchw", "hncw") for p in outs):
            raise InputError(f"{where}.outputs: expected 4-D shapes with layout nchw or hncw")
        ref = r.raw("reference", None)
        if ref is not None and not isinstance(ref, str):
            raise InputError(f"{where}.reference: {ref!r} is not a path relative to the "
                             f"deployment (a deployment reads only its own directory)")
        source = (SourceModel.from_dict(r.raw("source"), f"{where}.source")
                  if r.has("source") else None)
        return cls(ins, outs, ref, r.strs("partitions", ()), source)


@dataclass(frozen=True)
class StepModel:
    """A step model file: the CNN and layer it computes (a band's or group's first layer,
    `layers` all of them), its variant (whole, part, region, tile<k>...), its ports."""
    cnn: str
    layer: str
    variant: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    layers: tuple[str, ...] | None = None
    primitive: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"cnn": self.cnn, "layer": self.layer}
        if self.layers is not None:
            out["layers"] = list(self.layers)
        out.update(variant=self.variant, inputs=list(self.inputs), outputs=list(self.outputs))
        if self.primitive is not None:
            out["primitive"] = self.primitive
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str) -> StepModel:
        r = Fields(data, where)
        return cls(r.str("cnn"), r.str("layer"), r.str("variant", ""), r.strs("inputs", ()),
                   r.strs("outputs", ()), r.strs("layers", None), r.str("primitive", None))


@dataclass(frozen=True)
class ProfilePort:
    """A port of a profile model: a tensor (`shape`, `dtype`) or an index vector (`values`)."""
    name: str
    shape: Shape | None = None
    dtype: str | None = None
    values: tuple[int, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        if self.values is not None:
            return {"name": self.name, "values": list(self.values)}
        return {"name": self.name, "shape": list(self.shape or ()), "dtype": self.dtype}


@dataclass(frozen=True)
class ProfileModel:
    """A per-layer model for `board_runner.py profile` (--with-profile)."""
    cnn: str
    layer: str
    kind: str
    model: str
    phases: int
    ports: tuple[ProfilePort, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"cnn": self.cnn, "layer": self.layer, "kind": self.kind, "model": self.model,
                "phases": self.phases, "ports": [p.to_dict() for p in self.ports]}

    @classmethod
    def from_dict(cls, data: Any, where: str) -> ProfileModel:
        r = Fields(data, where)
        ports = []
        for i, p in enumerate(r.list("ports")):
            pr = Fields(p, f"{where}.ports[{i}]")
            ports.append(ProfilePort(pr.str("name"), pr.ints("shape", None), pr.str("dtype", None),
                                     pr.ints("values", None)))
        return cls(r.str("cnn"), r.str("layer"), r.str("kind"), r.str("model"), r.int("phases", 1),
                   tuple(ports))


@dataclass(frozen=True)
class Manifest:
    """A deployment: the arena (host bytes, device bytes at `device_align`), its buffers and
    edges, every CNN's inputs, outputs and reference model, every partition's resolved steps,
    the pipelines (partitions run as concurrent stages), the step models and (with
    --with-profile) the profile models; `plan_*`: the plan's own memory figures, which
    `explore run` reports the measured footprint against."""
    name: str
    backend: str
    precision: str
    dtype: str
    data_bytes: int
    arena_bytes: int
    device_arena_bytes: int
    device_align: int
    buffers: tuple[ArenaBuffer, ...]
    edges: dict[str, StoredEdge]
    cnns: dict[str, CnnInfo]
    partitions: tuple[ManifestPartition, ...]
    pipelines: tuple[tuple[str, ...], ...]
    models: dict[str, StepModel]
    routing: str = "round-robin"
    plan_buffer_bytes: int = 0
    plan_param_bytes: int | None = None
    plan_memory_bytes: int | None = None
    plan_workspace_bytes: int = 0
    plan_session_bytes: int = 0
    plan_output_bytes: int = 0
    plan_fps: dict[str, float] = field(default_factory=dict)    # the plan's predicted fps
    plan_platform: str = ""                  # where they were predicted (plan.json `platform`)
    profile: tuple[ProfileModel, ...] | None = None
    # relative path -> SHA-256 of every file `explore deploy` wrote (deploy/checks/files.py);
    # empty in a manifest written without them
    files: dict[str, str] = field(default_factory=dict)
    # an int8 deployment's scale and zero point of every stored tensor (deploy/quant/scales.py)
    quantization: ActivationScales | None = None
    # precision: auto: each layer's precision ({cnn: {layer: fp32|fp16|int8}}) and the
    # element type each layer's output tensor is stored in ({cnn: {layer: dtype}}, inputs
    # included; explorer/app/layer_precision.py); empty for one precision everywhere
    layer_precisions: dict[str, dict[str, str]] = field(default_factory=dict)
    tensor_dtypes: dict[str, dict[str, str]] = field(default_factory=dict)
    # the plan's estimate of each CNN's output SQNR against fp32 (explorer/plan/sensitivity.py)
    plan_sqnr_estimate_db: dict[str, float] = field(default_factory=dict)

    PLAN_KEYS = ("plan_buffer_bytes", "plan_param_bytes", "plan_memory_bytes",
                 "plan_workspace_bytes", "plan_session_bytes", "plan_output_bytes")

    def steps(self, cnn: str | None = None):
        """(partition, step index, step) of every partition (of `cnn`), in order."""
        for part in self.partitions:
            if cnn is None or part.cnn == cnn:
                for t, step in enumerate(part.steps):
                    yield part, t, step

    @property
    def per_layer(self) -> bool:
        """Each layer at its own precision (precision: auto)."""
        return bool(self.tensor_dtypes)

    def dtype_of(self, cnn: str, layer: str) -> str:
        """The element type layer `layer` of CNN `cnn` stores its output in."""
        return self.tensor_dtypes.get(cnn, {}).get(layer, self.dtype)

    def edge_dtype(self, e: StoredEdge) -> str:
        """The element type stored edge `e` holds."""
        return e.dtype if e.dtype is not None else self.dtype

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "format": FORMAT, "version": VERSION, "name": self.name, "backend": self.backend,
            "precision": self.precision, "dtype": self.dtype, "data_bytes": self.data_bytes,
            "arena_bytes": self.arena_bytes, "device_arena_bytes": self.device_arena_bytes,
            "device_align": self.device_align}
        out.update({k: getattr(self, k) for k in self.PLAN_KEYS})
        out.update({"plan_fps": dict(self.plan_fps), "plan_platform": self.plan_platform})
        out.update({
            "buffers": [b.to_dict() for b in self.buffers],
            "edges": {n: e.to_dict() for n, e in self.edges.items()},
            "cnns": {n: c.to_dict() for n, c in self.cnns.items()},
            "partitions": [p.to_dict() for p in self.partitions],
            "pipelines": [list(g) for g in self.pipelines], "routing": self.routing,
            "models": {n: m.to_dict() for n, m in self.models.items()}})
        if self.profile is not None:
            out["profile"] = [p.to_dict() for p in self.profile]
        if self.files:
            out["files"] = dict(self.files)
        if self.quantization is not None:
            out["quantization"] = self.quantization.to_json()
        if self.per_layer:
            out["layer_precisions"] = {c: dict(v) for c, v in self.layer_precisions.items()}
            out["tensor_dtypes"] = {c: dict(v) for c, v in self.tensor_dtypes.items()}
        if self.plan_sqnr_estimate_db:
            out["plan_sqnr_estimate_db"] = dict(self.plan_sqnr_estimate_db)
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str = "manifest") -> Manifest:
        r = Fields(data, where)
        for key in ("arena_bytes", "dtype", "buffers", "edges", "cnns", "partitions", "pipelines"):
            r.raw(key)                             # "missing key ..." before any other complaint
        dtype = r.str("dtype")
        if dtype not in DTYPE_BYTES:
            raise InputError(f"{where}: key 'dtype' must be one of {', '.join(DTYPE_BYTES)}, got {dtype!r}")
        quantization = None
        layers = _by_layer(r, "layer_precisions", ("fp32", "fp16", "int8"))
        tensors = _by_layer(r, "tensor_dtypes", tuple(DTYPE_BYTES))
        if bool(layers) != bool(tensors):
            raise InputError(f"{where}: keys 'layer_precisions' and 'tensor_dtypes' come "
                             f"together (a plan with a precision per layer); deploy it again")
        quantized = any(d in QUANT_DTYPES for v in tensors.values() for d in v.values()) \
            if tensors else dtype in QUANT_DTYPES
        if quantized or (tensors and r.has("quantization")):
            if not r.has("quantization"):
                raise InputError(f"{where}: an {dtype} deployment needs key 'quantization' "
                                 f"(its tensors' scales); deploy it again")
            quantization = ActivationScales.from_json(r.raw("quantization"), where)
        arena_bytes = r.int("arena_bytes")
        if arena_bytes < 0:
            raise InputError(f"{where}: key 'arena_bytes' must be a non-negative integer, "
                             f"got {arena_bytes!r}")
        buffers = tuple(ArenaBuffer.from_dict(b, f"{where}: buffers[{i}]")
                        for i, b in enumerate(r.list("buffers")))
        edges = {n: StoredEdge.from_dict(e, f"{where}: edges.{n}") for n, e in r.dict("edges").items()}
        cnns = {n: CnnInfo.from_dict(c, f"{where}: cnns.{n}") for n, c in r.dict("cnns").items()}
        if not cnns:
            raise InputError(f"{where}: key 'cnns' must map CNN names to their inputs and outputs")
        parts = tuple(ManifestPartition.from_dict(p, f"{where}: partitions")
                      for p in r.list("partitions"))
        groups = r.list("pipelines")
        if not all(isinstance(g, list) and all(isinstance(x, str) for x in g) for g in groups):
            raise InputError(f"{where}: key 'pipelines' must list groups of partition names")
        models = {n: StepModel.from_dict(m, f"{where}: models.{n}")
                  for n, m in (r.dict("models") if r.has("models") else {}).items()}
        profile = None
        if r.has("profile"):
            profile = tuple(ProfileModel.from_dict(p, f"{where}: profile[{i}]")
                            for i, p in enumerate(r.list("profile")))
        plan = {k: r.int(k, None) for k in cls.PLAN_KEYS}
        files = r.dict("files") if r.has("files") else {}
        plan_fps = r.dict("plan_fps") if r.has("plan_fps") else {}
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in plan_fps.values()):
            raise InputError(f"{where}: key 'plan_fps' must map CNN names to frames per second")
        estimate = r.dict("plan_sqnr_estimate_db") if r.has("plan_sqnr_estimate_db") else {}
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in estimate.values()):
            raise InputError(f"{where}: key 'plan_sqnr_estimate_db' must map CNN names to dB")
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
            raise InputError(f"{where}: key 'files' must map file paths to SHA-256 digests")
        return cls(r.str("name", ""), r.str("backend", "onnxruntime"), r.str("precision", "fp32"),
                   dtype, r.int("data_bytes", DTYPE_BYTES[dtype]), arena_bytes,
                   r.int("device_arena_bytes", 0), r.int("device_align", 256), buffers, edges, cnns,
                   parts, tuple(tuple(g) for g in groups), models, r.str("routing", "round-robin"),
                   profile=profile, files=dict(files),
                   plan_fps={k: float(v) for k, v in plan_fps.items()},
                   plan_platform=r.str("plan_platform", ""), quantization=quantization,
                   layer_precisions=layers, tensor_dtypes=tensors,
                   plan_sqnr_estimate_db={k: float(v) for k, v in estimate.items()}, **{k: v for k, v in plan.items() if r.has(k)})


def _by_layer(r: Fields, key: str, allowed: tuple[str, ...]) -> dict[str, dict[str, str]]:
    """{cnn: {layer: value}} of manifest key `key` (absent: {}), each value one of `allowed`."""
    if not r.has(key):
        return {}
    data = r.dict(key)
    for cnn, layers in data.items():
        if not isinstance(layers, dict):
            raise InputError(f"{r.where}: key '{key}.{cnn}' must map layer names to one of "
                             f"{', '.join(allowed)}")
        for layer, value in layers.items():
            if value not in allowed:
                raise InputError(f"{r.where}: key '{key}.{cnn}.{layer}' must be one of "
                                 f"{', '.join(allowed)}, got {value!r}")
    return {c: dict(v) for c, v in data.items()}
