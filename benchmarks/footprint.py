"""Plan memory against the process's real footprint, and fps, for plain ONNX Runtime on the
original model, the reuse-only plan and the least-memory plan.

    python benchmarks/footprint.py [--models mobilenet_v2,resnet50,vgg11] [--frames 20]
                                   [--threads 1] [--rounds 1] [--repeats 2]

Both footprints are read after ONNX Runtime's one-time initialisation (8.0 MiB, the same
for every model; reported as runtime_init_bytes) and the imports.

For every model: `explore profile` measures each layer's time and workspace on this machine;
`explore APP --evaluator PROFILE --mem 1GB` gives the reuse-only plan and `--mem 0` the
least-memory plan (their memory counts that workspace, explorer/throughput/runtime_costs.py); `explore deploy`
builds both. Each run is its own process (`--child`): the footprint is the peak RSS minus
the RSS after imports, before anything of the model is loaded (deploy/runtime/footprint.py), for
the plain session exactly as for the deployments. vgg11 is a VGG-11 (configuration A of
Simonyan and Zisserman, 132.9M parameters, fc6 alone 411 MB) built here with the zoo's
builder helpers and seeded random weights: the weight-heavy case.

Target: footprint <= 1.25 x plan memory + 8 MiB for every deployed case, and for
MobileNetV2 and ResNet-50 below the plain session's footprint; reuse-only fps >= 0.9x plain.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
MiB = 2 ** 20
VGG11 = [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"]


def vgg11(seed: int = 0):
    """VGG-11 at 224x224: 8 convs 3x3 (bias, ReLU), 5 max pools, fc6/fc7 4096 (ReLU), fc8."""
    import numpy as np

    from csdf.zoo import builder as b
    net, x = b.new_net("vgg11", seed)
    conv = pool = 0
    for v in VGG11:
        if v == "M":
            pool += 1
            x = b.maxpool(net, x, 2, 2, 0, f"pool{pool}")
        else:
            conv += 1
            x = b.relu(net, b.conv(net, x, v, 3, f"conv{conv}", bias=True), f"relu{conv}")
    n, c, h, w = net.shapes[x]
    x = b._node(net, "Flatten", [x], "flatten", [n, c * h * w], axis=1)
    for i, width in ((6, 4096), (7, 4096), (8, 1000)):
        fan_in = net.shapes[x][1]
        wt = b._init(net, f"fc{i}.weight",
                     net.rng.standard_normal((width, fan_in)).astype(np.float32) * np.sqrt(2.0 / fan_in))
        bias = b._init(net, f"fc{i}.bias", np.zeros(width, np.float32))
        x = b._node(net, "Gemm", [x, wt, bias], f"fc{i}", [n, width], transB=1)
        if i < 8:
            x = b._node(net, "Relu", [x], f"fc{i}.relu", [n, width])
    b._node(net, "Softmax", [x], b.OUTPUT, [n, 1000], axis=1)
    return b.to_model(net)


def model_path(name: str, folder: Path) -> Path:
    if name == "vgg11":
        import onnx
        path = folder / "vgg11.onnx"
        if not path.exists():
            onnx.save(vgg11(), str(path))
        return path
    from csdf import zoo
    return Path(zoo.model_path(name))


def write_app(path: Path, app: str, name: str, model: Path) -> Path:
    """A one-CNN app file (fp32, no throughput constraint) for model `model` named `name`."""
    path.write_text(f"name: {app}\nplatform: jetson-tx2\nprecision: fp32\n"
                    f"cnns:\n  - name: {name}\n    model: {model}\n    fps: 0\n")
    return path


def explore_app(args: list[str]) -> int:
    from explorer.cli.main import main as explore
    with contextlib.redirect_stdout(io.StringIO()):
        return explore(args)


def prepare(name: str, folder: Path, repeats: int, threads: int) -> dict:
    """Profile, the two plans and their deployments of one model; paths and plan figures."""
    model = model_path(name, folder)
    app = write_app(folder / f"{name}.yaml", f"footprint-{name}", name, model)
    prof = folder / f"{name}-profile.yaml"
    start = time.perf_counter()
    if explore_app(["profile", str(app), "--out", str(prof), "--repeats", str(repeats),
                 "--threads", str(threads), "--force"]) != 0:
        raise SystemExit(f"explore profile {app} failed")
    out = {"model": str(model), "profile_s": time.perf_counter() - start, "plans": {}}
    for mem, label in (("1GB", "reuse-only plan"), ("0", "least-memory plan")):
        run = folder / f"{name}-explore-{mem}"
        status = explore_app([str(app), "--evaluator", str(prof), "--mem", mem, "--out", str(run),
                           "--quiet", "--force"])
        if status not in (0, 3):
            raise SystemExit(f"explore {app} --mem {mem}: exit {status}")
        plan = json.loads((run / "plan.json").read_text())
        dep = folder / f"{name}-deploy-{mem}"
        if explore_app(["deploy", str(run / "plan.json"), "--out", str(dep), "--force"]) != 0:
            raise SystemExit(f"explore deploy {run / 'plan.json'} failed")
        out["plans"][label] = {"dir": str(dep), "memory_bytes": plan["memory_bytes"],
                               "param_bytes": plan["param_bytes"],
                               "buffer_bytes": plan["buffer_bytes"],
                               "workspace_bytes": plan.get("workspace_bytes", 0)}
    return out


def child(args) -> None:
    """One measurement in this process: prints a JSON line."""
    import numpy as np  # noqa: F401  (imported before the baseline)

    from deploy.ort import backend as backend_ort, blocked as ort_blocked  # noqa: F401  (imports first)
    from deploy.ort.process import init_runtime
    from deploy.checks import reference
    from deploy.runtime.footprint import Footprint
    if args.child == "plain":
        data = reference.plain_frames(args.path, args.frames)    # before the baseline, as measure's
        fp = Footprint()
        fp.start(lambda: init_runtime(args.threads))
        sess = reference.session(args.path, args.threads)
        fp.loaded()
        fps = reference.plain_timings(sess, args.frames, data=data, after_run=fp.ran)["fps"]
        print(json.dumps({"fps": fps, **fp.report()}))
        return
    from deploy.run.measure import measure
    res = measure(args.path, frames=args.frames, threads=args.threads, check=False,
                  shared_pool=True, layout="blocked")
    cnn = next(iter(res["fps"]))
    res["fps"] = res["fps"][cnn]
    print(json.dumps(res))


def run_child(kind: str, path: str, frames: int, threads: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", kind, "--path", path,
                          "--frames", str(frames), "--threads", str(threads)],
                         check=True, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mobilenet_v2,resnet50,vgg11")
    parser.add_argument("--frames", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=1, help="interleaved rounds (fps medians)")
    parser.add_argument("--repeats", type=int, default=2, help="explore profile --repeats")
    parser.add_argument("--child", default=None)
    parser.add_argument("--path", default=None)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    import numpy as np
    print(f"footprint = peak RSS - RSS after imports, each run its own process; "
          f"{args.frames} frames, threads={args.threads}, {args.rounds} round(s)")
    header = (f"{'case':34} {'plan MiB':>9} {'footprint':>10} {'limit':>7} {'ok':>3} "
              f"{'fps':>7} {'x plain':>7}  breakdown MiB (weights arena workspace sessions+other "
              f"load-excess)")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            info = prepare(name, Path(tmp), args.repeats, args.threads)
            runs = [("plain ORT session", "plain", info["model"], None)]
            runs += [(label, "deployed", p["dir"], p) for label, p in info["plans"].items()]
            results: list[list[dict]] = [[] for _ in runs]
            for _ in range(args.rounds):
                for i, (_, kind, path, _) in enumerate(runs):
                    results[i].append(run_child(kind, path, args.frames, args.threads))
            print(f"\n{name} ({info['model']}; profile {info['profile_s']:.0f} s)")
            print(header)
            plain_fps = float(np.median([r["fps"] for r in results[0]]))
            plain_fp = max(r["footprint_bytes"] for r in results[0])
            for (label, _, _, plan), rs in zip(runs, results):
                fps = float(np.median([r["fps"] for r in rs]))
                foot = max(r["footprint_bytes"] for r in rs)
                if plan is None:
                    print(f"{label:34} {'':>9} {foot / MiB:10.1f} {'':>7} {'':>3} {fps:7.1f} "
                          f"{1.0:7.2f}")
                    continue
                limit = 1.25 * plan["memory_bytes"] + 8 * MiB
                ok = foot <= limit and (name == "vgg11" or foot < plain_fp)
                parts = rs[-1]["breakdown"]
                br = " ".join(f"{parts[k] / MiB:.1f}" for k in
                              ("weights_bytes", "arena_bytes", "workspace_bytes",
                               "sessions_other_bytes", "load_excess_bytes"))
                print(f"{label:34} {plan['memory_bytes'] / MiB:9.1f} {foot / MiB:10.1f} "
                      f"{limit / MiB:7.1f} {'yes' if ok else 'NO':>3} {fps:7.1f} "
                      f"{fps / plain_fps:7.2f}  {br}")
                print(f"{'':34} plan = params {plan['param_bytes'] / MiB:.1f} + buffers "
                      f"{plan['buffer_bytes'] / MiB:.1f} + workspace "
                      f"{plan['workspace_bytes'] / MiB:.1f}; backend holds weights "
                      f"{rs[-1]['param_bytes'] / MiB:.1f}; models optimised in a child "
                      f"(peak {rs[-1].get('load_helper_peak_rss_bytes', 0) / MiB:.0f} MiB)")
    print("\nlimit: 1.25 x plan + 8 MiB; ok: within it (and, MobileNetV2/ResNet-50, below the "
          "plain session's footprint)")


if __name__ == "__main__":
    main()
