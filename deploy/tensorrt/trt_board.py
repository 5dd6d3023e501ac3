"""The executor of deploy/runtime/executor.py on the GPU: one device arena with every buffer
at its aligned offset, consts and outputs, prebound step calls per pipeline stage (one stream
and one scratch region each), frames run in turn or pipelined across stages; and the plain
reference engine of a CNN, to compare with.

Part of the standalone runner (board_runner.py and its trt_*.py modules, copied beside a
deployment): Python 3.6 compatible, imports nothing of memtrade.
"""
import os
import threading
from collections import namedtuple

import numpy as np

try:
    from .trt_cuda import ALIGN, Cuda, trt, trt_major, trt_logger
except ImportError:  # run as a script: the modules lie flat in DIR
    from trt_cuda import ALIGN, Cuda, trt, trt_major, trt_logger
try:
    from .trt_engines import Engine, engine_path
except ImportError:  # run as a script: the modules lie flat in DIR
    from trt_engines import Engine, engine_path


def _stored(port):
    """The array shape of a CNN output as stored: NCHW, or rows first (hncw)."""
    n, c, h, w = port.shape
    return [n, c, h, w] if port.layout == "nchw" else [h, n, c, w]


# a pipeline stage (one partition): its prebound calls per frame parity, its CUDA stream
Stage = namedtuple("Stage", "name calls stream")


class Run(object):
    """One CNN on the board: its outputs per frame parity ((device pointer, host array,
    layout) each), its stages in order, whether they run pipelined (one thread each) and
    the step calls made so far."""
    __slots__ = ("outputs", "stages", "pipelined", "calls")

    def __init__(self, outputs, pipelined):
        self.outputs, self.stages, self.pipelined, self.calls = outputs, [], pipelined, 0


