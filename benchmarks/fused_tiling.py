"""Fused tiling (MAFAT / DeepThings FTP) on YOLOv2-16 and MobileNetV2.

1. MAFAT's Algorithm 1 on YOLOv2-16 for every configuration of Algorithm 2's space (paper:
   5x5/8/2x2 predicted at 66 MB) and Table 1's Algorithm column, paper vs ours, for both loop
   orders and the weight-count variants (docs/tiling.md). `--predictor` stops here.
2. Per CNN, three searches with the same settings (NSGA-II; evaluator: --profile, a measured
   profile of this machine written by `explore profile`, or the jetson-tx2 roofline): row
   parts only, fused tiles only, then both in one chromosome seeded with the two fronts
   (explorer/tiling/search.py); how many points of each single-mode front the combined front
   weakly dominates (no more memory, no less predicted fps).
3. Plans at a few memory levels per mode (whole = reuse only; fused tiles; both; row parts:
   the front's picks and its predicted-fastest plan within each tiled plan's memory), each
   deployed once, then measured on ONNX Runtime in interleaved rounds (every plan once per
   round, each run in its own process: fps, calls per frame, arena, peak RSS, largest output
   difference in the first round); medians over rounds. Then, at each tiled plan's memory,
   the fastest measured row-parts plan within that memory and the ratio; and for each
   row-parts plan, the fastest measured tiled plan of equal or lower memory.

    PYTHONPATH=$PWD explore profile APP.yaml --threads 1 --out prof.yaml   # APP: zoo:yolov2_16
    PYTHONPATH=$PWD flock /tmp/memtrade-heavy.lock python benchmarks/fused_tiling.py \
        [--predictor] [--cnns yolov2_16,mobilenet_v2] [--population 24 --generations 12] \
        [--profile prof.yaml --threads 1 --rounds 3 --frames 3]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import csdf.zoo as zoo  # noqa: E402
from csdf.onnx_import import load_onnx  # noqa: E402
from explorer.tiling import mafat  # noqa: E402

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


def search_fronts(app, settings, profile: str | None):
    """The three searches (explorer/tiling/search.py: row parts, fused tiles, then both seeded
    with their fronts): {mode: ModeSearch}."""
    from explorer.throughput.evaluator import make_evaluator
    from explorer.tiling.search import search_modes

    return search_modes(app, make_evaluator(app, profile), settings, "binary")


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


def fastest_under(front, cap: int, cnn):
    """The front's predicted-fastest point of memory <= cap (None when none is that small)."""
    under = [p for p in front if p.memory_bytes <= cap]
    return max(under, key=lambda p: p.fps[cnn]) if under else None


MEASURE = """
import json, sys
sys.path.insert(0, sys.argv[1])
from deploy.run.measure import measure
r = measure(sys.argv[2], frames=int(sys.argv[3]), warmup=2, threads=int(sys.argv[4]),
            layout=sys.argv[5], check=sys.argv[6] == "1")
print(json.dumps({k: r.get(k) for k in ("fps", "calls_per_frame", "arena_bytes", "max_abs_diff",
                                         "peak_rss_bytes")}))
"""


def deploy_plan(app, ev, point, work: Path, tag: str) -> dict:
    """Write and deploy one plan; its figures (memory, groups, layers by parts)."""
    from explorer.cli.main import main as cli
    from explorer.plan.model import to_json
    from explorer.tiling.genes import plan_tiled

    plan = plan_tiled(app, ev, point.genes, point.fps, True)
    to_json(plan, work / f"{tag}.json")
    if cli(["deploy", str(work / f"{tag}.json"), "--out", str(work / tag), "--force"]) != 0:
        raise RuntimeError(f"deploy of {tag} failed")
    return {"dir": work / tag, "plan_memory": plan.memory_bytes, "tilings": plan.tilings,
            "parts": sum(1 for ph in plan.phases.values() for n in ph.values() if n > 1),
            "predicted": point.fps, "fps_rounds": []}


def measure_once(res: dict, frames: int, threads: int, layout: str, check: bool) -> None:
    """One child process: deploy/run/measure.py on the deployment; its fps joins the rounds."""
    done = subprocess.run([sys.executable, "-c", MEASURE, str(ROOT), str(res["dir"]), str(frames),
                           str(threads), layout, "1" if check else "0"],
                          capture_output=True, text=True, check=True)
    out = json.loads(done.stdout.strip().splitlines()[-1])
    res["fps_rounds"].append(out["fps"])
    if check:
        res.update({k: out[k] for k in ("calls_per_frame", "arena_bytes", "max_abs_diff",
                                        "peak_rss_bytes")})


def median_fps(res: dict, cnn: str) -> float:
    return float(statistics.median(r[cnn] for r in res["fps_rounds"]))


def parts_note(res: dict) -> str:
    return f" ({res['parts']} layers by parts)" if res["parts"] else ""


