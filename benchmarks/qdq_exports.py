"""QDQ exports of torchvision networks, end to end through the front door: explore at the least
memory, deploy, run, judged against the QDQ model itself (ONNX Runtime's int8 reference).

    python benchmarks/qdq_exports.py [--only SUBSTRING] [--models /work/models/qdq]
                                     [--torch-python /work/venv-torch/bin/python]
                                     [--time-limit 20] [--frames 20] [--calibration 8]
                                     [--calibration-kind normal|uniform]

Each case runs in its own process (`--child NAME`):
- the fp32 export, cached under --models: `benchmarks/export_torchvision.py` run by
  --torch-python (TorchScript exporter, opset 17, random weights seeded 0, BatchNorm
  statistics from random batches);
- its QDQ export, cached beside it as NAME.qdq-KIND.onnx: ONNX Runtime's quantize_static
  (QDQ, per-channel int8 weights, int8 activations, every operator type it quantizes by
  default, so SiLU's Sigmoid and Mul, GlobalAveragePool, Add are quantized too), calibrated
  on --calibration seeded frames of --calibration-kind: `normal`, standard-normal as the
  frames `explore run` compares on, or `uniform` in [0, 1) as image pixels, so that the run's
  frames reach past the calibrated ranges and the model's QuantizeLinear nodes saturate;
- `explore APP --mem 0 --time-limit T`, `explore deploy`, `explore run --json --frames F`.

Reported per case: the layers that keep their own quantization points inside (`explore info`),
the layers the import left unfused at such a point, arena against the plan's buffers, calls
per frame, the verdict with max |diff|, the tolerance and their ratio (the target: PASS,
arena = plan, max |diff| at most half the tolerance).
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
CASES = ("efficientnet_b0", "mobilenet_v3_large", "resnet18")
SIZE = 224


def explore(argv: list[str]) -> tuple[int, str]:
    """`explore argv` in a child process: (exit status, stdout); 3 (a plan that misses its
    constraints) and 4 (a FAIL verdict) are results, not errors."""
    done = subprocess.run([sys.executable, "-m", "explorer.cli.main", *argv], cwd=ROOT,
                          capture_output=True, text=True)
    if done.returncode not in (0, 3, 4):
        raise RuntimeError(f"explore {' '.join(argv)}: exit {done.returncode}: {done.stderr.strip()[-500:]}")
    return done.returncode, done.stdout


def exported(name: str, folder: Path, torch_python: str) -> Path:
    """The fp32 export of torchvision's `name` (module docstring), made once."""
    path = folder / f"{name}.onnx"
    if not path.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run([torch_python, str(ROOT / "benchmarks" / "export_torchvision.py"), "--model", name,
                        "--exporter", "torchscript", "--opset", "17", "--out", str(path)], check=True)
    return path


def quantized(source: Path, count: int, kind: str) -> Path:
    """ONNX Runtime's quantize_static of `source` (module docstring), made once."""
    import logging

    import onnx
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    target = source.with_name(f"{source.stem}.qdq-{kind}.onnx")
    if target.is_file():
        return target
    logging.getLogger().setLevel(logging.ERROR)
    name = onnx.load(str(source), load_external_data=False).graph.input[0].name
    rng = np.random.default_rng(0)
    shape = (1, 3, SIZE, SIZE)
    frames = [rng.standard_normal(shape, dtype=np.float32) if kind == "normal"
              else rng.random(shape, dtype=np.float32) for _ in range(count)]

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.left = iter({name: f} for f in frames)

        def get_next(self):
            return next(self.left, None)

    quantize_static(str(source), str(target), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)
    return target


