"""`explore run`'s verdict over many seeds in one process: per seed the frames `explore run
DIR --seed S` makes, the deployed outputs of its checked frames against the reference at the
plan's precision, the reference's spread (fp16: from the fp32 network; fp32: from the model
run with ONNX Runtime's optimizations off) and the tolerance deploy/run/verdict.py gives
them. Prints one line per seed and CNN and, last, the worst ratio max |diff| / tolerance (a
correct deployment should stay well below 1; the verdict's margin is its distance from 1).

    python benchmarks/verdict_seeds.py DEPLOY_DIR [--seeds 100] [--frames 20] [--threads 0]

The deployment is loaded once and run for every seed, as `explore run` would run it
(onnxruntime backend, default layout, one shared thread pool); the reference sessions are
made once.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from deploy.checks import reference  # noqa: E402
from deploy.ort import process as ort_process  # noqa: E402
from deploy.run import verdict  # noqa: E402
from deploy.backends import registry  # noqa: E402
from deploy.run.measure import CHECKED, frames_for  # noqa: E402
from deploy.runtime import manifest as mf  # noqa: E402
from deploy.runtime.executor import Executor  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir")
    parser.add_argument("--seeds", type=int, default=100)
    parser.add_argument("--frames", type=int, default=20, help="as explore run's --frames")
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    manifest = mf.load(args.dir)
    ort_process.init_runtime(args.threads, True)     # one thread pool, as explore run has
    ex = Executor(manifest, args.dir, registry.backend(manifest.backend).runtime(manifest.dtype, args.threads, True))
    weights = registry.backend(manifest.backend).stored_weights(manifest.precision)    # as explore run's verdict
    refs, other, stored = {}, {}, {}
    for name, info in manifest.cnns.items():
        path = Path(args.dir) / info.reference
        refs[name] = reference.session(path, args.threads, manifest.dtype, weights)
        stored[name] = reference.stored_dtype(path)
        # the spread's second computation (verdict.rounding): at fp16 the fp32 network, at
        # fp32 the same model with ONNX Runtime's optimizations off; none for a model stored
        # in fp16 under an fp32 plan
        if manifest.dtype != "float32":
            other[name] = reference.session(path, args.threads, weights=weights)
        elif stored[name] == "float32":
            other[name] = reference.session(path, args.threads, weights=weights, plain=True)
    worst = (0.0, None, None)
    for seed in range(args.seeds):
        routed = frames_for(manifest, max(args.frames, len(manifest.cnns)), seed)
        diff, size, noise = {}, {}, {}
        for name, stream in routed.items():
            checked = [stream[f] for f in range(min(CHECKED, len(stream)))]
            got = ex.run_stream(name, checked)
            d = m = 0.0
            for frame, outs in zip(checked, got):
                for g, w in zip(outs, reference.run(refs[name], frame)):
                    d = max(d, float(np.max(np.abs(g - w.reshape(g.shape)))))
                    m = max(m, float(np.max(np.abs(w))))
            diff[name], size[name] = d, m
            noise[name] = verdict.spread(other[name], refs[name], checked) if name in other else 0.0
        for name, v in verdict.judge(diff, size, manifest.dtype, noise, stored).items():
            ratio = v.max_abs_diff / v.tolerance
            print(f"seed {seed:3d} {name}: max |diff| {v.max_abs_diff:.4g} on outputs up to "
                  f"{v.max_abs_output:.3g}, spread {v.rounding:.4g}, tolerance "
                  f"{v.tolerance:.4g}: ratio {ratio:.3f} {v.verdict}", flush=True)
            if ratio > worst[0]:
                worst = (ratio, seed, name)
    print(f"worst ratio max |diff| / tolerance: {worst[0]:.3f} (seed {worst[1]}, {worst[2]}) "
          f"over seeds 0-{args.seeds - 1}")


if __name__ == "__main__":
    main()
