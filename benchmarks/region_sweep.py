"""Every layer by parts, deployed as region steps, one frame against ONNX Runtime on the
original model: the least-memory end of every network, where bands, merged
firings and row-blocked bands (deploy/build/regions.py, deploy/ort/blocked_regions.py) meet
the most layer kinds. Prints steps / firings, the largest difference against the reference,
whether the arena is the plan's buffers, and PASS / FAIL (explore run's fp32 tolerance).

    python benchmarks/region_sweep.py [zoo names or ONNX paths ...] [--threads 1]

Default: the zoo's MobileNetV2, EfficientNet-B0, Inception V2, ResNet-50, DenseNet-121 and
YOLOv2-16; add torchvision exports (benchmarks/export_torchvision.py) by path.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from deploy.build.derive import derive as deploy_plan  # noqa: E402
from deploy.run.measure import measure  # noqa: E402
from deploy.run.verdict import RTOL  # noqa: E402
from explorer.app.appfile import load_app  # noqa: E402
from explorer.plan.derive import derive, plan_for, uniform_phases  # noqa: E402

DEFAULT = "mobilenet_v2 efficientnet_b0 inception_v2 resnet50 densenet121 yolov2_16"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=DEFAULT.split())
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    print("| network | steps | firings | max abs diff | of outputs up to | arena = plan | verdict |")
    print("| --- | ---: | ---: | ---: | ---: | --- | --- |")
    for name in args.models:
        start = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            model = name if name.endswith(".onnx") else f"zoo:{name}"
            (folder / "app.yaml").write_text(f"name: sweep\ncnns:\n  - {{name: net, model: '{model}'}}\n")
            app = load_app(folder / "app.yaml")
            plan = plan_for(app, derive(app, uniform_phases(app, True)), {}, True)
            manifest = deploy_plan(plan, app.cnns, folder / "dep", regions=True)
            steps = [s for _, _, s in manifest.steps()]
            firings = sum(len(s.region or [s]) for s in steps)
            result = measure(folder / "dep", frames=1, threads=args.threads, shared_pool=True,
                             layout="blocked")
            diff, size = result["max_abs_diff"]["net"], result["max_abs_output"]["net"]
            ok = diff <= RTOL["float32"] * size
            print(f"| {Path(name).stem} | {len(steps)} | {firings} | {diff:.2e} | {size:.3g} | "
                  f"{result['arena_bytes'] == plan.buffer_bytes} | {'PASS' if ok else 'FAIL'} "
                  f"({time.perf_counter() - start:.0f} s) |", flush=True)


if __name__ == "__main__":
    main()