def load_avg() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def mode_table(name: str, args) -> None:
    from dataclasses import replace

    from explorer.app.appfile import load_app
    from explorer.search.pick import Point
    from explorer.tiling.search import dominated_count

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "app.yaml").write_text(f"name: {name}\nplatform: jetson-tx2\nprecision: fp32\n"
                                       f"cnns:\n  - name: {name}\n    fps: 0\n    model: zoo:{name}\n")
        app = load_app(str(work / "app.yaml"), mem="0")
        settings = replace(app.search, population=args.population, generations=args.generations,
                           seed=1, granularity="binary")
        fronts = search_fronts(app, settings, args.profile)
        print(f"\n== {name}: searches (population {args.population}, generations "
              f"{args.generations}, seed 1, evaluator {args.profile or 'jetson-tx2'}) ==")
        for mode, ms in fronts.items():
            f = ms.front
            print(f"{mode:<6} front {len(f):>3} points, memory {f[0].memory_bytes / MB:8.2f} .. "
                  f"{f[-1].memory_bytes / MB:8.2f} MB, {ms.outcome.result.unique} chromosomes evaluated")
        both = fronts["both"].front
        for mode in ("parts", "tiles"):
            single = fronts[mode].front
            print(f"combined front weakly dominates {mode} front: "
                  f"{dominated_count(single, both, [name])}/{len(single)} points")
        ev_parts = fronts["parts"].evaluation
        zeros = (0,) * len(ev_parts.labels)
        mem, f = ev_parts(zeros)
        cases = [("whole", ev_parts, Point(zeros, mem, f))]
        for mode in ("tiles", "both"):
            cases += [(mode, fronts[mode].evaluation, p) for p in picks(fronts[mode].front, name, args.levels)]
        # row parts: the front's picks, and its predicted-fastest plan within each tiled plan's memory
        parts = picks(fronts["parts"].front, name, args.levels)
        for _, _, p in cases[1:]:
            q = fastest_under(fronts["parts"].front, p.memory_bytes, name)
            if q is not None and q not in parts:
                parts.append(q)
        cases += [("parts", ev_parts, p) for p in parts]
        rows = []
        for k, (mode, ev, p) in enumerate(cases):
            res = deploy_plan(app, ev, p, work, f"{mode}{k}")
            res["mode"] = mode
            rows.append(res)
        print(f"\nmeasuring {len(rows)} plans: {args.rounds} interleaved rounds x {args.frames} frames, "
              f"each plan in its own process per round, ORT threads {args.threads}, layout "
              f"{args.layout}; load average before: {load_avg()}", flush=True)
        for r in range(args.rounds):
            for res in rows:
                measure_once(res, args.frames, args.threads, args.layout, check=(r == 0))
        print(f"load average after: {load_avg()}")
        print(f"\n{'mode':<6} {'plan MB':>9} {'pred fps':>9} {'meas fps':>9} {'min..max':>13} {'calls':>7} "
              f"{'arena MB':>9} {'RSS MB':>8} {'max diff':>9}  groups")
        for res in sorted(rows, key=lambda r: (r["mode"], r["plan_memory"])):
            groups = "; ".join(f"{g.layers[0]}..{g.layers[-1]} {g.n}x{g.m}"
                               for gs in res["tilings"].values() for g in gs)
            vals = [r[name] for r in res["fps_rounds"]]
            res["fps"] = median_fps(res, name)
            print(f"{res['mode']:<6} {res['plan_memory'] / MB:>9.2f} {res['predicted'][name]:>9.2f} "
                  f"{res['fps']:>9.2f} {min(vals):>6.2f}..{max(vals):<6.2f} "
                  f"{res['calls_per_frame'][name]:>7} {res['arena_bytes'] / MB:>9.2f} "
                  f"{(res.get('peak_rss_bytes') or 0) / MB:>8.1f} {res['max_abs_diff'][name]:>9.2e}  "
                  f"{groups or '-'}{parts_note(res)}")
        row_parts = [r for r in rows if r["mode"] in ("parts", "whole")]
        tiled = [r for r in rows if r["tilings"]]
        print("\nat each tiled plan's memory M: the fastest measured row-parts plan (whole included) "
              "of memory <= M, and the ratio (tiles / parts, median fps):")
        _best_under(tiled, row_parts, "tiles", "row-parts")
        print("for each row-parts plan: the fastest measured tiled plan of memory <= its memory:")
        _best_under(row_parts, tiled, "parts", "tiled")


def _best_under(plans: list[dict], others: list[dict], mode: str, other: str) -> None:
    """For each plan, the fastest of `others` of no more memory, and the tiles / parts ratio."""
    for a in sorted(plans, key=lambda r: r["plan_memory"]):
        under = [b for b in others if b["plan_memory"] <= a["plan_memory"]]
        if not under:
            print(f"  {mode} {a['plan_memory'] / MB:8.2f} MB {a['fps']:7.2f} fps: no {other} plan that small")
            continue
        b = max(under, key=lambda r: r["fps"])
        tiles, parts = (a, b) if mode == "tiles" else (b, a)
        print(f"  {mode} {a['plan_memory'] / MB:8.2f} MB {a['fps']:7.2f} fps | {'parts' if mode == 'tiles' else 'tiles'} "
              f"{b['plan_memory'] / MB:8.2f} MB {b['fps']:7.2f} fps | ratio {tiles['fps'] / parts['fps']:.2f}")

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--predictor", action="store_true", help="only the MAFAT predictor tables")
    parser.add_argument("--cnns", default="yolov2_16,mobilenet_v2")
    parser.add_argument("--population", type=int, default=24)
    parser.add_argument("--generations", type=int, default=12)
    parser.add_argument("--levels", type=int, default=3, help="plans per front (memory levels)")
    parser.add_argument("--frames", type=int, default=3, help="measured frames per plan and round")
    parser.add_argument("--rounds", type=int, default=3,
                        help="interleaved measuring rounds (each plan once per round; median)")
    parser.add_argument("--profile", default=None,
                        help="evaluator of the searches: a measured profile file from `explore "
                             "profile APP --threads N` (same N as --threads), default jetson-tx2")
    parser.add_argument("--threads", type=int, default=1, help="ONNX Runtime intra-op threads")
    parser.add_argument("--layout", default="blocked", help="as `explore run --layout`")
    args = parser.parse_args()
    predictor_table()
    if args.predictor:
        return
    print("\n(the machine is shared: timings are indicative; one plan per child process)")
    for name in args.cnns.split(","):
        mode_table(name, args)


if __name__ == "__main__":
    main()
