"""The int8 Input step's two orders on one frame: quantize the fp32 frame, then transpose the
1-byte frame to channels-last (what deploy/ort/frame_copy.py builds), against transposing
the fp32 frame first and quantizing the result. Both in one process, interleaved rounds,
sessions made as `explore run` makes a step's (the shared arena and thread pool).

    python benchmarks/frame_copy.py [--size 224] [--rounds 2] [--calls 200]

Prints per round the median us per call of each order, their ratio, and whether the stored
bytes are equal.
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from deploy.ort.frame_copy import frame_copy
from deploy.ort.io_binding import runner
from deploy.ort.process import form_options, init_runtime

PERM = [0, 2, 3, 1]          # [1, C, H, W] -> [1, H, W, C]
SCALE, ZERO = 0.021, 117


def transpose_first(shape: list[int], out: np.ndarray):
    """The other order: fp32 Transpose, then QuantizeLinear into `out`."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)
    y = helper.make_tensor_value_info("y", TensorProto.UINT8, list(out.shape))
    inits = [numpy_helper.from_array(np.array(SCALE, np.float32), "scale"),
             numpy_helper.from_array(np.array(ZERO, np.uint8), "zero_point")]
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=PERM),
             helper.make_node("QuantizeLinear", ["t", "scale", "zero_point"], ["y"])]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], inits),
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    sess = ort.InferenceSession(model.SerializeToString(), form_options(1, True),
                                providers=["CPUExecutionProvider"])
    binding = sess.io_binding()
    binding.bind_output("y", "cpu", 0, np.uint8, list(out.shape), out.ctypes.data)
    run = runner(sess, binding, ort.RunOptions())

    def call(frame: np.ndarray) -> None:
        binding.bind_input("x", "cpu", 0, np.float32, shape, frame.ctypes.data)
        run()
    call.keep = (sess, binding)
    return call


def median_us(call, frame: np.ndarray, calls: int) -> float:
    for _ in range(5):
        call(frame)
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        call(frame)
        times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    init_runtime(1, True)
    shape = [1, 3, args.size, args.size]
    frame = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    stored = [shape[p] for p in PERM]
    first, other = np.zeros(stored, np.uint8), np.zeros(stored, np.uint8)
    quantize_first = frame_copy([(first, "nchw", PERM)], shape, SCALE, ZERO, np.dtype(np.uint8),
                                form_options(1, True))
    fp32_first = transpose_first(shape, other)
    print(f"# benchmarks/frame_copy.py  {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}  "
          f"frame {shape}, load {os.getloadavg()[0]:.2f}")
    for r in range(args.rounds):
        a = median_us(quantize_first, frame, args.calls)
        b = median_us(fp32_first, frame, args.calls)
        print(f"round {r}: quantize first {a:.0f} us, transpose fp32 first {b:.0f} us, "
              f"ratio {a / b:.2f}, bytes equal {np.array_equal(first, other)}")


if __name__ == "__main__":
    main()
