"""How finely ONNX Runtime's CPU Sigmoid resolves its result: one Sigmoid node on evenly
spaced fp32 inputs in [-30, 30], against float64's 1 / (1 + exp(-x)); per range of x the
largest absolute error (in units of 2^-24, the spacing of fp32 numbers at 0.5) and the
largest relative error; then whether it is monotone: the largest drop between neighbouring
inputs of the sweep, and the output steps between inputs one fp32 unit apart around -9.5.
What the fp32 verdict's tolerance must admit on a Sigmoid map near 0 (deploy/run/verdict.py).

    python benchmarks/sigmoid_resolution.py [--points 2000001]
"""
from __future__ import annotations

import argparse

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

UNIT = 2.0 ** -24
RANGES = [(-30, -18), (-18, -10), (-10, -5), (-5, -1), (-1, 1), (1, 5), (5, 30)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=2_000_001)
    args = parser.parse_args()
    port = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [None]) for n in "xy"]
    graph = helper.make_graph([helper.make_node("Sigmoid", ["x"], ["y"])], "sigmoid", port[:1], port[1:])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.linspace(-30, 30, args.points, dtype=np.float32)
    y = sess.run(None, {"x": x})[0].astype(np.float64)
    exact = 1 / (1 + np.exp(-x.astype(np.float64)))
    err = np.abs(y - exact)
    print(f"onnxruntime {ort.__version__}, {args.points} inputs in [-30, 30]")
    for lo, hi in RANGES:
        k = (x >= lo) & (x < hi)
        print(f"x in [{lo}, {hi}): max abs error {err[k].max():.3g} = {err[k].max() / UNIT:.2f} x 2^-24, "
              f"max relative error {(err[k] / exact[k]).max():.3g}")
    drops = np.diff(y)
    print(f"neighbouring inputs: {(drops < 0).sum()} decreasing steps, the largest "
          f"{-drops.min() / UNIT:.2f} x 2^-24")
    near = np.float32(-9.5) + np.arange(-2000, 2000, dtype=np.float32) * np.spacing(np.float32(9.5))
    steps = np.diff(sess.run(None, {"x": near})[0].astype(np.float64)) / UNIT
    print(f"inputs one fp32 unit apart around -9.5: output steps {sorted({float(v) for v in np.round(steps, 2)})} x 2^-24")


if __name__ == "__main__":
    main()
