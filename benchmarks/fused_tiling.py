"""Fused tiling (MAFAT / DeepThings FTP) on YOLOv2-16 and MobileNetV2.

1. MAFAT's Algorithm 1 on YOLOv2-16 for every configuration of Algorithm 2's space (paper:
   5x5/8/2x2 predicted at 66 MB) and Table 1's Algorithm column, paper vs ours, for both loop
   orders and the weight-count variants (docs/tiling.md). `--predictor` stops here.
2. Per CNN, three searches with the same settings (NSGA-II, the app's default evaluator):
   row parts only, fused tiles only, both in one chromosome; whether the combined front
   weakly dominates each single-mode front (every point of it has a combined point with no
   more memory and no less predicted fps).
3. Plans at a few memory levels per mode (whole = reuse only; row parts; fused tiles): the
   least-memory plan of each front and its fastest plan under a few levels; each deployed
   and run on ONNX Runtime in its own process (fps, calls per frame, arena, peak RSS,
   largest output difference measured there); then for every row-parts plan the fastest
   measured fused-tiling plan of equal or lower memory and the fps ratio.

    PYTHONPATH=$PWD flock /tmp/memtrade-bench.lock python benchmarks/fused_tiling.py \
        [--predictor] [--cnns yolov2_16,mobilenet_v2] [--population 24 --generations 12]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import csdf.zoo as zoo  # noqa: E402
from csdf.onnx_import import load_onnx  # noqa: E402
from explorer import mafat  # noqa: E402

MB = 2 ** 20
TABLE1 = {256: "1x1/NoCut", 192: "1x1/NoCut", 128: "2x2/NoCut", 96: "2x2/12/2x2", 80: "3x3/8/2x2",
          64: "5x5/8/2x2", 48: "5x5/8/2x2", 32: "5x5/8/2x2", 16: "5x5/8/2x2"}
PAPER_5x5_8_2x2 = 66


def predictor_table() -> None:
    cnn = load_onnx(zoo.model_path("yolov2_16"), "yolov2_16")
    print("MAFAT Algorithm 1 on YOLOv2-16 (MB = 2^20 B, bias 31 MB, weights per network)")
    print(f"{'config':<12} {'predicted MB':>12}  largest tile-layer per group")
    for config in mafat.search_order():
        p = mafat.predict(cnn, config)
        where = "; ".join(f"{g.layer} tile {g.tile} {g.elements * 4 / MB:.1f} MB" for g in p.peaks)
        print(f"{str(config):<12} {p.bytes / MB:>12.1f}  {where}")
    p = mafat.predict(cnn, mafat.Config(5, 8, 2)).bytes / MB
    print(f"\n5x5/8/2x2: ours {p:.1f} MB, paper {PAPER_5x5_8_2x2} MB, ratio {p / PAPER_5x5_8_2x2:.3f}")
    print("\nTable 1, Algorithm column (MB limit: paper | ours by variant)")
    variants = [(w, o) for w in ("per-network", "once", "none") for o in ("published", "tiling-first")]
    print(f"{'MB':>4} {'paper':<11} " + " ".join(f"{w[:8] + '/' + o[:6]:<16}" for w, o in variants))
    got = {v: {mb: str(mafat.get_config(cnn, mb * MB, mafat.Options(weight_copies=v[0], order=v[1]))[0])
               for mb in TABLE1} for v in variants}
    for mb, paper in TABLE1.items():
        print(f"{mb:>4} {paper:<11} " + " ".join(f"{got[v][mb] + (' ' if got[v][mb] == paper else '*'):<16}"
                                                 for v in variants))
    print("(* differs from the paper)")


def search_fronts(app, settings):
    """The three single/combined searches: {mode: (evaluation, front)}."""
    from explorer.search import algorithm2
    from explorer.throughput import make_evaluator
    from explorer.tiling_genes import TiledEvaluation

    evaluator = make_evaluator(app)
    out = {}
    for mode in ("parts", "tiles", "both"):
        ev = TiledEvaluation(app, evaluator, mode, "binary")
        out[mode] = (ev, algorithm2(app, ev, settings).front)
    return out


def dominated_by(point, front, cnn) -> bool:
    return any(q.memory_bytes <= point.memory_bytes and q.fps[cnn] >= point.fps[cnn] * (1 - 1e-9)
               for q in front)


def picks(front, cnn, levels: int):
    """The least-memory point and the fastest point under a few memory levels."""
    front = sorted(front, key=lambda p: p.memory_bytes)
    chosen = [front[0]]
    lo, hi = front[0].memory_bytes, front[-1].memory_bytes
    for k in range(1, levels):
        cap = lo + (hi - lo) * k / (levels - 1)
        best = max((p for p in front if p.memory_bytes <= cap), key=lambda p: p.fps[cnn])
        if best not in chosen:
            chosen.append(best)
    return chosen


MEASURE = """
import json, sys
sys.path.insert(0, sys.argv[1])
from deploy.measure import measure
r = measure(sys.argv[2], frames=int(sys.argv[3]), warmup=1)
print(json.dumps({k: r.get(k) for k in ("fps", "calls_per_frame", "arena_bytes", "max_abs_diff",
                                         "peak_rss_bytes")}))
