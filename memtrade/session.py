"""`memtrade.Session`: a deployment loaded once and run on the caller's frames, the shape of
`onnxruntime.InferenceSession`.

Loading reads and checks the manifest (deploy/checks/manifest_check.py: the files against
their digests, the quantization entries against the step models, among others), allocates the one
arena of the plan's size and builds every step's ONNX Runtime session bound to its arena
views (deploy/runtime/executor.py); `run` then copies a frame in, runs the schedule and
returns the outputs as the unmodified model gives them (memtrade/feeds.py): a list of arrays
in the model's output order, or for an app of several CNNs a mapping by CNN name. An int8
deployment quantizes each frame on the way in and dequantizes its outputs on the way out,
with the deployment's own scales.

Loading optimises the step models in a child process (deploy/ort/optimize.py), so the
caller's process never holds that transient. Threads: `threads` is each step session's ONNX Runtime intra-op thread count. The arena is
the session's one working memory, so one frame runs at a time: calls from several threads
are served one after another (a lock). For frames in parallel, open one Session per thread
(each with its own arena). `stream` runs the partitions of a pipelined CNN as concurrent
stage threads, stage k on frame f while stage k+1 is on frame f-1.

>>> with memtrade.Session("dep", threads=1) as sess:                 # doctest: +SKIP
...     logits, = sess.run(frame)                                    # a [1, 3, 224, 224] frame
"""
from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import numpy as np

from memtrade.feeds import ModelPorts, by_cnn, ports
from sdf3.errors import InputError

CHUNK = 8       # frames a pipelined CNN's stages have in flight within one `stream` step


class Session:
    """A deployment directory (`explore deploy`, memtrade.deploy) loaded for running."""

    def __init__(self, deployment: str | Path, threads: int = 1, layout: str = "blocked"):
        from deploy.checks import manifest_check
        from deploy.runtime import manifest as mf
        from deploy.runtime.executor import Executor, StepFailed
        from deploy.runtime.footprint import trim_heap
        self.path = Path(getattr(deployment, "path", deployment))
        manifest = mf.load(self.path)
        manifest_check.check(manifest, self.path)       # before anything is allocated
        trim_heap()     # the check parsed every step model: its heap goes back before loading
        self.manifest = manifest
        self.ports: dict[str, ModelPorts] = {name: ports(self.path, name, info)
                                             for name, info in manifest.cnns.items()}
        backend = _runtime_backend(manifest, threads, layout)
        try:
            self._executor = Executor(manifest, self.path, backend)
        except StepFailed as err:
            raise _blamed(err, manifest, self.path) from None
        self._backend = backend
        self._lock = threading.Lock()

    # -- what it takes and gives ----------------------------------------------------------
    @property
    def cnns(self) -> list[str]:
        return list(self.ports)

    def get_inputs(self, cnn: str | None = None):
        """The input of `cnn` (default: the app's one CNN) as the model names it."""
        return [self._ports(cnn).input]

    def get_outputs(self, cnn: str | None = None):
        """The outputs of `cnn` (default: the app's one CNN), in the model's order."""
        return list(self._ports(cnn).outputs)

    def _ports(self, cnn: str | None) -> ModelPorts:
        if cnn is None:
            if len(self.ports) != 1:
                raise InputError(f"cnn: the app has {len(self.ports)} CNNs; name one of {', '.join(self.ports)}")
            return next(iter(self.ports.values()))
        if cnn not in self.ports:
            raise InputError(f"cnn: no CNN named {cnn!r}; expected one of {', '.join(self.ports)}")
        return self.ports[cnn]

    # -- running -------------------------------------------------------------------------
    def run(self, feed: np.ndarray | Mapping[str, np.ndarray]):
        """The outputs for one frame: a list of arrays (the model's outputs, in order) for an
        app of one CNN given one array, else {CNN name: that list} for a mapping by name."""
        frames = by_cnn(feed, self.ports)
        got = {name: self._run(name, [frame])[0] for name, frame in frames.items()}
        return got if isinstance(feed, Mapping) else next(iter(got.values()))

    def stream(self, frames: Iterable) -> Iterator:
        """The outputs of each frame of `frames` (arrays, or mappings by CNN name), in order,
        as `run` returns them; a pipelined CNN runs CHUNK frames at a time through its stages."""
        batch: list = []
        for feed in frames:
            batch.append(feed)
            if len(batch) == CHUNK:
                yield from self._batch(batch)
                batch = []
        if batch:
            yield from self._batch(batch)

    def _batch(self, feeds: list) -> list:
        checked = [by_cnn(f, self.ports) for f in feeds]
        per_cnn = {name: self._run(name, [c[name] for c in checked]) for name in checked[0]}
        return [({n: outs[i] for n, outs in per_cnn.items()} if isinstance(f, Mapping)
                 else next(iter(per_cnn.values()))[i]) for i, f in enumerate(feeds)]

    def _run(self, cnn: str, frames: list[np.ndarray]) -> list[list[np.ndarray]]:
        from deploy.runtime.executor import StepFailed
        if self._executor is None:
            raise InputError(f"{self.path}: the session is closed")
        with self._lock:
            try:
                stored = self._executor.run_stream(cnn, frames)
            except StepFailed as err:
                raise _blamed(err, self.manifest, self.path) from None
        return [self.ports[cnn].shaped(outs) for outs in stored]

    def vs_fp32(self, frames, cnn: str | None = None, threads: int = 1):
        """The deviation of `cnn`'s outputs (default: the app's one CNN) from its fp32 model on
        `frames` (an array [F, N, C, H, W], or a list of frames): SQNR, cosine and argmax
        agreement per output, as `memtrade.run` reports them (deploy/run/vs_fp32.py), or the
        reason there is no fp32 model to compare with. An fp32 deployment compares with its
        unmodified model."""
        from deploy.run.vs_fp32 import compare
        name = self._name(cnn)
        stack = [self.ports[name].check(np.asarray(f, np.float32)) for f in frames]
        return compare(self.path, self.manifest, name, stack, self._run(name, stack), threads)

    def _name(self, cnn: str | None) -> str:
        port = self._ports(cnn)
        return next(n for n, p in self.ports.items() if p is port)

    # -- lifetime ------------------------------------------------------------------------
    def close(self) -> None:
        """Drop the step sessions and the arena (a closed session refuses to run)."""
        self._executor = None
        self._backend = None

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Session({str(self.path)!r}, cnns={self.cnns})"


def _runtime_backend(manifest, threads: int, layout: str):
    """The backend that runs the deployment's steps in this process (deploy/backends/)."""
    from deploy.backends import registry
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 0:
        raise InputError(f"threads: expected 0 (one per core) or a positive thread count, got {threads!r}")
    chosen = registry.backend(manifest.backend)
    init = chosen.process_init(threads, False, manifest.plan_workspace_bytes or 0)
    if init is not None:
        init()
    return chosen.runtime(manifest.dtype, threads, False, layout, load_apart=True)


def _blamed(err: Exception, manifest, path: Path) -> Exception:
    """A step failure ended with whose fault it is (deploy/checks/files.py)."""
    from deploy.checks import files
    return type(err)(f"{err} ({files.blame(manifest, path)})")
