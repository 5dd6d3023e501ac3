"""Precision per layer end to end: `precision: auto` with `min_sqnr_db` against the all-int8
plan, on PP-OCRv4's text detector and on MobileNetV2 and ResNet-50 exports, judged on held-out
frames against fp32 (docs/precision.md "Per layer").

Cases, each in its own process (this script with `--case NAME`, results as JSON lines on
stdout):
- detector: ch_PP-OCRv4_det_infer.onnx taken from the rapidocr-onnxruntime 1.4.4 wheel in
  /work/wheels when it is there (the file is read out of the wheel), else the extracted copy
  in /work/models; input [1, 3, SIZE, SIZE]; frames rendered with Pillow as
  benchmarks/int8_accuracy.py `render` does (words on light backgrounds, PaddleOCR's
  normalisation); judged by text-map IoU (benchmarks/perlayer.py `text_iou`);
- mobilenet_v2, resnet50: torchvision's networks exported by benchmarks/export_torchvision.py
  under /work/venv-torch (torch.onnx.export, TorchScript exporter, opset 17) with
  torchvision's default initialisation under torch.manual_seed(0) and BatchNorm statistics of
  random batches (no pretrained weights can be downloaded here); input [1, 3, 224, 224];
  frames rendered with Pillow (shapes and words on backgrounds, ImageNet normalisation);
  judged by argmax agreement with fp32. On random-init networks the argmax is that of
  near-flat logits, so agreement is a stricter test of the rounding than on trained ones,
  not a measure of accuracy.
Calibration frames are rendered with seed 1, held-out frames with seed 2.

Per case:
- the all-int8 plan (`precision: int8`, `memory: 0`: the least memory) and, per calibration
  method (minmax, entropy, percentile: ONNX Runtime's calibrators), its int8 reference
  (deploy/checks/layer_reference.py with every layer at int8, the network rounded as the
  int8 deployment rounds it) on the calibration and the held-out frames: SQNR against fp32
  and the case's score;
- the method the auto plan uses: the one whose all-int8 reference measures the highest SQNR
  on the calibration frames (minmax on a tie);
- the auto plan (`precision: auto`, `min_sqnr_db`, `--calibration` the calibration frames):
  memory and its ratio to the all-int8 plan's, layers per precision, the SQNR estimate, the
  reference SQNR on the calibration frames, and on the held-out frames its reference's SQNR
  and score;
- deployed: `explore deploy` of the auto plan (its refusal line when refused), then
  `explore run DEP --frames 8 --json` (arena and footprint against the plan, verdict) and
  `explore run DEP --input HELD_OUT.npy --json` (vs_fp32 SQNR, the score of its outputs).

    python benchmarks/precision_per_layer.py [--cases detector mobilenet_v2 resnet50]
        [--size 640] [--calib 16] [--held-out 8] [--time-limit 60] [--min-sqnr 20]
        [--methods minmax entropy percentile] [--cache DIR] [--quick]
    python benchmarks/precision_per_layer.py --summary RUN.jsonl     # markdown tables

`--quick`: detector at 320, 4 calibration frames, 4 held-out ones, minmax only, 30 s searches,
for debugging.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

WHEEL = Path("/work/wheels/rapidocr_onnxruntime-1.4.4-py3-none-any.whl")
IN_WHEEL = "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx"
EXTRACTED = Path("/work/models/ch_PP-OCRv4_det_infer.onnx")
TORCH_PYTHON = Path("/work/venv-torch/bin/python")
CLASSIFIERS = ("mobilenet_v2", "resnet50")
CASES = ("detector",) + CLASSIFIERS
METHODS = ("minmax", "entropy", "percentile")
OPSET = 17
TORCH_SEED = 0
MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)


def detector_model(work: Path) -> tuple[Path, str]:
    """The detector's ONNX file and where it came from (the wheel, else the extracted copy)."""
    if WHEEL.exists():
        out = work / "ch_PP-OCRv4_det_infer.onnx"
        with zipfile.ZipFile(WHEEL) as wheel:
            out.write_bytes(wheel.read(IN_WHEEL))
        return out, f"{WHEEL}:{IN_WHEEL}"
    return EXTRACTED, str(EXTRACTED)


