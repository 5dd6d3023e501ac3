"""Time `analyse_partition` (CSDF graph + schedule + row buffers) on a zoo CNN, whole and
with every layer by parts. Target: under 0.1 s for MobileNetV2 with every layer by parts (the
authors' Python takes 0.36 s), since the search evaluates thousands of chromosomes.

    .venv/bin/python benchmarks/csdf_analysis.py [--model mobilenet_v2] [--repeat 10]
"""
from __future__ import annotations

import argparse
import statistics
import time

from csdf.onnx_import import load_onnx
from csdf.partition_analysis import analyse_partition
from csdf.parts import all_parts
from csdf.zoo import model_path


def timed(cnn, phases, repeat: int) -> tuple[list[float], object]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = analyse_partition(cnn, cnn.order(), phases)
        times.append(time.perf_counter() - start)
    return times, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="mobilenet_v2")
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    cnn = load_onnx(model_path(args.model), args.model)
    every = all_parts(cnn)
    print(f"{args.model} (fused): {len(every)} layers, "
          f"{sum(1 for n in every.values() if n > 1)} by parts with --all-parts, "
          f"naive buffers {cnn.edge_elements_total} elements")
    for label, phases in (("every layer by parts", every), ("no layer by parts", {})):
        times, a = timed(cnn, phases, args.repeat)
        print(f"  {label:22s}: median {statistics.median(times) * 1e3:7.2f} ms, "
              f"min {min(times) * 1e3:7.2f} ms over {args.repeat}; {len(a.firings)} firings, "
              f"internal buffers {a.buffer_elements} elements")
        mb = (cnn.param_count + a.buffer_elements) * 4 / 2**20
        print(f"  {'':22s}  fp32 parameters + these buffers (no reuse): {mb:.2f} MB")
    order = cnn.order()
    analyse_partition(cnn, order, every)
    start = time.perf_counter()
    for _ in range(1000):
        analyse_partition(cnn, order, every)
    print(f"  cached lookup          : {(time.perf_counter() - start) * 1e3:7.3f} us per call")


if __name__ == "__main__":
    main()
