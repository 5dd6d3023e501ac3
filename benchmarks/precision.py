"""Deployments at each precision, end to end through the front door, against ONNX Runtime's
own session at the same precision: plan memory, measured footprint, weights held, arena, fps
(and x the plain session), calls per frame and the verdict's margin (max |diff| over the
tolerance).

    python benchmarks/precision.py [--only SUBSTRING] [--threads 1] [--frames 20]
                                   [--time-limit 60] [--seed 0] [--rounds 3]

Each case runs in its own process (`--child NAME`): `explore APP ... --out D`, `explore
deploy D/plan.json --out DEP`, `explore run DEP --json --threads T` (the footprint is that
run's: peak RSS minus the RSS before loading, deploy/runtime/footprint.py) and the plain
session on the same frames at the same precision in the same process, alternating `--rounds`
times (fps: the medians; footprint: the largest of the runs): the original model
(fp32), ONNX Runtime's fp16 converter with fp32 inputs and outputs (fp16 and mixed), or
ONNX Runtime's quantize_static (QDQ, uint8 activations, per-channel int8 weights, calibrated
on the deployment's generated frames) for int8.

Cases: the README's fp16 plan; Table 13's four apps at their files' precision (fp16,
mixed); Table 12's app 1 and ResNet-50 at --precision int8, reuse-only (--mem 1GB) and least
memory (--mem 0); a QDQ MobileNetV2 (quantize_static of the zoo model) at the least memory.

Targets: every case PASSes with arena = plan buffers and
weights held within 5% of the plan's parameter bytes; int8 least memory footprint <= 1.10 x
plan + 4 MiB; int8 MobileNetV2 at 1 thread: reuse-only >= 0.9x and least memory >= 0.6x the
plain int8 session's fps.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
MiB = 2 ** 20
README = ["apps/table13_mobilenet_sequential.yaml", "--mem", "8MB", "--fps", "71"]
APP1 = "apps/table12_app1_mobilenet_v2.yaml"
R50 = "apps/table13_resnet_sequential.yaml"
CASES = {
    "readme-fp16": README,
    "t13-mobilenet-pipelined": ["apps/table13_mobilenet_pipelined.yaml"],
    "t13-multi-cnn": ["apps/table13_multi_cnn.yaml"],
    "t13-resnet": [R50],
    "app1-int8-reuse": [APP1, "--precision", "int8", "--mem", "1GB"],
    "app1-int8-least": [APP1, "--precision", "int8", "--mem", "0"],
    "r50-int8-reuse": [R50, "--precision", "int8", "--mem", "1GB", "--fps", "0"],
    "r50-int8-least": [R50, "--precision", "int8", "--mem", "0", "--fps", "0"],
    "qdq-mobilenet_v2-least": ["QDQ", "--mem", "0"],
    # planned with this machine's measured int8 profile (`platform: cpu`, threads 1)
    "app1-int8-cpu-reuse": ["CPU:" + APP1, "--precision", "int8", "--mem", "1GB"],
    "app1-int8-cpu-least": ["CPU:" + APP1, "--precision", "int8", "--mem", "0"],
    "readme-fp16-cpu": ["CPU:" + README[0], *README[1:]],
}


def explore(argv: list[str]) -> tuple[int, str]:
    """`explore argv` in a child process: (exit status, stdout); 3 (a plan that misses its
    constraints, written all the same) and 4 (a FAIL verdict) are results, not errors."""
    done = subprocess.run([sys.executable, "-m", "explorer.cli.main", *argv], cwd=ROOT,
                          capture_output=True, text=True)
    if done.returncode not in (0, 3, 4):
        raise RuntimeError(f"explore {' '.join(argv)}: exit {done.returncode}: {done.stderr.strip()[-500:]}")
    return done.returncode, done.stdout


def qdq_app(folder: Path) -> Path:
    """An app of the zoo's MobileNetV2 quantized by ONNX Runtime's quantize_static (QDQ)."""
    from explorer.app.appfile import load_app
    source = load_app(str(ROOT / APP1)).cnns["mobilenet_v2"].source
    model = folder / "mobilenet_v2_qdq.onnx"
    quantize(source, model, frames_for(source))
    app = folder / "qdq.yaml"
    app.write_text(f"name: mobilenet-v2-qdq\nplatform: jetson-tx2\ncnns:\n"
                   f"  - name: mobilenet_v2\n    model: {model}\n    fps: 0\n")
    return app


def cpu_app(app: Path, folder: Path, threads: int) -> Path:
    """`app` planned on this machine: `platform: cpu` with `threads:` (the CNNs' models
    named by absolute path); its measured profile is cached (docs/profile.md), so the cases
    that share it measure once."""
    import yaml
    data = yaml.safe_load(app.read_text())
    data.update(platform="cpu", threads=threads)
    for cnn in data["cnns"]:
        model = str(cnn["model"])
        if not model.startswith("zoo:") and not Path(model).is_absolute():
            cnn["model"] = str((app.parent / model).resolve())
    path = folder / f"cpu_{app.name}"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def frames_for(model: str | Path, count: int = 16):
    from deploy.checks.reference import plain_frames
    return plain_frames(model, count)


def quantize(source: str | Path, target: Path, frames) -> None:
    """ONNX Runtime's static int8 quantization of `source` as its docs prescribe: its
    pre-processing (shape inference, BatchNorm folded by its optimizer), then quantize_static
    (QDQ, per-channel weights)."""
    import logging

    import onnx
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)
    from onnxruntime.quantization.shape_inference import quant_pre_process
    logging.getLogger().setLevel(logging.ERROR)
    name = onnx.load(str(source), load_external_data=False).graph.input[0].name
    prepared = target.with_name(target.stem + "_prepared.onnx")
    quant_pre_process(str(source), str(prepared))
    source = prepared

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.left = iter({name: f} for f in frames)

        def get_next(self):
            return next(self.left, None)

    quantize_static(str(source), str(target), Reader(), quant_format=QuantFormat.QDQ,
                    per_channel=True, activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)


def plain_session(source: str, precision: str, folder: Path, threads: int):
    """ONNX Runtime's own session on the model at `precision` (module docstring)."""
    import onnx
    import onnxruntime as ort
    path = Path(source)
    if precision in ("fp16", "mixed"):
        from onnxruntime.transformers.float16 import convert_float_to_float16
        path = folder / "plain_fp16.onnx"
        onnx.save(convert_float_to_float16(onnx.load(source), keep_io_types=True), str(path))
    elif precision == "int8" and not _is_qdq(source):
        path = folder / "plain_int8.onnx"
        quantize(source, path, frames_for(source))
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def _is_qdq(source: str) -> bool:
    import onnx
    return any(n.op_type == "QuantizeLinear" for n in onnx.load(source, load_external_data=False).graph.node)


