"""Table 13 of the paper (the methodology combined with quantization) and the motivational
example (Section 3, Table 7: MobileNetV2, --mem 8MB --fps 71; paper: half precision is the
only one that meets both, 7.96 MB at 71 fps).

For every Table 13 application and precision (fp32 "none", fp16 "half", mixed, int8) the
app is searched once with its own settings, then Algorithm 2's early exit and pick decide
under the app's constraints. The paper publishes Table 13's requirements only (see
../shared/paper/table13.yaml), so those are printed with ours; Table 7 has figures.

    .venv/bin/python benchmarks/table13.py [--precisions fp32,fp16] [--population N] [--generations N]
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from explorer.app.appfile import load_app  # noqa: E402
from table12 import SHARED, choose, search_once  # noqa: E402

MB = 2 ** 20
APPS = {"MobileNet-sequential": "table13_mobilenet_sequential",
        "ResNet-sequential": "table13_resnet_sequential",
        "MobileNet-pipelined": "table13_mobilenet_pipelined",
        "Multi-CNN": "table13_multi_cnn"}
QUANT = {"fp32": "none", "fp16": "half", "mixed": "mixed", "int8": "int"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--precisions", default="fp32,fp16,mixed,int8")
    parser.add_argument("--apps", default=",".join(APPS))
    parser.add_argument("--population", type=int)
    parser.add_argument("--generations", type=int)
    args = parser.parse_args()
    paper13 = yaml.safe_load((SHARED / "table13.yaml").read_text())["apps"]
    table7 = yaml.safe_load((SHARED / "motivation.yaml").read_text())["table7_plus_methodology"]
    searched: dict[tuple[str, str], tuple] = {}

    def run(app_key: str, precision: str, mem: int, fps: float | None):
        app = load_app(ROOT / "apps" / f"{APPS[app_key]}.yaml", precision=precision)
        s = app.search
        for key in ("population", "generations"):
            if getattr(args, key) is not None:
                s = replace(s, **{key: getattr(args, key)})
        if (app_key, precision) not in searched:
            searched[(app_key, precision)] = search_once(app, s)
        reuse, result, seconds = searched[(app_key, precision)]
        need = dict(app.fps) if fps is None else {c: fps for c in app.cnns}
        point, met, early = choose(reuse, result, mem, need)
        return app, point, met, early, seconds

    precisions = args.precisions.split(",")
    print("Table 13: requirement, and our chosen plan per precision (fps predicted by the "
          "jetson-tx2 profile)")
    print(f"{'app':<22} {'prec':<6} {'req MB':>6} {'req fps':>7} {'ours MB':>8}  "
          f"{'ours fps':<32} {'met':<4} {'search':>10}")
    for key in args.apps.split(","):
        req = paper13[key]
        for prec in precisions:
            app, point, met, early, secs = run(key, prec, int(req["memory_mb"] * MB), None)
            fps = ", ".join(f"{c} {point.fps.get(c, 0):.1f}" for c in app.cnns)
            print(f"{key:<22} {prec:<6} {req['memory_mb']:>6} {req['fps']:>7} "
                  f"{point.memory_bytes / MB:8.2f}  {fps:<32} {'yes' if met else 'no':<4} "
                  f"{'early exit' if early else f'{secs:.0f} s':>10}", flush=True)
    print()
    print("Table 7 (motivational example): MobileNetV2, --mem 8MB --fps 71")
    print(f"{'prec':<6} {'paper MB':>8} {'ours MB':>8} {'ratio':>6}  {'paper fps':>9} "
          f"{'ours fps':>8} {'met':<4}")
    for prec in precisions:
        ref = table7[QUANT[prec]]
        app, point, met, early, secs = run("MobileNet-sequential", prec, 8 * MB, 71.0)
        ours = point.memory_bytes / MB
        fps = point.fps.get("mobilenet_v2", 0.0)
        print(f"{prec:<6} {ref['M']:8.2f} {ours:8.2f} {ours / ref['M']:6.3f}  "
              f"{ref.get('T', '-'):>9} {fps:8.1f} {'yes' if met else 'no':<4}", flush=True)


if __name__ == "__main__":
    main()
