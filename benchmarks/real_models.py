"""Real CNNs in, as a new user brings them: classification networks exported by
`torch.onnx.export` (random weights, BatchNorm statistics calibrated on random frames so
outputs are of order 1) through `explore info -> baselines -> explore (least memory) ->
deploy -> run`, each command in its own process. Prints a markdown table: layers, params
(ours vs the framework's count), baselines, the chosen plan's memory, the verdict, the max
relative diff, and whether the arena equals the plan's buffer bytes.

Needs torch (never required by the tests or CI). With torchvision importable it exports
torchvision's own models (`--torchvision`: every classification family, the three
segmentation families (their "out" head), and with timm installed five timm families);
without it, it exports the small PyTorch modules below, written here for this benchmark:
one per family, each using the family's own building blocks as torchvision writes them
(labelled "mini" in the table). `--exporters torchscript,dynamo`: TorchScript
(`torch.onnx.export(dynamo=False)`) at each of `--opsets`, the default dynamo exporter at
opset 18. `--stages info` stops after info and baselines (the table's import columns).

    flock /tmp/memtrade-bench.lock python benchmarks/real_models.py [--opsets 13,17]
    python benchmarks/real_models.py --torchvision --exporters torchscript,dynamo --opsets 17 --stages info
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


TORCHVISION = ["alexnet", "vgg11", "resnet18", "resnext50_32x4d", "wide_resnet50_2",
               "squeezenet1_1", "densenet121", "inception_v3", "googlenet", "shufflenet_v2_x0_5",
               "mobilenet_v2", "mobilenet_v3_small", "mnasnet0_5", "efficientnet_b0",
               "efficientnet_v2_s", "regnet_y_400mf", "convnext_tiny", "vit_b_16", "swin_t",
               "maxvit_t", "fcn_resnet50", "deeplabv3_mobilenet_v3_large",
               "lraspp_mobilenet_v3_large"]
TIMM = ["ghostnet_100", "rexnet_100", "dla34", "cspresnet50", "repvgg_a0"]
SIZE = {"inception_v3": 299}


def torchvision_models():
    """name -> a builder of the model (built one at a time: the big ones hold GiBs)."""
    import torch
    from torchvision import models as tv

    class Out(torch.nn.Module):          # a segmentation model's "out" map, as deployed
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, x):
            return self.net(x)["out"]

    def make(name):
        kw = {"aux_logits": False, "init_weights": True} if name in ("inception_v3", "googlenet") else {}
        net = tv.get_model(name, weights=None, weights_backbone=None, **kw) \
            if name in tv.list_models(tv.segmentation) else tv.get_model(name, weights=None, **kw)
        return Out(net) if name in tv.list_models(tv.segmentation) else net
    out = {name: (lambda n=name: make(n)) for name in TORCHVISION}
    try:
        import timm
        out.update({f"{n} (timm)": (lambda n=n: timm.create_model(n, pretrained=False)) for n in TIMM})
    except ImportError:
        pass
    return out


def export(model, path: Path, opset: int, size: int, exporter: str = "torchscript") -> int:
    """Calibrate BatchNorm on random frames, export; returns the framework's parameter count."""
    import torch
    torch.manual_seed(0)
    model.train()
    with torch.no_grad():
        for _ in range(2):
            model(torch.randn(4, 3, size, size))
    model.eval()
    with torch.no_grad():
        torch.onnx.export(model, (torch.randn(1, 3, size, size),), str(path), opset_version=opset,
                          input_names=["input"], output_names=["logits"],
                          dynamo=exporter == "dynamo", external_data=False)
    return sum(p.numel() for p in model.parameters())


def cli(*args: str) -> tuple[int, str]:
    proc = subprocess.run([sys.executable, "-m", "explorer.cli.main", *args], cwd=ROOT,
                          capture_output=True, text=True)
    if proc.returncode in (0, 4):
        return proc.returncode, proc.stdout
    return proc.returncode, (proc.stderr.strip() or proc.stdout.strip() or f"exit {proc.returncode}")


def one(name: str, model, opset: int, size: int, work: Path, exporter: str = "torchscript",
        stages: str = "full") -> dict:
    row: dict = {"network": name, "opset": opset, "exporter": exporter}
    onnx_path = work / "model.onnx"
    try:
        row["framework_params"] = export(model, onnx_path, opset, size, exporter)
    except Exception as err:             # the exporter's own failure, not ours
        return row | {"error": f"export failed: {' '.join(str(err).split())[:160]}"}
    app = work / "app.yaml"
    app.write_text(f"name: real\nplatform: jetson-tx2\ncnns:\n  - name: net\n    model: model.onnx\n"
                   f"search: {{population: 16, generations: 8, seed: 1}}\n")
    code, out = cli("info", str(app), "--json", "--layers")
    if code:
        return row | {"error": out.splitlines()[-1]}
    info = json.loads(out)["cnns"]["net"]
    row.update(layers=info["layers"], params=info["param_count"],
               opaque=sum(1 for layer in info.get("layer_list", []) if layer["op"] == "Opaque"),
               ort_shapes=info.get("shapes_from_ort", 0))
    code, out = cli("baselines", str(app), "--json")
    base = json.loads(out) if code == 0 else {}
    row.update(none=base.get("none", {}).get("total_bytes"), reuse=base.get("reuse", {}).get("total_bytes"),
               all_parts=base.get("all_parts", {}).get("total_bytes"))
    if code:
        return row | {"error": out.splitlines()[-1]}
    if stages == "info":
        return row
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


def print_import_table(rows: list[dict]) -> None:
    print("| network | exporter, opset | layers | opaque | shapes from ORT | params (ours / "
          "framework) | no reuse MiB | reuse MiB | result |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        head = f"| {r['network']} | {r['exporter']} {r['opset']} |"
        if "error" in r:
            print(f"{head} {r.get('layers', '-')} | - | - | - | - | - | {r['error']} |")
            continue
        print(f"{head} {r['layers']} | {r['opaque']} | {r['ort_shapes']} | {r['params']:,} / "
              f"{r['framework_params']:,} | {mib(r['none'])} | {mib(r['reuse'])} | pass |")


def mib(v) -> str:
    return "-" if v is None else f"{v / 2**20:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--opsets", default="13,17")
    ap.add_argument("--torchvision", action="store_true", help="torchvision's models (224x224)")
    ap.add_argument("--only", help="comma-separated network names")
    ap.add_argument("--exporters", default="torchscript",
                    help="torchscript (at each of --opsets) and/or dynamo (opset 18)")
    ap.add_argument("--stages", choices=["info", "full"], default="full",
                    help="info: info and baselines only; full: also explore, deploy, run")
    args = ap.parse_args()
    try:
        import torch  # noqa: F401
    except ImportError:
        sys.exit("real_models: torch is not importable (pip install torch); nothing to run")
    models = torchvision_models() if args.torchvision else mini_models()
    size = 224 if args.torchvision else 32
    rows = []
    runs = [(e, int(o)) for e in args.exporters.split(",") for o in
            (args.opsets.split(",") if e == "torchscript" else ["18"])]
    for name, model in models.items():
        if args.only and name.split()[0] not in args.only.split(","):
            continue
        for exporter, opset in runs:
            net = model() if callable(model) and not hasattr(model, "parameters") else model
            with tempfile.TemporaryDirectory() as tmp:
                row = one(name, net, opset, SIZE.get(name, size), Path(tmp), exporter, args.stages)
            del net
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    if args.stages == "info":
        print_import_table(rows)
        return
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