def child(name: str, args) -> dict:
    from deploy.checks.reference import plain_frames, plain_timings
    from deploy.runtime import manifest as mf
    argv = list(CASES[name])
    with tempfile.TemporaryDirectory(prefix="memtrade-precision-") as tmp:
        tmp = Path(tmp)
        if argv[0] == "QDQ":
            argv[0] = str(qdq_app(tmp))
        elif argv[0].startswith("CPU:"):
            argv[0] = str(cpu_app(ROOT / argv[0][4:], tmp, args.threads))
        else:
            argv[0] = str(ROOT / argv[0])
        start = time.perf_counter()
        explore([*argv, "--out", str(tmp / "plan"), "--quiet", "--time-limit", str(args.time_limit),
                 "--seed", str(args.seed)])
        explore_s = time.perf_counter() - start
        explore(["deploy", str(tmp / "plan" / "plan.json"), "--out", str(tmp / "dep")])
        manifest = mf.load(tmp / "dep")
        sessions = {}
        for cnn in manifest.cnns:
            source = _source(tmp / "plan" / "plan.json", cnn)
            sessions[cnn] = (plain_session(source, manifest.precision, tmp, args.threads),
                             plain_frames(source, args.frames))
        # the deployment's run and the plain session alternate, `rounds` times: fps on this
        # shared machine move by up to 25% from one run to the next
        runs, plain_runs = [], {cnn: [] for cnn in sessions}
        for _ in range(args.rounds):
            _, out = explore(["run", str(tmp / "dep"), "--json", "--threads", str(args.threads),
                              "--frames", str(args.frames)])
            runs.append(json.loads(out))
            for cnn, (sess, data) in sessions.items():
                plain_runs[cnn].append(plain_timings(sess, args.frames, data=data)["fps"])
    res = max(runs, key=lambda r: r["footprint_bytes"])      # the largest footprint measured
    fps = {c: float(np.median([r["fps"][c] for r in runs])) for c in res["fps"]}
    plain = {c: float(np.median(v)) for c, v in plain_runs.items()}
    verdicts = res.get("verdict", {})
    return {
        "case": name, "precision": manifest.precision, "dtype": manifest.dtype,
        "explore_s": round(explore_s, 1),
        "plan_memory_MiB": res["plan_memory_bytes"] / MiB, "footprint_MiB": res["footprint_bytes"] / MiB,
        "footprint_over_plan": res["footprint_bytes"] / res["plan_memory_bytes"],
        "footprint_target_MiB": 1.10 * res["plan_memory_bytes"] / MiB + 4,
        "weights_held_over_plan": res["param_bytes"] / res["plan_param_bytes"] if res.get("plan_param_bytes") else None,
        "arena_eq_plan": res["arena_bytes"] == res["plan_buffer_bytes"],
        "fps": fps, "plain_fps": plain, "x_plain": {c: fps[c] / plain[c] for c in plain},
        "fps_range": {c: [min(r["fps"][c] for r in runs), max(r["fps"][c] for r in runs)] for c in fps},
        "plain_fps_range": {c: [min(v), max(v)] for c, v in plain_runs.items()},
        "verdicts_all_pass": all(v.get("verdict") == "PASS" for r in runs
                                 for v in r.get("verdict", {}).values()),
        "calls_per_frame": res["calls_per_frame"],
        "verdict": {c: v.get("verdict") for c, v in verdicts.items()},
        "diff_over_tolerance": {c: (v["max_abs_diff"] / v["tolerance"] if v.get("tolerance") else None)
                                for c, v in verdicts.items()},
    }


