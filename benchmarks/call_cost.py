"""What one ONNX Runtime call costs a by-parts frame apart from its kernels' work:
the call itself, each further node, and a session's state gone cold between its calls.

    python benchmarks/call_cost.py [--threads 1]

Prints, as medians of 300 repeats on this machine, each line from this one process:
Sessions are made as `explore run` makes a step's: the shared arena and thread pool.
  - a chain of 1, 2 and 10 Relus on a tiny tensor ([1, 8, 4, 4]), per `run_with_iobinding`
    of the C++ session, as OrtBackend calls it;
  - a small 1x1 conv with Relu (32 channels, 4 rows of 56: a band's size) in 72 sessions,
    each with its own weights, called in turn, against one of them called 72 times: what
    a call pays when 71 other sessions ran since its last call.
"""
from __future__ import annotations

import argparse
import os

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper


def relu_chain(nodes: int) -> bytes:
    names = ["x", *[f"t{i}" for i in range(nodes - 1)], "y"]
    g = helper.make_graph([helper.make_node("Relu", [a], [b]) for a, b in zip(names, names[1:])],
                          "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 4, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 4, 4])])
    return _model(g)


def band_conv(seed: int) -> bytes:
    w = np.random.default_rng(seed).standard_normal((32, 32, 1, 1)).astype(np.float32)
    shape = [1, 32, 4, 56]
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["t"]),
                           helper.make_node("Relu", ["t"], ["y"])], "band",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
                          [numpy_helper.from_array(w, "w")])
    return _model(g)


def _model(graph) -> bytes:
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    return m.SerializeToString()


def bound_call(model: bytes, threads: int, shape: list[int], held: list):
    """The C++ session's run_with_iobinding and its binding, I/O bound to arrays in `held`;
    the session as `explore run` makes a step's (shared arena and thread pool)."""
    from deploy.ort.process import session_options
    sess = ort.InferenceSession(model, session_options(threads, True), providers=["CPUExecutionProvider"])
    x, y = np.ones(shape, np.float32), np.zeros(shape, np.float32)
    binding = sess.io_binding()
    binding.bind_cpu_input("x", x)
    binding.bind_output("y", "cpu", 0, np.float32, shape, y.ctypes.data)
    held.extend([sess, x, y, binding])
    return sess._sess.run_with_iobinding, binding._iobinding


def per_call_us(calls: list, repeats: int = 300) -> float:
    """Median µs per call of running `calls` once each, in order."""
    from deploy.profile.layers import median_ms

    def frame() -> None:
        for run, handle in calls:
            run(handle, None)
    return median_ms(frame, repeats, repeats // 6) / len(calls) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    print(f"{args.threads} thread(s); load {os.getloadavg()[0]:.2f} at start")
    from deploy.ort.process import init_runtime
    init_runtime(args.threads, True)
    held: list = []
    for nodes in (1, 2, 10):
        call = bound_call(relu_chain(nodes), args.threads, [1, 8, 4, 4], held)
        print(f"  {nodes:2d} Relu node(s), tiny tensor: {per_call_us([call] * 100):6.2f} µs per call")
    calls = [bound_call(band_conv(seed), args.threads, [1, 32, 4, 56], held) for seed in range(72)]
    turn, alone = per_call_us(calls), per_call_us([calls[0]] * len(calls))
    print(f"  band-sized 1x1 conv, 72 sessions in turn: {turn:6.2f} µs per call")
    print(f"  the same, one session called 72 times:    {alone:6.2f} µs per call "
          f"(in turn / alone {turn / alone:.2f})")
    print(f"load {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    main()
