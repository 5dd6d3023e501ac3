"""Precision per layer on a text detector, the explore half: PP-OCRv4's detector
(ch_PP-OCRv4_det_infer.onnx) explored at the least memory (`--mem 0`) with `precision: auto`
and `min_sqnr_db`, against the same search at `precision: int8`, on rendered text frames
(benchmarks/int8_accuracy.py `render`: words on light backgrounds, PaddleOCR's
normalisation) as `--calibration`:

- the sensitivity table: seconds to measure it (2 rows per stored tensor, each one ONNX
  Runtime session over every frame) and to read it back from its cache;
- per plan: memory (bytes), layers per precision, the SQNR estimate (noise powers added,
  explorer/plan/sensitivity.py) and the SQNR measured on the plan's reference
  (deploy/checks/layer_reference.py) on the calibration frames;
- the all-int8 precisions' estimate and reference SQNR, and the auto plan's memory over the
  int8 plan's;
- on `--judge` other rendered frames (seed 2), for the auto plan's and the all-int8
  precisions' references: SQNR against fp32 and text-map IoU (pixels with probability > 0.3,
  PaddleOCR's DBPostProcess `thresh`, in both maps over all in either, all frames together),
  what a deployment computing as its reference would score.

No deployment: plans with a precision per layer are not deployed yet (docs/precision.md).

    python benchmarks/perlayer.py [--size 640] [--frames 4] [--min-sqnr 20] [--time-limit 90] [--cache DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

MODEL = Path("/work/models/ch_PP-OCRv4_det_infer.onnx")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", type=Path, default=MODEL)
    ap.add_argument("--size", type=int, default=640)
    ap.add_argument("--frames", type=int, default=4)
    ap.add_argument("--min-sqnr", type=float, default=20.0)
    ap.add_argument("--time-limit", type=float, default=90.0)
    ap.add_argument("--judge", type=int, default=4)
    ap.add_argument("--cache", type=Path, help="the sensitivity cache's folder (default: a new one)")
    args = ap.parse_args()

    import int8_accuracy
    import memtrade
    from explorer.app.layer_precision import LayerPrecisions, uniform
    from explorer.plan.sensitivity import estimate_db
    from memtrade.sensitivity import reference_sqnr, sensitivity_tables

    int8_accuracy.SIZE = args.size
    tmp = Path(tempfile.mkdtemp(prefix="perlayer_"))
    os.environ["MEMTRADE_CACHE"] = str(args.cache or tmp / "cache")
    frames = int8_accuracy.render(args.frames, seed=1)
    calib = tmp / "frames.npy"
    np.save(calib, frames.astype(np.float32))
    doc = {"name": "ocr", "platform": "jetson-tx2", "memory": 0,
           "cnns": [{"name": "det", "model": str(args.model),
                     "input_shape": [1, 3, args.size, args.size]}]}
    auto_app = memtrade.load_app(doc | {"precision": "auto", "min_sqnr_db": args.min_sqnr})

    started = time.perf_counter()
    tables = sensitivity_tables(auto_app, calib)
    measured_s = time.perf_counter() - started
    started = time.perf_counter()
    sensitivity_tables(auto_app, calib)
    cached_s = time.perf_counter() - started
    table = tables["det"]
    cnn = auto_app.cnns["det"]

    out = {"size": args.size, "frames": args.frames, "min_sqnr_db": args.min_sqnr,
           "stored_tensors": len(table.layers()), "table_s": round(measured_s, 1),
           "cached_s": round(cached_s, 3), "load": os.getloadavg()[0]}
    int8 = uniform(auto_app.cnns, "int8")
    fake = type("P", (), {"layer_precisions": int8.by_cnn()})
    out["all_int8"] = {"estimate_db": estimate_db(table, cnn, "det", int8),
                       "reference_db": reference_sqnr(auto_app, fake, calib)["det"]}

    for label, app, extra in (("int8", memtrade.load_app(doc | {"precision": "int8"}), {}),
                              ("auto", auto_app, {"calibration": calib})):
        started = time.perf_counter()
        found = memtrade.explore(app, time_limit=args.time_limit, **extra)
        plan = found.plan
        row = {"memory_bytes": plan.memory_bytes, "param_bytes": plan.param_bytes,
               "buffer_bytes": plan.buffer_bytes, "seconds": round(time.perf_counter() - started, 1)}
        if plan.layer_precisions:
            chosen = LayerPrecisions.of(plan.layer_precisions)
            row["layers"] = {p: sum(1 for l in cnn.order() if chosen.name("det", l) == p)
                             for p in ("int8", "fp16", "fp32")}
            row["estimate_db"] = plan.sqnr_estimate_db["det"]
            row["reference_db"] = plan.sqnr_reference_db["det"]
            row["margin_db"] = found._work.problem.margin
        out[label] = row
    out["auto_over_int8"] = out["auto"]["memory_bytes"] / out["int8"]["memory_bytes"]
    judge = [f for f in int8_accuracy.render(args.judge, seed=2).astype(np.float32)]
    for label, layers in (("auto", LayerPrecisions.of(plan.layer_precisions)), ("all_int8", int8)):
        found = held_out(auto_app, layers, calib, judge)
        out[label]["held_out"] = {"frames": found["frames"], "sqnr_db": found["sqnr_db"],
                                  "iou": found["score"]}
    print(json.dumps(out, indent=1))


def text_iou(got, want) -> float:
    """Text-map IoU of the first outputs `got` against `want` (per frame): pixels with
    probability > 0.3 in both over those in either, all frames together."""
    a = np.concatenate([g[0].ravel() for g in got]) > 0.3
    b = np.concatenate([w[0].ravel() for w in want]) > 0.3
    return float((a & b).sum() / max(1, (a | b).sum()))


def int8_scales(app, calib, method=None):
    """The int8 scales of the app's one CNN, calibrated by `method` on the frames in `calib`."""
    from deploy.quant import calibration as calibrate
    from memtrade.sensitivity import input_shape
    (name, cnn), = app.cnns.items()
    calib_frames, _ = calibrate.frames(calib, input_shape(cnn))
    return calibrate.activation_scales(cnn.source, cnn, calib_frames, name, method=method)


def held_out(app, layers, calib, frames, method=None, score=text_iou, fp32=None, key=None,
             scales=None) -> dict:
    """SQNR against fp32 and `score(got, fp32)` of the reference of `layers` on `frames`, for
    the app's one CNN, int8 scales `scales` or by `method` on the frames in `calib`; `fp32`,
    a dict, keeps the fp32 outputs under `key` for the next call with that key."""
    from deploy.checks.layer_reference import layer_reference
    from deploy.checks.sensitivity import outputs, sqnr_db
    from memtrade.sensitivity import outputs_of_source
    (name, cnn), = app.cnns.items()
    scales = scales or int8_scales(app, calib, method)
    got = outputs(layer_reference(cnn.source, cnn, name, layers, scales), frames)
    fp32 = {} if fp32 is None else fp32
    if key not in fp32:
        fp32[key] = outputs_of_source(cnn, frames)
    want = fp32[key]
    return {"frames": len(frames), "sqnr_db": sqnr_db(got, want), "score": score(got, want),
            "scales": scales}


if __name__ == "__main__":
    main()