def child(name: str, args) -> dict:
    started = time.perf_counter()
    model = quantized(exported(name, Path(args.models), args.torch_python), args.calibration,
                      args.calibration_kind)
    prepared = time.perf_counter() - started
    with tempfile.TemporaryDirectory(prefix="memtrade-qdq-") as tmp:
        tmp = Path(tmp)
        app = tmp / "app.yaml"
        app.write_text(f"name: {name}-qdq\nplatform: jetson-tx2\ncnns:\n  - name: net\n"
                       f"    model: {model}\n    fps: 0\n")
        _, out = explore(["info", str(app), "--json", "--layers"])
        info = json.loads(out)["cnns"]["net"]
        start = time.perf_counter()
        explore([str(app), "--mem", "0", "--time-limit", str(args.time_limit), "--quiet",
                 "--out", str(tmp / "plan")])
        explore_s = time.perf_counter() - start
        explore(["deploy", str(tmp / "plan" / "plan.json"), "--out", str(tmp / "dep")])
        _, out = explore(["run", str(tmp / "dep"), "--json", "--frames", str(args.frames)])
        res = json.loads(out)
    v = res["verdict"]["net"]
    layers = info["layer_list"]
    return {
        "case": name, "layers": len(layers), "prepare_s": round(prepared, 1), "explore_s": round(explore_s, 1),
        "inner_layers": sum(1 for l in layers if l.get("quantization_points")),
        "inner_points": sum(len(l.get("quantization_points", [])) for l in layers),
        "kept_apart": sum(1 for l in layers if l.get("kept_apart")),
        "arena_bytes": res["arena_bytes"], "plan_buffer_bytes": res["plan_buffer_bytes"],
        "arena_eq_plan": res["arena_bytes"] == res["plan_buffer_bytes"],
        "calls_per_frame": res["calls_per_frame"], "verdict": v["verdict"],
        "max_abs_diff": v["max_abs_diff"], "max_abs_output": v["max_abs_output"],
        "tolerance": v["tolerance"], "diff_over_tolerance": v["max_abs_diff"] / v["tolerance"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="")
    parser.add_argument("--models", default="/work/models/qdq")
    parser.add_argument("--torch-python", default="/work/venv-torch/bin/python")
    parser.add_argument("--time-limit", type=int, default=20)
    parser.add_argument("--frames", type=int, default=20)
    parser.add_argument("--calibration", type=int, default=8)
    parser.add_argument("--calibration-kind", choices=["normal", "uniform"], default="normal")
    parser.add_argument("--child")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args)))
        return 0
    rows = []
    for name in CASES:
        if args.only not in name:
            continue
        load = os.getloadavg()[0]
        done = subprocess.run([sys.executable, __file__, "--child", name, "--models", args.models,
                               "--torch-python", args.torch_python, "--time-limit", str(args.time_limit),
                               "--frames", str(args.frames), "--calibration", str(args.calibration),
                               "--calibration-kind", args.calibration_kind],
                              capture_output=True, text=True, cwd=ROOT)
        if done.returncode:
            print(f"{name}: exit {done.returncode}: {done.stderr.strip()[-800:]}", file=sys.stderr)
            continue
        row = json.loads(done.stdout.strip().splitlines()[-1])
        row["load"] = f"{load:.2f}-{os.getloadavg()[0]:.2f}"
        rows.append(row)
        print(json.dumps(row), flush=True)
    print("| network | layers | with inner points (points) | kept apart | arena = plan | calls/frame "
          "| verdict | max abs diff | tolerance | diff / tolerance | explore s | load |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['case']} | {r['layers']} | {r['inner_layers']} ({r['inner_points']}) | {r['kept_apart']} "
              f"| {r['arena_eq_plan']} ({r['arena_bytes']:,} B) | {r['calls_per_frame']} | {r['verdict']} "
              f"| {r['max_abs_diff']:.4g} | {r['tolerance']:.4g} | {r['diff_over_tolerance']:.3f} "
              f"| {r['explore_s']} | {r['load']} |")
    return 0 if all(r["verdict"] == "PASS" and r["arena_eq_plan"] and r["diff_over_tolerance"] <= 0.5
                    for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
