"""Export a torchvision or timm network to ONNX as a user would: random weights (seeded),
BatchNorm statistics calibrated on random batches, eval mode, static shapes, with the
TorchScript exporter (`torch.onnx.export(..., dynamo=False)`) or the default dynamo exporter.

    /path/to/venv-with-torch/bin/python benchmarks/export_torchvision.py \\
        --model shufflenet_v2_x0_5 --exporter torchscript --opset 17 --out shufflenet.onnx
    /path/to/venv-with-torch/bin/python benchmarks/export_torchvision.py \\
        --model timm:ghostnet_100 --exporter torchscript --opset 17 --out ghostnet_100.onnx

`--model timm:NAME` builds timm's `timm.create_model(NAME, pretrained=False)` (needs timm;
nothing is downloaded).

`--fp16` stores the whole model in half precision (weights, input, output), as
`model.half()` before the export writes it. torch and torchvision are optional: they serve
benchmarks only (benchmarks/real_models.py, benchmarks/search_budget.py), never the tests.
"""
from __future__ import annotations

import argparse
import sys


def build(name: str, seed: int, size: int | None = None):
    """The network with calibrated BatchNorm statistics, in eval mode (`size`: the input's
    height and width; default 299 for Inception-v3, else 224). `timm:NAME`: timm's model."""
    import torch
    torch.manual_seed(seed)
    if name.startswith("timm:"):
        import timm
        model = timm.create_model(name.removeprefix("timm:"), pretrained=False)
    else:
        import torchvision
        kw = {"aux_logits": False, "init_weights": True} if name in ("googlenet", "inception_v3") else {}
        if name.startswith(("lraspp", "fcn", "deeplab")):
            kw["weights_backbone"] = None      # random weights everywhere, nothing downloaded
        model = torchvision.models.get_model(name, weights=None, **kw)
    size = size or (299 if name == "inception_v3" else 224)
    model.train()
    with torch.no_grad():
        for _ in range(3):          # running mean / var of random inputs: outputs of order 1
            model(torch.randn(4, 3, size, size))
    return model.eval(), size


def export(name: str, exporter: str, opset: int, out: str, fp16: bool = False,
           seed: int = 0, size: int | None = None) -> None:
    import torch
    model, size = build(name, seed, size)
    x = torch.randn(1, 3, size, size)
    if fp16:
        model, x = model.half(), x.half()
    with torch.no_grad():
        torch.onnx.export(model, (x,), out, opset_version=opset,
                          dynamo=(exporter == "dynamo"), input_names=["input"],
                          output_names=["output"], external_data=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True,
                        help="torchvision model name, e.g. resnet18, or timm:NAME, e.g. timm:mixnet_s")
    parser.add_argument("--exporter", choices=["torchscript", "dynamo"], default="torchscript")
    parser.add_argument("--opset", type=int, default=17)
    parser.add_argument("--out", required=True)
    parser.add_argument("--fp16", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--size", type=int, help="input height and width (default 224; 299 for "
                                                 "inception_v3), e.g. 512 for a segmentation network")
    args = parser.parse_args()
    try:
        import torch  # noqa: F401
        if args.model.startswith("timm:"):
            import timm  # noqa: F401
        else:
            import torchvision  # noqa: F401
    except ImportError as err:
        sys.exit(f"export_torchvision: needs torch and {err.name} (pip install torch {err.name})")
    export(args.model, args.exporter, args.opset, args.out, args.fp16, args.seed, args.size)


if __name__ == "__main__":
    main()
