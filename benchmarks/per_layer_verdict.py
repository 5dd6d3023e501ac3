"""The verdict of a deployment with a precision per layer (deploy/run/verdict.py): how far two
correct computations of its per-layer reference lie apart, and how far damage moves it.

For a deployment DIR (of a `precision: auto` plan) and frames FRAMES.npy, per frame: the
largest and the rms difference of the deployment's output from its per-layer reference, and
of the reference run with ONNX Runtime's graph optimizations off (the verdict's `spread`);
then `explore run DIR --input FRAMES` of two damaged copies (each in its own process):
two step models of equal ports and other weights swapped, and one filter of a middle conv's
weights negated.

With SETS (a number), also the ratio of the two rms differences, pooled, on SETS sets of 4
text frames rendered as benchmarks/int8_accuracy.py renders them (seeds 3, 4, ...).

    python benchmarks/per_layer_verdict.py DIR FRAMES.npy [SETS]
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]


def _redigest(dep: Path) -> None:
    """Record the files' digests as they are now, so the verdict (not the load) judges them."""
    from deploy.checks.files import digest
    path = dep / "manifest.json"
    data = json.loads(path.read_text())
    data["files"] = {rel: digest(dep / rel) for rel in data["files"]}
    path.write_text(json.dumps(data))


def _ports(path: Path) -> tuple:
    import onnx
    g = onnx.load(str(path), load_external_data=False).graph
    return tuple((v.name, v.type.tensor_type.elem_type,
                  tuple(d.dim_value for d in v.type.tensor_type.shape.dim))
                 for v in list(g.input) + list(g.output))


def swapped(dep: Path, out: Path) -> str:
    """A copy of `dep` with the middle pair of conv step models of equal ports exchanged."""
    shutil.copytree(dep, out)
    models = json.loads((dep / "manifest.json").read_text())["models"]
    seen, pairs = {}, []
    for rel in sorted(models):
        if "Conv" not in rel:
            continue
        sig = _ports(dep / rel)
        if sig in seen and models[seen[sig]]["layer"] != models[rel]["layer"]:
            pairs.append((seen[sig], rel))
        seen.setdefault(sig, rel)
    a, b = pairs[len(pairs) // 2]
    data_a, data_b = (out / a).read_bytes(), (out / b).read_bytes()
    (out / a).write_bytes(data_b)
    (out / b).write_bytes(data_a)
    _redigest(out)
    return f"{a} <-> {b}"


def negated(dep: Path, out: Path) -> str:
    """A copy of `dep` with output channel 0 of the middle conv step model's weight negated
    (doubled, a channel that a ReLU zeroes stays zeroed)."""
    import onnx
    from onnx import numpy_helper
    shutil.copytree(dep, out)
    rels = sorted(r for r in json.loads((dep / "manifest.json").read_text())["models"] if "Conv" in r)
    rel = rels[len(rels) // 2]
    model = onnx.load(str(out / rel))
    for i, t in enumerate(model.graph.initializer):
        w = numpy_helper.to_array(t)
        if w.ndim == 4 and w.shape[0] > 1:
            w = w.copy()
            w[0] = -w[0]
            model.graph.initializer[i].CopyFrom(numpy_helper.from_array(w, t.name))
            break
    onnx.save(model, str(out / rel))
    _redigest(out)
    return f"{rel}: filter 0 of {t.name} negated"


def main() -> None:
    dep, frames_path = Path(sys.argv[1]), Path(sys.argv[2])
    import memtrade
    from deploy.checks import reference
    held = np.load(frames_path)
    frames = [f[None] if f.ndim == 3 else f for f in held]
    cnn = next(iter(json.loads((dep / "manifest.json").read_text())["cnns"]))
    res = memtrade.run(dep, inputs={cnn: frames}, threads=1)
    ref_file = dep / json.loads((dep / "manifest.json").read_text())["cnns"][cnn]["reference"]
    ref = reference.session(ref_file, 1)
    plain = reference.session(ref_file, 1, plain=True)
    print(f"load {os.getloadavg()[0]:.1f}; {dep}, {len(frames)} frames of {frames_path}")
    print("frame | deployment - reference: max, rms | plain kernels - reference: max, rms")
    for i, f in enumerate(frames):
        got = res.outputs[cnn][i][0]
        r = reference.run(ref, f)[0].reshape(got.shape)
        p = reference.run(plain, f)[0].reshape(got.shape)
        rms = lambda d: float(np.sqrt(np.mean(np.square(d, dtype=np.float64))))  # noqa: E731
        print(f"{i} | {np.abs(got - r).max():.3f}, {rms(got - r):.4f} | "
              f"{np.abs(p - r).max():.3f}, {rms(p - r):.4f}")
    if len(sys.argv) > 3:
        import int8_accuracy
        int8_accuracy.SIZE = int(frames[0].shape[-1])
        for seed in range(3, 3 + int(sys.argv[3])):
            more = [f if f.ndim == 4 else f[None]
                    for f in int8_accuracy.render(4, seed=seed).astype(np.float32)]
            outs = memtrade.run(dep, inputs={cnn: more}, threads=1).outputs[cnn]
            dep_sq = plain_sq = 0.0
            for f, got in zip(more, outs):
                r = reference.run(ref, f)[0].reshape(got[0].shape)
                p = reference.run(plain, f)[0].reshape(got[0].shape)
                dep_sq += float(np.sum(np.square(got[0] - r, dtype=np.float64)))
                plain_sq += float(np.sum(np.square(p - r, dtype=np.float64)))
            print(f"rendered set seed {seed}: deployment rms / plain-kernel rms "
                  f"{(dep_sq / plain_sq) ** 0.5:.2f}")
    v = res.verdicts[cnn]
    print(f"verdict {v.verdict}: rms {v.max_abs_diff:.4f}, tolerance {v.tolerance:.4f}, "
          f"spread {v.rounding:.4f}")
    tmp = Path(tempfile.mkdtemp(prefix="per_layer_verdict_"))
    for name, damage in (("swapped", swapped), ("negated", negated)):
        what = damage(dep, tmp / name)
        run = subprocess.run([sys.executable, "-m", "explorer.cli.main", "run", str(tmp / name),
                              "--input", str(frames_path), "--json"], capture_output=True,
                             text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
        got = json.loads(run.stdout)["verdict"][cnn]
        print(f"{name} ({what}): {got['verdict']}, rms {got['max_abs_diff']:.4f}, "
              f"tolerance {got['tolerance']:.4f}")
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