class Board(object):
    """Device arena, consts, outputs and prebound step calls of a deployment
    (`manifest`: trt_manifest.Manifest)."""

    def __init__(self, deploy_dir, manifest):
        self.cuda = Cuda()
        self.dir, self.m = deploy_dir, manifest
        self.dtype = np.dtype(manifest.dtype)
        self.runtime = trt.Runtime(trt_logger())
        self.arena = self.cuda.malloc(manifest.device_arena_bytes)
        self.engines = {}
        for rel in manifest.models:
            self.engines[rel] = Engine(self.runtime, engine_path(deploy_dir, rel))
        self.scratch_size = max([e.scratch for e in self.engines.values()] + [ALIGN])
        self.cnns = {}
        self.allocated = manifest.device_arena_bytes
        self.frame = threading.local()    # the frame each thread copies in (the Input's calls)
        sinks = {}
        for name, info in manifest.cnns.items():
            outs = []
            for parity in (0, 1):
                row = []
                for o in info.outputs:
                    host = np.zeros(_stored(o), self.dtype)
                    row.append((self.cuda.malloc(host.nbytes), host, o.layout))
                    sinks[(name, o.layer, parity)] = row[-1]
                outs.append(row)
            groups = [g for g in manifest.pipelines if set(g) & set(info.partitions)]
            self.cnns[name] = Run(outs, len(info.partitions) > 1 and len(groups) == 1)
        # one stream and one scratch region per stage (stages of a pipeline run together);
        # a context is bound to one scratch, so each stage attaches its own engines' copies
        shared_scratch = self.cuda.malloc(self.scratch_size)
        for part in manifest.partitions:
            run = self.cnns[part.cnn]
            stream = self.cuda.stream()
            scratch = self.cuda.malloc(self.scratch_size) if run.pipelined else shared_scratch
            used = {}
            for rel in set(s.model for s in part.steps if s.model):
                eng = self.engines[rel] if not run.pipelined else Engine(
                    self.runtime, engine_path(deploy_dir, rel))
                eng.attach(scratch)
                used[rel] = eng
            calls = ([], [])
            for step in part.steps:
                for parity in (0, 1):
                    calls[parity].append(self._bind(step, parity, part.cnn, used, stream, sinks))
            run.stages.append(Stage(part.name, calls, stream))

    def _edge_ptr(self, edge, slot=0):
        e = self.m.edges[edge]
        return self.arena + e.device_offset + slot * e.row_bytes

    def _bind(self, step, parity, cnn, engines, stream, sinks):
        if step.model is None:      # the Input layer: the frame into its edges
            targets = [(self._edge_ptr(b.edges[parity]), self.m.edges[b.edges[parity]].layout)
                       for b in step.bind]
            cuda, dtype, local = self.cuda, self.dtype, self.frame

            def copy_frame():
                for ptr, layout in targets:
                    frame = local.frame.transpose(2, 0, 1, 3) if layout == "hncw" else local.frame
                    cuda.h2d(ptr, frame.astype(dtype))
            return copy_frame
        addresses = {}
        for b in step.bind:
            if b.kind == "const":
                arr = np.asarray(b.values, np.int32)
                ptr = self.cuda.malloc(arr.nbytes)
                self.allocated += -(-arr.nbytes // ALIGN) * ALIGN
                self.cuda.h2d(ptr, arr)
                addresses[b.name] = ptr
            elif b.kind == "output":
                ptr, host, layout = sinks[(cnn, b.layer, parity)]
                row = host.nbytes // host.shape[0] if layout == "hncw" else 0
                addresses[b.name] = ptr + b.slot * row
            else:
                addresses[b.name] = self._edge_ptr(b.edges[parity], b.slot)
        return engines[step.model].call(addresses, stream)

    def run_stream(self, cnn, frames, keep=True):
        run = self.cnns[cnn]
        results = [None] * len(frames)
        stages = run.stages
        if not run.pipelined:
            for f, frame in enumerate(frames):
                self.frame.frame = frame
                for st in stages:
                    for call in st.calls[f % 2]:
                        call()
                    run.calls += len(st.calls[f % 2])
                    self.cuda.sync(st.stream)
                if keep:
                    results[f] = self._collect(run, f % 2)
            return results
        done = [[threading.Event() for _ in frames] for _ in stages]
        errors = []
        counts = [0] * len(stages)

        def stage(k):
            try:
                for f in range(len(frames)):
                    if k > 0:
                        done[k - 1][f].wait()
                    if f >= 2 and k + 1 < len(stages):
                        done[-1][f - 2].wait()
                    if errors:
                        return
                    self.frame.frame = frames[f]
                    calls = stages[k].calls[f % 2]
                    for call in calls:
                        call()
                    counts[k] += len(calls)
                    self.cuda.sync(stages[k].stream)
                    if k == len(stages) - 1 and keep:
                        results[f] = self._collect(run, f % 2)
                    done[k][f].set()
            except Exception as err:
                errors.append(err)
                for evs in done:
                    for ev in evs:
                        ev.set()
        threads = [threading.Thread(target=stage, args=(k,)) for k in range(len(stages))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        run.calls += sum(counts)
        if errors:
            raise errors[0]
        return results

    def _collect(self, run, parity):
        out = []
        for ptr, host, layout in run.outputs[parity]:
            self.cuda.d2h(host, ptr)
            arr = host.transpose(1, 2, 0, 3) if layout == "hncw" else host
            out.append(arr.astype(np.float32))
        return out

    def param_bytes(self):
        """Weights the engines hold: serialized engine sizes are the closest public figure."""
        total = 0
        for rel in self.m.models:
            total += os.path.getsize(engine_path(self.dir, rel))
        return total


def reference_engine(cuda, runtime, path, frame):
    """The engine of the unmodified model at `path`, bound to its own device buffers, fed
    `frame`: a call that runs it and returns its outputs (the yardstick of `run`)."""
    eng = Engine(runtime, path)
    scratch = cuda.malloc(max(eng.scratch, ALIGN))
    eng.attach(scratch)
    stream = cuda.stream()
    addresses, outs = {}, []
    for name in eng.names:
        if trt_major() >= 10:
            shape = list(eng.engine.get_tensor_shape(name))
            is_input = eng.engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT
            dtype = trt.nptype(eng.engine.get_tensor_dtype(name))
        else:
            idx = eng.engine.get_binding_index(name)
            shape = list(eng.engine.get_binding_shape(idx))
            is_input = eng.engine.binding_is_input(idx)
            dtype = trt.nptype(eng.engine.get_binding_dtype(idx))
        host = np.zeros(shape, dtype)
        ptr = cuda.malloc(host.nbytes)
        addresses[name] = ptr
        if is_input:
            cuda.h2d(ptr, frame.reshape(shape).astype(dtype))
        else:
            outs.append((ptr, host))
    call = eng.call(addresses, stream)

    def run(new_frame):
        for name in eng.names[:1]:
            cuda.h2d(addresses[name], new_frame.astype(np.float32))
        call()
        cuda.sync(stream)
        res = []
        for ptr, host in outs:
            cuda.d2h(host, ptr)
            res.append(host.astype(np.float32))
        return res
    return run
