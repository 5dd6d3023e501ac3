"""Time min_buffer_schedule on a CNN-like CSDF graph: a chain of 3x3 "convolutions" by rows
(some stride 2) with residual connections, ~70 actors and ~5,000 firings per iteration.

Run: .venv/bin/python benchmarks/sdf3_schedule.py
"""
from __future__ import annotations

import time

from sdf3.graph import Actor, Channel, Graph
from sdf3.repetition import repetition_vector
from sdf3.schedule import min_buffer_schedule


def window(h_in: int, h_out: int, k: int, s: int, pad: int) -> list[int]:
    """Rows of input newly needed by each output row of a k x k window with stride s."""
    rates, have = [], 0
    for r in range(h_out):
        last = min(h_in, r * s - pad + k)
        rates.append(max(0, last - have))
        have = max(have, last)
    rates[-1] += h_in - have
    return rates


def cnn_like(layers: int = 70, h: int = 112) -> Graph:
    g = Graph("cnn_like")
    g.add_actor(Actor("l0", h, [1] * h))
    heights = {"l0": h}
    prev, cur = "l0", h
    for i in range(1, layers):
        stride = 2 if i % 12 == 0 and cur > 7 else 1
        out = (cur + 2 - 3) // stride + 1
        name = f"l{i}"
        g.add_actor(Actor(name, out, [2] * out))
        g.add_channel(Channel(f"{prev}->{name}", prev, name, [1] * cur, window(cur, out, 3, stride, 1)))
        if i % 3 == 0 and stride == 1 and heights.get(f"l{i - 2}") == out and i >= 3:
            src = f"l{i - 2}"
            g.add_channel(Channel(f"{src}->{name}", src, name, [1] * out, [1] * out))
        heights[name] = out
        prev, cur = name, out
    return g


if __name__ == "__main__":
    g = cnn_like(70, 224)
    fir = sum(repetition_vector(g).values())
    times = []
    for _ in range(7):
        t0 = time.perf_counter()
        s = min_buffer_schedule(g)
        times.append(time.perf_counter() - t0)
    print(f"actors {len(g.actors)} channels {len(g.channels)} firings {fir}")
    print(f"min_buffer_schedule: best {min(times) * 1e3:.1f} ms, median {sorted(times)[3] * 1e3:.1f} ms")
    print(f"total buffer tokens {s.total()}")