"""


def measure_plan(app, ev, point, work: Path, tag: str, frames: int) -> dict:
    """Deploy one plan and run it in a child process (its own peak RSS)."""
    from explorer.cli import main as cli
    from explorer.plan import to_json
    from explorer.tiling_genes import plan_tiled

    plan = plan_tiled(app, ev, point.genes, point.fps, True)
    to_json(plan, work / f"{tag}.json")
    if cli(["deploy", str(work / f"{tag}.json"), "--out", str(work / tag), "--force"]) != 0:
        raise RuntimeError(f"deploy of {tag} failed")
    done = subprocess.run([sys.executable, "-c", MEASURE, str(ROOT), str(work / tag), str(frames)],
                          capture_output=True, text=True, check=True)
    res = json.loads(done.stdout.strip().splitlines()[-1])
    res["plan_memory"] = plan.memory_bytes
    res["tilings"] = plan.tilings
    res["parts"] = sum(1 for ph in plan.phases.values() for n in ph.values() if n > 1)
    return res


def parts_note(res: dict) -> str:
    return f" ({res['parts']} layers by parts)" if res["parts"] else ""


def mode_table(name: str, population: int, generations: int, levels: int, frames: int) -> None:
    from dataclasses import replace

    from explorer.appfile import load_app

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "app.yaml").write_text(f"name: {name}\nplatform: jetson-tx2\nprecision: fp32\n"
                                       f"cnns:\n  - name: {name}\n    fps: 0\n    model: zoo:{name}\n")
        app = load_app(str(work / "app.yaml"), mem="0")
        settings = replace(app.search, population=population, generations=generations, seed=1,
                           granularity="binary")
        fronts = search_fronts(app, settings)
        print(f"\n== {name}: searches (population {population}, generations {generations}, seed 1, "
              "evaluator jetson-tx2 profile) ==")
        for mode, (_, front) in fronts.items():
            print(f"{mode:<6} front {len(front):>3} points, memory {front[0].memory_bytes / MB:8.2f} .. "
                  f"{front[-1].memory_bytes / MB:8.2f} MB")
        both = fronts["both"][1]
        for mode in ("parts", "tiles"):
            ok = sum(dominated_by(p, both, name) for p in fronts[mode][1])
            print(f"combined front weakly dominates {mode} front: {ok}/{len(fronts[mode][1])} points")
        rows = []
        ev_parts = fronts["parts"][0]
        whole = [p for p in fronts["parts"][1] if not any(p.genes)] or []
        cases = [("whole", ev_parts, whole[0] if whole else None)]
        if cases[0][2] is None:
            from explorer.pick import Point
            zeros = (0,) * len(ev_parts.labels)
            mem, f = ev_parts(zeros)
            cases[0] = ("whole", ev_parts, Point(zeros, mem, f))
        for mode in ("parts", "tiles", "both"):
            ev, front = fronts[mode]
            cases += [(mode, ev, p) for p in picks(front, name, levels)]
        print(f"\n{'mode':<6} {'plan MB':>9} {'pred fps':>9} {'meas fps':>9} {'calls':>7} "
              f"{'arena MB':>9} {'RSS MB':>8} {'max diff':>9}  groups")
        for k, (mode, ev, p) in enumerate(cases):
            res = measure_plan(app, ev, p, work, f"{mode}{k}", frames)
            res["mode"] = mode
            rows.append(res)
            groups = "; ".join(f"{g['layers'][0]}..{g['layers'][-1]} {g['grid'][0]}x{g['grid'][1]}"
                               for gs in res["tilings"].values() for g in gs)
            print(f"{mode:<6} {res['plan_memory'] / MB:>9.2f} {p.fps[name]:>9.1f} {res['fps'][name]:>9.2f} "
                  f"{res['calls_per_frame'][name]:>7} {res['arena_bytes'] / MB:>9.2f} "
                  f"{(res.get('peak_rss_bytes') or 0) / MB:>8.1f} {res['max_abs_diff'][name]:>9.2e}  "
                  f"{groups or '-'}{parts_note(res)}")
        print("\nrow parts vs the fastest measured fused-tiling plan of equal or lower memory:")
        tiles = [r for r in rows if r["mode"] == "tiles" or (r["mode"] == "both" and r["tilings"])]
        for r in (r for r in rows if r["mode"] == "parts"):
            under = [t for t in tiles if t["plan_memory"] <= r["plan_memory"]]
            if not under:
                print(f"  parts {r['plan_memory'] / MB:8.2f} MB {r['fps'][name]:8.2f} fps: no tiled plan that small")
                continue
            t = max(under, key=lambda t: t["fps"][name])
            print(f"  parts {r['plan_memory'] / MB:8.2f} MB {r['fps'][name]:8.2f} fps | tiles "
                  f"{t['plan_memory'] / MB:8.2f} MB {t['fps'][name]:8.2f} fps | ratio "
                  f"{t['fps'][name] / r['fps'][name]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--predictor", action="store_true", help="only the MAFAT predictor tables")
    parser.add_argument("--cnns", default="yolov2_16,mobilenet_v2")
    parser.add_argument("--population", type=int, default=24)
    parser.add_argument("--generations", type=int, default=12)
    parser.add_argument("--levels", type=int, default=3, help="plans per front (memory levels)")
    parser.add_argument("--frames", type=int, default=3, help="measured frames per plan")
    args = parser.parse_args()
    predictor_table()
    if args.predictor:
        return
    print("\n(the machine is shared: timings are indicative; one plan per child process)")
    for name in args.cnns.split(","):
        mode_table(name, args.population, args.generations, args.levels, args.frames)


if __name__ == "__main__":
    main()
