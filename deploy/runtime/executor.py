"""The one executor for every backend: one arena, every buffer viewed at its offset, and the
schedule of every partition run step by step, each step a prebound compiled layer or part.

A backend supplies alloc/view (memory), load (compile a step model) and bind (a call reading
and writing given views). Frames go round-robin over the CNNs (frame i to CNN i mod n, in the
manifest's order). A CNN whose partitions form one pipeline set runs them as concurrent stage
threads, stage k on frame f while stage k+1 is on frame f-1; crossing edges have two copies
(frame parity) and a stage waits until the consumer has finished with a copy before it writes
it again. Otherwise a CNN's partitions run one after another.

A step that fails while running (ONNX Runtime refusing a damaged model's output shape, ...)
raises `StepFailed`, one line naming the CNN, partition, step, layer, phase and model file
(the CLI exits 2); deploy/run/measure.py ends it with whose fault it is, from the digests of
the deployment's files (deploy/checks/files.py).
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from deploy.runtime.manifest_records import QUANT_DTYPES, Binding, Manifest, Step, StoredEdge
from sdf3.errors import InputError


class StepFailed(InputError):
    """A step of a deployment failed to load or run."""


@dataclass
class Partition:
    name: str
    cnn: str
    calls: list[list[Callable[[], None]]]     # per parity, one call per step
    labels: list[str] | None = None           # per call (both parities alike): what it runs


@dataclass
class CnnRun:
    name: str
    partitions: list[Partition]
    pipelined: bool
    input_shape: list[int]
    outputs: list[list[np.ndarray]]            # per parity, per sink (stored layout)
    output_layouts: list[str]
    output_layers: list[str] = field(default_factory=list)
    calls: int = 0                             # compiled invocations made


class Executor:
    def __init__(self, manifest: Manifest, deploy_dir: str | Path, backend):
        self.manifest, self.backend = manifest, backend
        root = Path(deploy_dir)
        self.arena = backend.alloc(manifest.arena_bytes)
        if hasattr(backend, "prepare"):    # a backend may store some edges in its own layout
            backend.prepare(manifest, root)
        self.dtype = np.dtype(manifest.dtype)
        # int8: frames are quantized as they are copied in, outputs dequantized as read out
        self.quant = manifest.quantization
        edges = manifest.edges
        self.consts: list[np.ndarray] = []     # idx vectors: scratch outside the arena
        self.cnns: dict[str, CnnRun] = {}
        # (partition, step index, parity) -> the step's bound (inputs, outputs): a caller may
        # bind another model of the same step to them (deploy/profile/primitive_timing.py)
        self.views: dict[tuple[str, int, int], tuple[dict, dict]] = {}
        for name, info in manifest.cnns.items():
            groups = [g for g in manifest.pipelines if set(g) & set(info.partitions)]
            pipelined = len(info.partitions) > 1 and len(groups) == 1
            # a copy per frame parity only where two frames are in flight (a pipeline)
            outs = [[np.zeros(o.stored_shape, manifest.dtype_of(name, o.layer)) for o in info.outputs]
                    for _ in range(2 if pipelined else 1)]
            if not pipelined:
                outs = [outs[0], outs[0]]
            self.cnns[name] = CnnRun(name, [], pipelined, list(info.inputs[0].shape), outs,
                                     [o.layout for o in info.outputs],
                                     [o.layer for o in info.outputs])
        sink_index = {(c, o.layer): i for c, info in manifest.cnns.items()
                      for i, o in enumerate(info.outputs)}
        for part in manifest.partitions:
            run = self.cnns[part.cnn]
            calls: list[list[Callable]] = [[], []]
            labels: list[str] = []
            for index, step in enumerate(part.steps):
                if step.group is not None and step.group.tiles:   # one call per tile
                    from deploy.runtime.tiled import tile_calls
                    for parity in (0, 1):
                        calls[parity].extend(tile_calls(self, backend, root, step, parity, run, sink_index))
                    labels += [_label(index, step, f"tile {t}")
                               for t in range(len(calls[0]) - len(labels))]
                    continue
                labels.append(_label(index, step))
                try:                      # ONNX Runtime loads (and may optimise) the model here
                    session = backend.load(root / step.model) if step.model else None
                except InputError:
                    raise
                except Exception as err:
                    raise _failed(part.cnn, part.name, labels[-1], err) from None
                # a step that binds the same edges on both parities (any step outside a
                # pipeline) has one binding for both: ONNX Runtime keeps ~2.3 KB per
                # binding, and a by-parts frame has a step per layer and phase
                same = all(b.kind == "const" or (b.kind == "output" and not run.pipelined)
                           or (b.kind in ("edge", "frame", "chained") and b.edges[0] == b.edges[1])
                           for b in step.bind)
                for parity in (0, 1):
                    if parity == 1 and same:
                        self.views[(part.name, index, 1)] = self.views[(part.name, index, 0)]
                        calls[1].append(calls[0][-1])
                        continue
                    ins, outs, frame_targets = {}, {}, []
                    for b in step.bind:
                        if b.kind == "frame":
                            e = edges[b.edges[parity]]
                            order = (backend.frame_order(b.edges[parity])
                                     if hasattr(backend, "frame_order") else None)
                            frame_targets.append((self.edge_view(e, 0, None), e.layout, order))
                        elif b.kind == "chained":   # read inside the call: no port
                            continue
                        elif b.kind == "const":
                            arr = np.asarray(b.values, np.int32)
                            self.consts.append(arr)
                            ins[b.name] = arr
                        elif b.kind == "output":
                            arr = run.outputs[parity][sink_index[(part.cnn, b.layer)]]
                            outs[b.name] = self._slot(arr, b)
                        else:
                            e = edges[b.edges[parity]]
                            view = self.edge_view(e, b.slot, b.shape)
                            (outs if b.writes else ins)[b.name] = view
                    self.views[(part.name, index, parity)] = (ins, outs)
                    if session is None:
                        calls[parity].append(self._frame_step(frame_targets, run, parity,
                                                              part.cnn, step.layer))
                        continue
                    try:                  # binding may run the step (a backend tunes it)
                        calls[parity].append(backend.bind(session, ins, outs))
                    except InputError:
                        raise
                    except Exception as err:
                        raise _failed(part.cnn, part.name, labels[-1], err) from None
            run.partitions.append(Partition(part.name, part.cnn, calls, labels))

    # -- views --------------------------------------------------------------------------
    def edge_view(self, e: StoredEdge, slot: int, shape) -> np.ndarray:
        """The arena view of edge `e` from row `slot`, `shape` (None: its whole region)."""
        shape = e.stored_shape if shape is None else list(shape)
        if e.dtype is not None:       # stored at its layer's precision
            return self.backend.view(self.arena, e.offset + slot * e.row_bytes, shape, e.dtype)
        return self.backend.view(self.arena, e.offset + slot * e.row_bytes, shape)

    @staticmethod
    def _slot(arr: np.ndarray, b: Binding) -> np.ndarray:
        if list(arr.shape) == list(b.shape):
            return arr
        return arr[b.slot: b.slot + int(b.shape[0])]     # a part's rows

    # -- running ------------------------------------------------------------------------
    def run_stream(self, cnn: str, frames, keep_outputs: bool | int = True,
                   timings: list | None = None, into: list | None = None) -> list[list[np.ndarray]]:
        """Run `frames` (a sequence of NCHW float32 frames, indexed as they are used) through
        `cnn`; returns its outputs (NCHW) for every frame, or (`keep_outputs` an int) for the
        first that many, so a long run holds a bounded number of outputs. `timings` (a list,
        sequential CNNs only) receives (wall s, this thread's CPU s) per frame: a frame's
        median is what a shared machine cannot inflate by preempting some frames. `into`:
        arrays (per kept frame, per output, NCHW float32) the kept outputs are copied into,
        allocated by the caller before it measures (`explore run`'s check copies are no
        part of the deployment's footprint)."""
        run = self.cnns[cnn]
        keep = len(frames) if keep_outputs is True else int(keep_outputs or 0)
        results: list[list[np.ndarray]] = [[] for _ in range(min(keep, len(frames)))]
        if run.pipelined:
            self._pipelined(run, frames, results, keep, into)
        else:
            clock = (time.perf_counter, time.thread_time) if timings is not None else None
            for f in range(len(frames)):
                _FRAME.frame = frames[f]
                if clock:
                    wall, cpu = clock[0](), clock[1]()
                for part in run.partitions:
                    _run_calls(part, f % 2)
                    run.calls += len(part.calls[f % 2])
                if clock:
                    timings.append((clock[0]() - wall, clock[1]() - cpu))
                if f < keep:
                    results[f] = self._collect(run, f % 2, into[f] if into else None)
        return results

    def _frame_step(self, targets, run: CnnRun, parity: int, cnn: str, layer: str) -> Callable:
        """The Input layer's firing: int8 frames through the backend's own quantizing copy
        when it has one (deploy/ort/frame_copy.py), else quantized and copied here."""
        if self._quantized(cnn, layer) and hasattr(self.backend, "frame_copy"):
            s = self.quant.of(cnn, layer)
            write = self.backend.frame_copy(targets, run.input_shape, s.scale, s.zero_point)
            return lambda: write(_current_frame())
        return _frame_copy(targets, run, parity, self._quantizer(cnn, layer))

    def _quantizer(self, cnn: str, layer: str) -> Callable | None:
        """How an int8 deployment stores a frame of input layer `layer` (None: as it is)."""
        if not self._quantized(cnn, layer):
            return None
        return lambda frame: self.quant.quantize(cnn, layer, frame)

    def _quantized(self, cnn: str, layer: str) -> bool:
        """Whether `layer`'s output is stored as int8 bytes with a scale."""
        return self.quant is not None and self.manifest.dtype_of(cnn, layer) in QUANT_DTYPES

    def _collect(self, run: CnnRun, parity: int, into: list | None) -> list[np.ndarray]:
        out = []
        for i, (arr, layout) in enumerate(zip(run.outputs[parity], run.output_layouts)):
            view = arr.transpose(1, 2, 0, 3) if layout == "hncw" else arr
            if self._quantized(run.name, run.output_layers[i]):
                view = self.quant.dequantize(run.name, run.output_layers[i], view)
            if into is None:
                out.append(view.astype(np.float32, copy=True))
            else:
                np.copyto(into[i], view, casting="unsafe")
                out.append(into[i])
        return out

    def _pipelined(self, run: CnnRun, frames, results, keep_outputs, into=None) -> None:
        """Stage threads; finished[k] counts the frames stage k has finished (in order), so
        the bookkeeping does not grow with the number of frames."""
        count, stages = len(frames), run.partitions
        finished = [0] * len(stages)
        cond = threading.Condition()
        errors: list[BaseException] = []
        counts = [0] * len(stages)

        def wait_for(k: int, f: int) -> None:      # until stage k has finished frame f
            with cond:
                cond.wait_for(lambda: finished[k] > f or bool(errors))

        def stage(k: int) -> None:
            try:
                for f in range(count):
                    if k > 0:
                        wait_for(k - 1, f)
                    if f >= 2 and k + 1 < len(stages):   # copy f%2 still read downstream?
                        wait_for(len(stages) - 1, f - 2)
                    if errors:
                        return
                    _FRAME.frame = frames[f]
                    calls = stages[k].calls[f % 2]
                    _run_calls(stages[k], f % 2)
                    counts[k] += len(calls)   # one counter per thread: no lost updates
                    if k == len(stages) - 1 and f < keep_outputs:
                        results[f] = self._collect(run, f % 2, into[f] if into else None)
                    with cond:
                        finished[k] = f + 1
                        cond.notify_all()
            except BaseException as err:  # surface in the caller
                with cond:
                    errors.append(err)
                    cond.notify_all()

        threads = [threading.Thread(target=stage, args=(k,), daemon=True) for k in range(len(stages))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        run.calls += sum(counts)
        if errors:
            raise errors[0]


def _label(index: int, step: Step, tile: str = "") -> str:
    what = f"layer {step.layer} phase {step.phase}"
    return (f"step {index} ({what}" + (f", {tile}" if tile else "")
            + (f", model {step.model}" if step.model else "") + ")")


def _run_calls(part: Partition, parity: int) -> None:
    """The partition's calls for one frame; a failing one becomes StepFailed naming it."""
    k = 0
    try:
        for k, call in enumerate(part.calls[parity]):
            call()
    except Exception as err:     # the backend's own error type (onnxruntime's, numpy's)
        label = part.labels[k] if part.labels and k < len(part.labels) else f"step call {k}"
        raise _failed(part.cnn, part.name, label, err) from None


def _failed(cnn: str, partition: str, label: str, err: BaseException) -> StepFailed:
    reason = " ".join(str(err).split())[:300] or type(err).__name__
    return StepFailed(f"CNN {cnn}, partition {partition}: {label} failed: {reason}")


def _frame_copy(targets: list[tuple[np.ndarray, str, list[int] | None]], run: CnnRun, parity: int,
                quantize: Callable | None = None) -> Callable:
    """The Input layer's firing: the current frame (`quantize`d, int8) into each of its
    output edges, in the edge's layout (rows outermost for "hncw"). An edge a backend stores
    in another order (int8 channels-last) is written by the backend's own `frame_copy`."""
    def call() -> None:
        frame = _current_frame()
        if quantize is not None:
            frame = quantize(frame)
        for view, layout, _ in targets:
            np.copyto(view, frame.transpose(2, 0, 1, 3) if layout == "hncw" else frame,
                      casting="same_kind")
    return call


_FRAME = threading.local()


def _current_frame() -> np.ndarray:
    return _FRAME.frame


def set_frame(frame: np.ndarray) -> None:
    """The frame this thread's Input steps copy (what run_stream sets per frame), for a
    caller that runs a partition's calls itself (deploy/profile/)."""
    _FRAME.frame = frame