def classifier_model(name: str, work: Path) -> tuple[Path, str]:
    """torchvision's `name` exported to ONNX (module docstring)."""
    out = work / f"{name}.onnx"
    subprocess.run([str(TORCH_PYTHON), str(ROOT / "benchmarks" / "export_torchvision.py"),
                    "--model", name, "--exporter", "torchscript", "--opset", str(OPSET),
                    "--seed", str(TORCH_SEED), "--out", str(out)], check=True)
    return out, (f"torchvision {name}, default init under torch.manual_seed({TORCH_SEED}), "
                 f"torch.onnx.export (TorchScript exporter), opset {OPSET}")


def scenes(count: int, seed: int, size: int = 224) -> np.ndarray:
    """`count` frames [F, 1, 3, size, size]: Pillow shapes and words on a two-colour
    background, ImageNet-normalised (RGB, CHW)."""
    from PIL import Image, ImageDraw, ImageFont

    from int8_accuracy import FONTS, WORDS
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        top, bottom = rng.integers(0, 256, 3), rng.integers(0, 256, 3)
        t = np.linspace(0, 1, size, dtype=np.float32)[:, None, None]
        bg = (top * (1 - t) + bottom * t).repeat(size, axis=1).astype(np.uint8)
        img = Image.fromarray(bg, "RGB")
        draw = ImageDraw.Draw(img)
        for _ in range(int(rng.integers(3, 9))):
            x0, y0 = (int(v) for v in rng.integers(0, size - 16, 2))
            w, h = (int(v) for v in rng.integers(16, size // 2, 2))
            box = (x0, y0, min(size - 1, x0 + w), min(size - 1, y0 + h))
            fill = tuple(int(v) for v in rng.integers(0, 256, 3))
            kind = int(rng.integers(3))
            if kind == 0:
                draw.ellipse(box, fill=fill)
            elif kind == 1:
                draw.rectangle(box, fill=fill)
            else:
                draw.polygon([(int(rng.integers(box[0], box[2] + 1)), int(rng.integers(box[1], box[3] + 1)))
                              for _ in range(3)], fill=fill)
        if FONTS:
            font = ImageFont.truetype(str(FONTS[int(rng.integers(len(FONTS)))]), int(rng.integers(14, 40)))
            draw.text(tuple(int(v) for v in rng.integers(0, size // 2, 2)),
                      str(rng.choice(WORDS)), fill=tuple(int(v) for v in rng.integers(0, 256, 3)), font=font)
        x = np.asarray(img, np.float32) / 255.0
        out.append(((x - MEAN) / STD).transpose(2, 0, 1)[None])
    return np.stack(out).astype(np.float32)


def argmax_agreement(got, want) -> float:
    """Share of frames whose first output's argmax is fp32's."""
    return float(np.mean([np.argmax(g[0]) == np.argmax(w[0]) for g, w in zip(got, want)]))


def explorer_line(args: list[str]) -> tuple[int, str, str]:
    """(exit status, stdout, the last line of stderr) of `explore ARGS`."""
    done = subprocess.run([sys.executable, "-m", "explorer.cli.main", *args],
                          capture_output=True, text=True, cwd=ROOT)
    lines = [l for l in done.stderr.splitlines() if l.strip()]
    return done.returncode, done.stdout, lines[-1] if lines else ""


def case(name: str, args: argparse.Namespace) -> None:
    """One case in this process; each figure one JSON line on stdout."""
    import memtrade
    from explorer.app.layer_precision import LayerPrecisions, uniform
    from perlayer import held_out, text_iou

    def emit(part: str, **row) -> None:
        print(json.dumps({"case": name, "part": part, **row, "load": os.getloadavg()[0]}), flush=True)

    work = Path(tempfile.mkdtemp(prefix=f"ppl_{name}_"))
    if name == "detector":
        import int8_accuracy
        int8_accuracy.SIZE = size = args.size
        model, origin = detector_model(work)
        calib, judge = (int8_accuracy.render(args.calib, seed=1), int8_accuracy.render(args.held_out, seed=2))
        score, score_name = text_iou, "iou"
    else:
        size = 224
        model, origin = classifier_model(name, work)
        calib, judge = scenes(args.calib, seed=1), scenes(args.held_out, seed=2)
        score, score_name = argmax_agreement, "argmax_agreement"
    calib_path, judge_path = work / "calib.npy", work / "held_out.npy"
    np.save(calib_path, calib.astype(np.float32))
    np.save(judge_path, judge.astype(np.float32))
    emit("model", model=origin, sha256=hashlib.sha256(model.read_bytes()).hexdigest(),
         input=[1, 3, size, size], calib_frames=len(calib), held_out_frames=len(judge))

    doc = {"name": name, "platform": "jetson-tx2", "memory": 0,
           "cnns": [{"name": name, "model": str(model), "input_shape": [1, 3, size, size]}]}
    started = time.perf_counter()
    int8_plan = memtrade.explore(memtrade.load_app(doc | {"precision": "int8"}),
                                 time_limit=args.time_limit).plan
    emit("int8_plan", memory_bytes=int8_plan.memory_bytes, param_bytes=int8_plan.param_bytes,
         buffer_bytes=int8_plan.buffer_bytes, seconds=round(time.perf_counter() - started, 1))

    auto_app = memtrade.load_app(doc | {"precision": "auto", "min_sqnr_db": args.min_sqnr})
    int8 = uniform(auto_app.cnns, "int8")
    calib_frames, judge_frames = list(calib.astype(np.float32)), list(judge.astype(np.float32))
    fp32 = {}
    on_calib = {}
    for method in [] if args.auto_method else args.methods:
        started = time.perf_counter()
        mine = held_out(auto_app, int8, calib_path, calib_frames, method, score, fp32, "calib")
        held = held_out(auto_app, int8, calib_path, judge_frames, method, score, fp32, "held_out",
                        scales=mine["scales"])
        on_calib[method] = mine["sqnr_db"]
        emit("int8_reference", method=method, calib_sqnr_db=mine["sqnr_db"],
             held_out_sqnr_db=held["sqnr_db"], **{f"held_out_{score_name}": held["score"]},
             seconds=round(time.perf_counter() - started, 1))
    if args.auto_method:
        chosen, rule = args.auto_method, "given (--auto-method)"
    else:
        chosen = max(args.methods, key=lambda m: (on_calib[m], m == "minmax"))
        rule = "highest all-int8 reference SQNR on the calibration frames"
    emit("method", chosen=chosen, rule=rule)

    started = time.perf_counter()
    found = memtrade.explore(auto_app, time_limit=args.time_limit, calibration=calib_path,
                             calibration_method=chosen)
    plan = found.plan
    layers = LayerPrecisions.of(plan.layer_precisions)
    chosen_of = plan.layer_precisions[name]
    counts = {p: sum(1 for l in chosen_of.values() if l == p) for p in ("int8", "fp16", "fp32")}
    held = held_out(auto_app, layers, calib_path, judge_frames, chosen, score, fp32, "held_out")
    emit("auto_plan", method=chosen, memory_bytes=plan.memory_bytes, param_bytes=plan.param_bytes,
         buffer_bytes=plan.buffer_bytes, over_int8=plan.memory_bytes / int8_plan.memory_bytes,
         layers=counts, estimate_db=plan.sqnr_estimate_db[name],
         calib_reference_db=plan.sqnr_reference_db[name], margin_db=found._work.problem.margin,
         held_out_sqnr_db=held["sqnr_db"], **{f"held_out_{score_name}": held["score"]},
         seconds=round(time.perf_counter() - started, 1))

    found.write(work / "auto")
    dep = work / "dep"
    started = time.perf_counter()
    rc, _, line = explorer_line(["deploy", str(work / "auto" / "plan.json"), "--out", str(dep),
                                 "--calibration", str(calib_path), "--calibration-method", chosen])
    if rc != 0:
        emit("deploy", refused=True, exit=rc, line=line)
        return
    emit("deploy", refused=False, seconds=round(time.perf_counter() - started, 1))
    rc, out, line = explorer_line(["run", str(dep), "--frames", "8", "--json"])
    if rc not in (0, 4):
        emit("run", failed=True, exit=rc, line=line)
        return
    data = json.loads(out)
    emit("run", exit=rc, frames=data["frames"], arena_bytes=data["arena_bytes"],
         plan_buffer_bytes=data.get("plan_buffer_bytes"), plan_memory_bytes=data.get("plan_memory_bytes"),
         footprint_bytes=data.get("footprint_bytes"), breakdown=data.get("breakdown"),
         runtime_init_bytes=data.get("runtime_init_bytes"), verdict=data.get("verdict"))
    rc, out, line = explorer_line(["run", str(dep), "--input", str(judge_path), "--json",
                                   "--output", str(work / "held_out_out.npz")])
    if rc not in (0, 4):
        emit("run_held_out", failed=True, exit=rc, line=line)
        return
    data = json.loads(out)
    got = np.load(work / "held_out_out.npz")
    got = [[a] for a in got[got.files[0]]]
    emit("run_held_out", exit=rc, vs_fp32=data.get("vs_fp32"), verdict=data.get("verdict"),
         **{score_name: score(got, fp32["held_out"])})


def summary(lines: list[dict]) -> str:
    """Markdown tables of one case's JSON lines: the all-int8 references per method, the auto
    plan, the deployment."""
    by = {}
    for row in lines:
        by.setdefault(row["part"], []).append(row)
    if "auto_plan" not in by:
        return "(incomplete: no auto plan yet)"
    score = next(k.removeprefix("held_out_") for k in by["auto_plan"][0] if k.startswith("held_out_")
                 and k != "held_out_sqnr_db")
    int8 = by["int8_plan"][0]
    out = [f"all-int8 plan: {int8['memory_bytes']:,} B (params {int8['param_bytes']:,} + buffers "
           f"{int8['buffer_bytes']:,})", "",
           f"| all-int8 reference, method | SQNR calibration frames dB | SQNR held-out dB | held-out {score} |",
           "| --- | ---: | ---: | ---: |"]
    out += [f"| {r['method']} | {r['calib_sqnr_db']:.1f} | {r['held_out_sqnr_db']:.1f} | "
            f"{r[f'held_out_{score}']:.3f} |" for r in by.get("int8_reference", [])]
    a = by["auto_plan"][0]
    out += ["", "| auto plan | value |", "| --- | --- |",
            f"| method | {a['method']} ({by['method'][0]['rule']}) |",
            f"| memory | {a['memory_bytes']:,} B (params {a['param_bytes']:,} + buffers "
            f"{a['buffer_bytes']:,}), {a['over_int8']:.3f} x all-int8 |",
            "| layers int8 / fp16 / fp32 | " + " / ".join(str(a["layers"][p]) for p in ("int8", "fp16", "fp32")) + " |",
            f"| SQNR estimate / reference on calibration frames | {a['estimate_db']:.1f} / "
            f"{a['calib_reference_db']:.1f} dB (repair margin {a['margin_db']:.1f} dB) |",
            f"| reference on held-out frames | {a['held_out_sqnr_db']:.1f} dB, {score} {a[f'held_out_{score}']:.3f} |",
            f"| explore seconds (table included when measured) | {a['seconds']} |"]
    dep = by.get("deploy", [{}])[0]
    if dep.get("refused"):
        out += [f"| deploy | refused (exit {dep['exit']}): {dep['line']} |"]
    for r in by.get("run", []):
        if r.get("failed"):
            out += [f"| run | failed (exit {r['exit']}): {r['line']} |"]
            continue
        limit = 1.10 * r["plan_memory_bytes"] + 4 * 2 ** 20
        verdict = next(iter(r["verdict"].values()))
        out += [f"| run --frames 8: arena / plan buffers | {r['arena_bytes']:,} / {r['plan_buffer_bytes']:,} B |",
                f"| footprint / (1.10 x plan + 4 MiB) | {r['footprint_bytes']:,} / {limit:,.0f} B = "
                f"{r['footprint_bytes'] / limit:.2f} (breakdown {r['breakdown']}) |",
                f"| verdict | {verdict['verdict']} (max abs diff {verdict['max_abs_diff']}) |"]
    for r in by.get("run_held_out", []):
        if r.get("failed"):
            out += [f"| run --input held-out | failed (exit {r['exit']}): {r['line']} |"]
            continue
        dev = next(iter(r["vs_fp32"].values()))["outputs"][0]
        verdict = next(iter(r["verdict"].values()))["verdict"]
        out += [f"| run --input held-out: vs_fp32 SQNR, {score} of its outputs, verdict | "
                f"{dev['sqnr_db']:.1f} dB, {r[score]:.3f}, {verdict} |"]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=CASES)
    ap.add_argument("--size", type=int, default=640, help="the detector's input height and width")
    ap.add_argument("--calib", type=int, default=16, help="calibration frames")
    ap.add_argument("--held-out", type=int, help="held-out frames (default 8 detector, 64 classifiers)")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--min-sqnr", type=float, default=20.0)
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    ap.add_argument("--auto-method", choices=METHODS,
                    help="the auto plan's method, without the all-int8 references (--methods ignored)")
    ap.add_argument("--cache", type=Path, help="the sensitivity cache's folder (default: a new one)")
    ap.add_argument("--quick", action="store_true", help="320, 4 + 4 frames, minmax, 30 s searches")
    ap.add_argument("--summary", type=Path, help="print markdown tables of a run's JSON lines")
    ap.add_argument("--case", choices=CASES, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.summary:
        rows = [json.loads(l) for l in args.summary.read_text().splitlines() if l.startswith("{")]
        for name in dict.fromkeys(r["case"] for r in rows):
            print(f"### {name}\n\n" + summary([r for r in rows if r["case"] == name]) + "\n")
        return
    if args.quick:
        args.size, args.calib, args.held_out, args.methods, args.time_limit = 320, 4, 4, ["minmax"], 30.0
    if args.case:
        args.held_out = args.held_out or (8 if args.case == "detector" else 64)
        case(args.case, args)
        return
    cache = args.cache or Path(tempfile.mkdtemp(prefix="ppl_cache_"))
    env = dict(os.environ, MEMTRADE_CACHE=str(cache))
    forwarded = ["--size", str(args.size), "--calib", str(args.calib), "--time-limit", str(args.time_limit),
                 "--min-sqnr", str(args.min_sqnr), "--methods", *args.methods]
    if args.held_out:
        forwarded += ["--held-out", str(args.held_out)]
    if args.auto_method:
        forwarded += ["--auto-method", args.auto_method]
    for name in args.cases:
        started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
        print(json.dumps({"case": name, "part": "start", "utc": started,
                          "loadavg": Path("/proc/loadavg").read_text().split()[:3]}), flush=True)
        subprocess.run([sys.executable, __file__, "--case", name, *forwarded], env=env, check=True)
        print(json.dumps({"case": name, "part": "end", "utc": time.strftime("%H:%M:%S UTC", time.gmtime()),
                          "loadavg": Path("/proc/loadavg").read_text().split()[:3]}), flush=True)


if __name__ == "__main__":
    main()