def _ranges(d: dict) -> str:
    return ", ".join(f"{k} {lo:.1f}-{hi:.1f}" for k, (lo, hi) in d.items())


def _source(plan_json: Path, cnn: str) -> str:
    from explorer.app.appfile import load_app
    from explorer.plan.plan_file import from_json
    return load_app(from_json(str(plan_json)).app).cnns[cnn].source


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--frames", type=int, default=20)
    parser.add_argument("--time-limit", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=3,
                        help="runs of the deployment and of the plain session, alternating; "
                             "fps are their medians")
    parser.add_argument("--child", default=None)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args)))
        return 0
    print(f"# benchmarks/precision.py  {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}  "
          f"threads {args.threads}, frames {args.frames}, load {os.getloadavg()[0]:.2f}", flush=True)
    bad = 0
    for name in CASES:
        if args.only not in name:
            continue
        done = subprocess.run([sys.executable, __file__, "--child", name, "--threads", str(args.threads),
                               "--frames", str(args.frames), "--time-limit", str(args.time_limit),
                               "--seed", str(args.seed), "--rounds", str(args.rounds)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            bad += 1
            print(f"{name}: FAILED: {done.stderr.strip()[-600:]}", flush=True)
            continue
        r = json.loads(done.stdout.strip().splitlines()[-1])
        fmt = lambda d: ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in d.items())  # noqa: E731
        print(f"{name} ({r['precision']}, arena {r['dtype']}): plan {r['plan_memory_MiB']:.2f} MiB, "
              f"footprint {r['footprint_MiB']:.2f} MiB ({r['footprint_over_plan']:.2f}x plan; target "
              f"{r['footprint_target_MiB']:.2f}), weights held / plan "
              f"{r['weights_held_over_plan'] or 0:.3f}, arena = plan {r['arena_eq_plan']}; fps "
              f"{fmt(r['fps'])} (plain {fmt(r['plain_fps'])}: x {fmt(r['x_plain'])}); calls/frame "
              f"{fmt(r['calls_per_frame'])}; verdict {fmt(r['verdict'])}, diff/tolerance "
              f"{fmt(r['diff_over_tolerance'])}; load {os.getloadavg()[0]:.2f}; fps ranges over "
              f"{args.rounds} rounds {_ranges(r['fps_range'])} (plain {_ranges(r['plain_fps_range'])})",
              flush=True)
        bad += any(v != "PASS" for v in r["verdict"].values()) or not r["verdicts_all_pass"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
