"""Real CNNs in, as a new user brings them: classification networks exported by
`torch.onnx.export` (random weights, BatchNorm statistics calibrated on random frames so
outputs are of order 1) through `explore info -> baselines -> explore (least memory) ->
deploy -> run`, each command in its own process. Prints a markdown table: layers, params
(ours vs the framework's count), baselines, the chosen plan's memory, the verdict, the max
relative diff, and whether the arena equals the plan's buffer bytes.

Needs torch (never required by the tests or CI). With torchvision importable it exports
torchvision's own models (`--torchvision`); without it, it exports the small PyTorch
modules below, written here for this benchmark: one per family, each using the family's
own building blocks as torchvision writes them (labelled "mini" in the table).

    flock /tmp/memtrade-bench.lock python benchmarks/real_models.py [--opsets 13,17]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def mini_models():
    """name -> nn.Module: small versions of the families (torchvision's block structure)."""
    import torch
    from torch import nn
    F = nn.functional

    def cbr(cin, cout, k=3, s=1, g=1, act=nn.ReLU6):
        return nn.Sequential(nn.Conv2d(cin, cout, k, s, k // 2, groups=g, bias=False),
                             nn.BatchNorm2d(cout), act())

    class InvertedResidual(nn.Module):          # MobileNetV2
        def __init__(self, c, e=4, act=nn.ReLU6, se=False):
            super().__init__()
            layers = [cbr(c, c * e, 1, act=act), cbr(c * e, c * e, 3, g=c * e, act=act)]
            if se:
                layers.append(SqueezeExcite(c * e))
            layers += [nn.Conv2d(c * e, c, 1, bias=False), nn.BatchNorm2d(c)]
            self.block = nn.Sequential(*layers)

        def forward(self, x):
            return x + self.block(x)

    class SqueezeExcite(nn.Module):             # MobileNetV3: hardsigmoid gate
        def __init__(self, c):
            super().__init__()
            self.fc1, self.fc2 = nn.Conv2d(c, c // 4, 1), nn.Conv2d(c // 4, c, 1)

        def forward(self, x):
            s = F.adaptive_avg_pool2d(x, 1)
            return x * F.hardsigmoid(self.fc2(F.relu(self.fc1(s))))

    class Head(nn.Module):
        def __init__(self, body, c, classes=10, mean=False):
            super().__init__()
            self.body, self.mean, self.fc = body, mean, nn.Linear(c, classes)

        def forward(self, x):
            x = self.body(x)
            x = x.mean([2, 3]) if self.mean else torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
            return self.fc(x)

    def shuffle(x, g=2):                        # ShuffleNetV2's channel_shuffle
        b, c, h, w = x.size()
        x = x.view(b, g, c // g, h, w).transpose(1, 2).contiguous()
        return x.view(b, c, h, w)

    class ShuffleUnit(nn.Module):
        def __init__(self, c):
            super().__init__()
            h = c // 2
            self.branch = nn.Sequential(cbr(h, h, 1, act=nn.ReLU), nn.Conv2d(h, h, 3, 1, 1, groups=h, bias=False),
                                        nn.BatchNorm2d(h), cbr(h, h, 1, act=nn.ReLU))

        def forward(self, x):
            a, b = x.chunk(2, dim=1)
            return shuffle(torch.cat((a, self.branch(b)), 1))

    class CNBlock(nn.Module):                   # ConvNeXt
        def __init__(self, c):
            super().__init__()
            self.dw = nn.Conv2d(c, c, 7, padding=3, groups=c)
            self.norm, self.fc1, self.fc2 = nn.LayerNorm(c, eps=1e-6), nn.Linear(c, 4 * c), nn.Linear(4 * c, c)
            self.gamma = nn.Parameter(torch.full((c, 1, 1), 0.5))

        def forward(self, x):
            y = self.dw(x).permute(0, 2, 3, 1)
            y = self.fc2(F.gelu(self.fc1(self.norm(y)))).permute(0, 3, 1, 2)
            return x + self.gamma * y

    class DenseLayer(nn.Module):                # DenseNet: BN-ReLU before the conv, after a concat
        def __init__(self, c, k):
            super().__init__()
            self.f = nn.Sequential(nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, k, 3, padding=1, bias=False))

        def forward(self, x):
            return torch.cat([x, self.f(x)], 1)

    class Basic(nn.Module):                     # ResNet
        def __init__(self, c):
            super().__init__()
            self.f = nn.Sequential(cbr(c, c, act=nn.ReLU), nn.Conv2d(c, c, 3, 1, 1, bias=False), nn.BatchNorm2d(c))

        def forward(self, x):
            return F.relu(x + self.f(x))

    return {
        "mobilenet_v2 (mini)": Head(nn.Sequential(cbr(3, 16, s=2), InvertedResidual(16), InvertedResidual(16)), 16),
        "mobilenet_v3 (mini)": Head(nn.Sequential(cbr(3, 16, s=2, act=nn.Hardswish),
                                                  InvertedResidual(16, act=nn.Hardswish, se=True)), 16),
        "mnasnet (mini)": Head(nn.Sequential(cbr(3, 16, s=2, act=nn.ReLU), InvertedResidual(16, act=nn.ReLU)), 16,
                               mean=True),
        "shufflenet_v2 (mini)": Head(nn.Sequential(cbr(3, 16, s=2, act=nn.ReLU), ShuffleUnit(16), ShuffleUnit(16)), 16),
        "convnext (mini)": Head(nn.Sequential(nn.Conv2d(3, 16, 4, 4), CNBlock(16), CNBlock(16)), 16),
        "densenet (mini)": Head(nn.Sequential(cbr(3, 16, s=2, act=nn.ReLU), DenseLayer(16, 8), DenseLayer(24, 8),
                                              nn.BatchNorm2d(32), nn.ReLU()), 32),
        "resnet (mini)": Head(nn.Sequential(cbr(3, 16, s=2, act=nn.ReLU), Basic(16), Basic(16)), 16),
    }


def torchvision_models():
    from torchvision import models as tv
    names = ["mobilenet_v2", "mobilenet_v3_small", "mnasnet0_5", "shufflenet_v2_x0_5", "convnext_tiny",
             "densenet121", "resnet18", "efficientnet_b0", "squeezenet1_1", "regnet_x_400mf"]
    return {n: getattr(tv, n)(weights=None) for n in names}


def export(model, path: Path, opset: int, size: int) -> int:
    """Calibrate BatchNorm on random frames, export; returns the framework's parameter count."""
    import torch
    torch.manual_seed(0)
    model.train()
    with torch.no_grad():
        for _ in range(4):
            model(torch.randn(8, 3, size, size))
    model.eval()
    torch.onnx.export(model, torch.randn(1, 3, size, size), str(path), opset_version=opset,
                      input_names=["input"], output_names=["logits"], dynamo=False)
    return sum(p.numel() for p in model.parameters())


def cli(*args: str) -> tuple[int, str]:
    proc = subprocess.run([sys.executable, "-m", "explorer.cli.main", *args], cwd=ROOT,
                          capture_output=True, text=True)
    if proc.returncode in (0, 4):
        return proc.returncode, proc.stdout
    return proc.returncode, (proc.stderr.strip() or proc.stdout.strip() or f"exit {proc.returncode}")


def one(name: str, model, opset: int, size: int, work: Path) -> dict:
    row: dict = {"network": name, "opset": opset}
    onnx_path = work / "model.onnx"
    row["framework_params"] = export(model, onnx_path, opset, size)
    app = work / "app.yaml"
    app.write_text(f"name: real\nplatform: jetson-tx2\ncnns:\n  - name: net\n    model: model.onnx\n"
                   f"search: {{population: 16, generations: 8, seed: 1}}\n")
    code, out = cli("info", str(app), "--json")
    if code:
        return row | {"error": out.splitlines()[-1]}
    info = json.loads(out)["cnns"]["net"]
    row.update(layers=info["layers"], params=info["param_count"])
    code, out = cli("baselines", str(app), "--json")
    base = json.loads(out) if code == 0 else {}
    row.update(none=base.get("none", {}).get("total_bytes"), reuse=base.get("reuse", {}).get("total_bytes"),
               all_parts=base.get("all_parts", {}).get("total_bytes"))
    code, out = cli(str(app), "--mem", "0", "--out", str(work / "run"), "--quiet", "--force")
    if not (work / "run" / "plan.json").is_file():
        return row | {"error": out.splitlines()[-1]}
    plan = json.loads((work / "run" / "plan.json").read_text())
    row["chosen"] = plan["memory_bytes"]
    code, out = cli("deploy", str(work / "run" / "plan.json"), "--out", str(work / "dep"), "--force")
    if code:
        return row | {"error": out.splitlines()[-1]}
    code, out = cli("run", str(work / "dep"), "--frames", "4", "--json")
    if code not in (0, 4):
        return row | {"error": out.splitlines()[-1]}
    res = json.loads(out)
    v = res["verdict"]["net"]
    row.update(verdict=v["verdict"], rel_diff=v["relative_diff"],
               arena_eq_plan=res["arena_bytes"] == plan["buffer_bytes"])
    return row


def mib(v) -> str:
    return "-" if v is None else f"{v / 2**20:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--opsets", default="13,17")
    ap.add_argument("--torchvision", action="store_true", help="torchvision's models (224x224)")
    ap.add_argument("--only", help="comma-separated network names")
    args = ap.parse_args()
    try:
        import torch  # noqa: F401
    except ImportError:
        sys.exit("real_models: torch is not importable (pip install torch); nothing to run")
    models = torchvision_models() if args.torchvision else mini_models()
    size = 224 if args.torchvision else 32
    rows = []
    for name, model in models.items():
        if args.only and name.split()[0] not in args.only.split(","):
            continue
        for opset in (int(o) for o in args.opsets.split(",")):
            with tempfile.TemporaryDirectory() as tmp:
                row = one(name, model, opset, size, Path(tmp))
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
    print("| network | opset | layers | params (ours / framework) | no reuse MiB | reuse MiB | "
          "all parts MiB | chosen MiB | verdict | max rel diff | arena = plan |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        if "error" in r:
            print(f"| {r['network']} | {r['opset']} | {r.get('layers', '-')} | - | - | - | - | - | "
                  f"refused: {r['error']} | - | - |")
            continue
        print(f"| {r['network']} | {r['opset']} | {r['layers']} | {r['params']:,} / {r['framework_params']:,} | "
              f"{mib(r['none'])} | {mib(r['reuse'])} | {mib(r['all_parts'])} | {mib(r['chosen'])} | "
              f"{r['verdict']} | {r['rel_diff']:.1e} | {'yes' if r['arena_eq_plan'] else 'NO'} |")


if __name__ == "__main__":
    main()
