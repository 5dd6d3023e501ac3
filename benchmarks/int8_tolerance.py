"""What the int8 verdict's tolerance must cover, and what damage looks like next to it.

Per model: scales from 16 generated frames (deploy/quant/calibration.py), the int8 reference
(deploy/checks/quantized.py, run with ONNX Runtime's QDQ fusion: QLinear kernels) against the
same model with the fusion off (`session.disable_quant_qdq`: every layer computed in fp32
between DequantizeLinear and QuantizeLinear), over 20 seeds, in steps of the output tensor's
scale; then, against the fused reference, the least output change over the seeds of damage to
the stored tensor in the middle of the network: written at twice its scale (read back at its
own) and two of its rows swapped. Prints one line per model.

    python benchmarks/int8_tolerance.py [--zoo mobilenet_v2 resnet_small ...] [--seeds 20]

The small graphs are the test suite's (tests/conftest.py tiny CNN; tests/csdf/test_onnx_qdq.py's
conv / depthwise stride 2 / residual / concat graph; tests/onnx_cases.py's MobileNet and region
blocks); `--zoo` adds the zoo's seeded networks (csdf/zoo).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort


ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "csdf"),
                str(ROOT / "tests" / "deploy" / "checks"), str(ROOT / "tests" / "deploy" / "quant")]
import onnx_cases  # noqa: E402
from conftest import write_tiny_onnx  # noqa: E402
from csdf import zoo  # noqa: E402
from csdf.onnx_import import load_onnx  # noqa: E402
from deploy.checks.quantized import quantized_reference  # noqa: E402
from deploy.quant.calibration import activation_scales, frames, stored  # noqa: E402
from test_onnx_qdq import fp32_model  # noqa: E402
from test_quantized import damaged, session  # noqa: E402


def measure(path: Path, seeds: int) -> str:
    cnn = load_onnx(path, "net")
    shape = next(iter(cnn.input_shapes.values()))
    scales = activation_scales(path, cnn, frames(None, shape, count=16, seed=0)[0])
    ref = quantized_reference(path, cnn, scales)
    step = scales.of("net", cnn.outputs[0]).scale
    spatial = [(t, n) for t, n in stored(cnn, onnx.load(str(path))).items() if cnn.layer(n).output_shape[2] >= 4]
    tensor, layer = spatial[len(spatial) // 2]
    fused, plain = session(ref), session(ref, False)
    broken = {label: session(damaged(ref, tensor, how, cnn.layer(layer).output_shape[2]), False)
              for how, label in (("scale", "scale x2"), ("rows", "rows swapped"))}
    worst, span, least = 0.0, 0.0, {how: np.inf for how in broken}
    name = fused.get_inputs()[0].name
    for seed in range(1, seeds + 1):
        feed = {name: np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)}
        want = fused.run(None, feed)[0]
        worst = max(worst, float(np.abs(plain.run(None, feed)[0] - want).max()) / step)
        span = max(span, float(np.ptp(want)) / step)
        for how, sess in broken.items():
            least[how] = min(least[how], float(np.abs(sess.run(None, feed)[0] - want).max()) / step)
    return (f"{path.stem}: {len(list(cnn.layers()))} layers, output spans {span:.0f} steps; fused vs fp32 "
            f"steps: worst {worst:.0f} steps over {seeds} seeds; damage at {layer}: "
            + ", ".join(f"{how} >= {v:.0f}" for how, v in least.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zoo", nargs="*", default=[])
    parser.add_argument("--seeds", type=int, default=20)
    args = parser.parse_args()
    ort.set_default_logger_severity(3)
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        paths = [write_tiny_onnx(t / "tiny.onnx"), fp32_model(t / "conv_dw_add_concat.onnx"),
                 onnx_cases.mobilenet_block(t / "mobilenet_block.onnx"), onnx_cases.region_block(t / "region_block.onnx")]
        paths += [zoo.model_path(name) for name in args.zoo]
        for path in paths:
            print(measure(path, args.seeds), flush=True)


if __name__ == "__main__":
    main()
