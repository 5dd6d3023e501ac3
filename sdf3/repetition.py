"""Consistency and the repetition vector of a (C)SDF graph.

As in SDF3, the repetition vector counts firings, i.e. phases: an actor with 5 phases that
runs its phase cycle once per iteration has entry 5. Balance is per phase cycle: for a
channel, (cycles of src) * sum(prod) == (cycles of dst) * sum(cons).
"""
from __future__ import annotations

from fractions import Fraction
from math import gcd, lcm

from sdf3.analysis import InconsistentGraph
from sdf3.graph import Graph


def cycle_vector(graph: Graph) -> dict[str, int]:
    """Smallest positive number of phase cycles per actor that balances every channel.

    Each weakly connected component is scaled on its own (an isolated actor runs one cycle).
    Raises InconsistentGraph naming the first channel whose rates contradict the others.
    """
    adj: dict[str, list[tuple[str, Fraction | None, str]]] = {a: [] for a in graph.actors}
    for ch in graph.channels:
        p, c = sum(ch.prod), sum(ch.cons)
        if ch.src == ch.dst:
            if p != c:
                raise InconsistentGraph(f"inconsistent graph: self-loop channel {ch.name} on {ch.src} "
                                        f"produces {p} but consumes {c} tokens per cycle", ch.name)
            continue
        if (p == 0) != (c == 0):
            raise InconsistentGraph(f"inconsistent graph: channel {ch.name} ({ch.src}->{ch.dst}) "
                                    f"produces {p} but consumes {c} tokens per cycle", ch.name)
        if p == 0:
            adj[ch.src].append((ch.dst, None, ch.name))
            adj[ch.dst].append((ch.src, None, ch.name))
            continue
        # cycles[dst] = cycles[src] * p / c
        adj[ch.src].append((ch.dst, Fraction(p, c), ch.name))
        adj[ch.dst].append((ch.src, Fraction(c, p), ch.name))
    ratio: dict[str, Fraction] = {}
    result: dict[str, int] = {}
    for root in graph.actors:
        if root in ratio:
            continue
        ratio[root] = Fraction(1)
        comp, stack = [root], [root]
        while stack:
            a = stack.pop()
            for b, r, name in adj[a]:
                if r is None:
                    if b not in ratio:
                        ratio[b] = ratio[a]
                        comp.append(b)
                        stack.append(b)
                    continue
                want = ratio[a] * r
                if b not in ratio:
                    ratio[b] = want
                    comp.append(b)
                    stack.append(b)
                elif ratio[b] != want:
                    raise InconsistentGraph(f"inconsistent graph: rates of channel {name} between "
                                            f"{a} and {b} contradict the rest of the graph", name)
        den = lcm(*(ratio[a].denominator for a in comp))
        nums = [int(ratio[a] * den) for a in comp]
        g = gcd(*nums)
        for a, n in zip(comp, nums):
            result[a] = n // g
    return {a: result[a] for a in graph.actors}


def repetition_vector(graph: Graph) -> dict[str, int]:
    """Firings per actor in one iteration (phase cycles times phases), as SDF3 prints it."""
    cycles = cycle_vector(graph)
    return {a: cycles[a] * graph.actors[a].phases for a in graph.actors}


def is_consistent(graph: Graph) -> bool:
    try:
        cycle_vector(graph)
    except InconsistentGraph:
        return False
    return True
