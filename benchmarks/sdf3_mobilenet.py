"""Time the sdf3 engine on MobileNetV2 (fused) with every layer by parts, the CSDF graph
built by csdf.to_csdf: repetition vector, min_buffer_schedule (schedule + minimal buffers),
and self-timed throughput of the schedule on one processor. Target: analysis < 0.1 s.

    .venv/bin/python benchmarks/sdf3_mobilenet.py [--model mobilenet_v2] [--repeat 10]
"""
from __future__ import annotations

import argparse
import statistics
import time

from csdf.onnx_import import load_onnx
from csdf.parts import all_parts
from csdf.to_csdf import to_csdf
from csdf.zoo import model_path
from sdf3.repetition import repetition_vector
from sdf3.schedule import min_buffer_schedule
from sdf3.throughput import throughput


def clock(fn, repeat: int) -> tuple[float, float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mobilenet_v2")
    ap.add_argument("--repeat", type=int, default=10)
    args = ap.parse_args()
    cnn = load_onnx(model_path(args.model), args.model)
    order = cnn.order()
    phases = all_parts(cnn)
    med, best, g = clock(lambda: to_csdf(cnn, order, phases), args.repeat)
    q = repetition_vector(g)
    print(f"{args.model}: {len(g.actors)} actors, {len(g.channels)} channels, "
          f"{sum(q.values())} firings, max phases {max(a.phases for a in g.actors.values())}")
    print(f"  to_csdf (csdf/)        : median {med * 1e3:7.2f} ms, min {best * 1e3:7.2f} ms")
    for label, fn in (("repetition_vector", lambda: repetition_vector(g)),
                      ("min_buffer_schedule", lambda: min_buffer_schedule(g))):
        med, best, out = clock(fn, args.repeat)
        print(f"  {label:22s} : median {med * 1e3:7.2f} ms, min {best * 1e3:7.2f} ms")
    sched = out
    print(f"  buffers: {sched.total()} tokens, "
          f"{sum(sched.buffers[c.name] * c.token_size for c in g.channels)} elements")
    med, best, thr = clock(lambda: throughput(g, sched.buffers, {"p0": sched}), max(1, args.repeat // 5))
    print(f"  throughput (1 proc.)   : median {med * 1e3:7.2f} ms -> {thr:.3g} iterations/time unit")


if __name__ == "__main__":
    main()
