"""A step bound to the same edges on both frame parities is bound once (ONNX Runtime
keeps ~2.3 KB per IO binding, and a by-parts frame makes a call per layer and phase); steps
of a pipeline keep one binding per parity where they bind a crossing edge's copies or the
CNN's output (an output array per parity); outside a pipeline every step is bound once."""
from __future__ import annotations

from csdf.parts import all_parts
from deploy.build.derive import derive
from deploy.ort.backend import OrtBackend
from deploy.run.measure import measure
from deploy.runtime import manifest as mf
from deploy.runtime.executor import Executor
from deploy_fixtures import make_plan, tiny_cnn


def _shared(manifest, executor, pipelined: bool):
    """Per partition: for every step, whether parity 1 runs the very call of parity 0, and
    whether the manifest says it may (same edges on both parities; a CNN output only
    outside a pipeline, where both parities write the one output array)."""
    out = {}
    for part, run_part in zip(manifest.partitions,
                              [p for run in executor.cnns.values() for p in run.partitions]):
        may = [all(b.kind == "const" or (b.kind == "output" and not pipelined)
                   or (b.kind in ("edge", "frame") and b.edges[0] == b.edges[1])
                   for b in s.bind)
               for s in part.steps]
        same = [a is b for a, b in zip(*run_part.calls)]
        out[part.name] = (may, same)
    return out


def test_one_binding_for_both_parities_outside_a_pipeline(tmp_path):
    cnn = tiny_cnn(tmp_path)
    for label, kw in [("alone", {}), ("pipelined", {"split": {cnn.name: 9}, "pipelined": True})]:
        plan = make_plan([cnn], {cnn.name: all_parts(cnn)}, **kw)
        out = tmp_path / label
        manifest = derive(plan, {cnn.name: cnn}, out)
        executor = Executor(mf.load(out), out, OrtBackend("float32", threads=1))
        for name, (may, same) in _shared(manifest, executor, label == "pipelined").items():
            assert same == may, name
            if label == "alone":
                assert all(same)                      # the sink's step too: one output array
            else:
                assert not all(same)                  # crossing edges, outputs: one per parity
        result = measure(out, frames=3, threads=1)
        assert result["max_abs_diff"][cnn.name] < 1e-4
        assert result["arena_bytes"] == plan["buffer_bytes"]
