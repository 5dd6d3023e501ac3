"""What int8 costs a text detector, per calibration: PP-OCRv4's detector (DBNet,
ch_PP-OCRv4_det_infer.onnx from the rapidocr-onnxruntime 1.4.4 wheel) deployed at int8 with
scales from each of ONNX Runtime's calibrators (minmax, entropy, percentile:
deploy/quant/methods.py) on 8 rendered text frames, and without --calibration (MinMax on 16
generated standard-normal frames), each judged on other rendered frames against plain ONNX
Runtime fp32 on the original model:

- text-map IoU: pixels with probability > 0.3 (PaddleOCR's DBPostProcess `thresh`) in the
  int8 deployment's map and in fp32's, |both| / |either| over all judged frames (and the
  least of the frames);
- SQNR of the probability map, 10 log10(sum fp32^2 / sum (int8 - fp32)^2), over all frames;
- the run's own `vs_fp32` SQNR on the same frames (memtrade.run --input), which must agree;
- the same figures for the deployment's int8 reference (deploy/checks/quantized.py: the model
  quantized with the deployment's scales and weights, run by plain ONNX Runtime with its
  QLinear kernels), what ONNX Runtime's own int8 network of those scales achieves;
- the largest probability the int8 output tensor can hold, (255 - zero point) x scale: below
  the 0.3 threshold no pixel can be text;
- the deploy's seconds and its process's peak RSS (ONNX Runtime's histogram calibrators hold
  every calibrated tensor of every frame at once).

Frames are rendered with Pillow: black or near-black words in DejaVu/Liberation fonts of
several sizes on light backgrounds, normalised as PaddleOCR does ((x / 255 - 0.5) / 0.5, RGB,
CHW). Each case runs in its own process (deploy, run, compare), one after another.

    python benchmarks/int8_accuracy.py [--model PATH] [--calib 8] [--judge 6] [--cases none minmax entropy percentile]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

MODEL = Path("/work/models/ch_PP-OCRv4_det_infer.onnx")
SIZE = 640
THRESH = 0.3
CASES = ("none", "minmax", "entropy", "percentile")
WORDS = ("memory", "throughput", "dataflow", "invoice", "total", "2026", "receipt", "OCR",
         "Delft", "edge", "device", "arena", "schedule", "NSGA-II", "text", "price 12.50",
         "Leiden", "quantized", "frame", "detector")
FONTS = sorted(Path("/usr/share/fonts/truetype").rglob("*.ttf"))


def render(count: int, seed: int) -> np.ndarray:
    """`count` frames [F, 1, 3, SIZE, SIZE], normalised as PaddleOCR's detector expects."""
    from PIL import Image, ImageDraw, ImageFont
    rng = np.random.default_rng(seed)
    fonts = [f for f in FONTS if "Sans" in f.name or "Serif" in f.name] or FONTS
    out = []
    for _ in range(count):
        bg = tuple(int(v) for v in rng.integers(200, 256, 3))
        img = Image.new("RGB", (SIZE, SIZE), bg)
        draw = ImageDraw.Draw(img)
        for _ in range(int(rng.integers(5, 11))):
            size = int(rng.integers(18, 64))
            font = (ImageFont.truetype(str(fonts[int(rng.integers(len(fonts)))]), size) if fonts
                    else ImageFont.load_default(size))
            text = " ".join(rng.choice(WORDS, int(rng.integers(1, 4))))
            x, y = int(rng.integers(0, SIZE // 2)), int(rng.integers(0, SIZE - size))
            ink = tuple(int(v) for v in rng.integers(0, 60, 3))
            draw.text((x, y), text, fill=ink, font=font)
        x = np.asarray(img, np.float32) / 255.0
        out.append(((x - 0.5) / 0.5).transpose(2, 0, 1)[None])
    return np.stack(out).astype(np.float32)


def plain_maps(model: Path, frames: np.ndarray) -> np.ndarray:
    """The probability maps of a plain ONNX Runtime session on `model`."""
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    return np.stack([sess.run(None, {name: f})[0] for f in frames])


def case(name: str, plan: Path, calib: Path, judge: Path, model: Path, out: Path) -> None:
    """One case in this process: deploy, run on the judged frames, compare with fp32."""
    import resource

    import memtrade
    from deploy.runtime import manifest as mf
    frames = np.load(judge)
    with tempfile.TemporaryDirectory(prefix="int8_accuracy_") as tmp:
        dep = Path(tmp) / "dep"
        start = time.perf_counter()
        memtrade.deploy(str(plan), dep, calibration=None if name == "none" else calib,
                        calibration_method=None if name == "none" else name)
        deploy_s = time.perf_counter() - start
        deploy_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        res = memtrade.run(dep, inputs=frames, threads=0)
        manifest = mf.load(dep)
        out_scale = manifest.quantization.of("det", manifest.cnns["det"].outputs[0].layer)
        qdq = plain_maps(dep / manifest.cnns["det"].reference, frames).astype(np.float64)
    got = np.stack([outs[0] for outs in res.outputs["det"]]).astype(np.float64)
    want = plain_maps(model, frames).astype(np.float64).reshape(got.shape)
    a, b = got > THRESH, want > THRESH
    per_frame = [float((x & y).sum() / max((x | y).sum(), 1)) for x, y in zip(a, b)]
    dev = res.vs_fp32["det"].outputs[0]
    qdq = qdq.reshape(got.shape)
    q = qdq > THRESH
    record = {"case": name, "iou": float((a & b).sum() / max((a | b).sum(), 1)),
              "iou_min": min(per_frame), "text_px_int8": int(a.sum()), "text_px_fp32": int(b.sum()),
              "sqnr_db": float(10 * np.log10(np.sum(want ** 2) / np.sum((got - want) ** 2))),
              "run_sqnr_db": dev.sqnr_db, "run_cosine": dev.cosine,
              "scales_from": res.calibration["det"].words(),
              "deploy_s": deploy_s, "deploy_peak_rss_mib": deploy_rss / 2 ** 20,
              "output_high": (255 - out_scale.zero_point) * out_scale.scale,
              "ref_sqnr_db": float(10 * np.log10(np.sum(want ** 2) / np.sum((qdq - want) ** 2))),
              "ref_iou": float((q & b).sum() / max((q | b).sum(), 1))}
    out.write_text(json.dumps(record))


def make_plan(model: Path, out: Path) -> Path:
    import memtrade
    app = memtrade.load_app({"name": "ppocr-det", "platform": "jetson-tx2", "precision": "int8",
                             "memory": "1GB", "cnns": [{"name": "det", "model": str(model),
                                                        "input_shape": [1, 3, SIZE, SIZE], "fps": 1}]})
    found = memtrade.explore(app)
    found.write(out)
    return out / "plan.json"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", type=Path, default=MODEL)
    ap.add_argument("--calib", type=int, default=8)
    ap.add_argument("--judge", type=int, default=6)
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=CASES)
    ap.add_argument("--case", help=argparse.SUPPRESS)
    ap.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.case:
        w = args.work
        case(args.case, w / "plan.json", w / "calib.npy", w / "judge.npy", args.model,
             w / f"{args.case}.json")
        return
    with tempfile.TemporaryDirectory(prefix="int8_accuracy_") as tmp:
        work = Path(tmp)
        np.save(work / "calib.npy", render(args.calib, seed=1))
        np.save(work / "judge.npy", render(args.judge, seed=2))
        make_plan(args.model, work / "plan")
        (work / "plan.json").write_bytes((work / "plan" / "plan.json").read_bytes())
        print("| case | scales from | text px int8 / fp32 | IoU (least frame) | SQNR dB | "
              "run's vs_fp32 SQNR dB, cosine | int8 reference: SQNR dB, IoU | output's int8 top | "
              "deploy s | deploy peak RSS MiB | load |")
        print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
        for name in args.cases:
            subprocess.run([sys.executable, __file__, "--case", name, "--work", str(work),
                            "--model", str(args.model)], check=True)
            r = json.loads((work / f"{name}.json").read_text())
            load = Path("/proc/loadavg").read_text().split()[0]
            print(f"| {name} | {r['scales_from']} | {r['text_px_int8']} / {r['text_px_fp32']} | "
                  f"{r['iou']:.2f} ({r['iou_min']:.2f}) | {r['sqnr_db']:.1f} | "
                  f"{r['run_sqnr_db']:.1f}, {r['run_cosine']:.3f} | {r['ref_sqnr_db']:.1f}, {r['ref_iou']:.2f} | "
                  f"{r['output_high']:.3f} | {r['deploy_s']:.0f} | "
                  f"{r['deploy_peak_rss_mib']:.0f} | {load} |", flush=True)


if __name__ == "__main__":
    main()
