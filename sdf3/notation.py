"""Schedules in the paper's compact notation: {[l1] x 5, [l2], [[l1], [l2]] x 27, [l2] x 4}.

A single firing of actor a is `[a]`; `x n` repeats the item before it; a bracket holding
items repeats a group. `compact` finds repeats greedily (the longest run covered at each
position, the shortest pattern on ties); `expand` reads the notation back, so
expand(compact(s)) == s for every schedule.
"""
from __future__ import annotations

import re

from sdf3.errors import InputError

MAX_PATTERN = 12  # longest repeated group looked for; enough for CNN schedules, keeps it O(n)


def _items(seq: list[str]) -> list[str]:
    out: list[str] = []
    i, n = 0, len(seq)
    while i < n:
        best_len, best_k = 1, 1
        for length in range(1, min(MAX_PATTERN, (n - i) // 2) + 1):
            pat = seq[i:i + length]
            k = 1
            while seq[i + k * length:i + (k + 1) * length] == pat:
                k += 1
            if k > 1 and k * length > best_len * best_k:
                best_len, best_k = length, k
        body = seq[i:i + best_len]
        text = f"[{body[0]}]" if best_len == 1 else "[" + ", ".join(_items(body)) + "]"
        out.append(text if best_k == 1 else f"{text} x {best_k}")
        i += best_len * best_k
    return out


def compact(firings: list[str]) -> str:
    """The paper's notation for a flat list of actor names (one per firing)."""
    return "{" + ", ".join(_items(list(firings))) + "}"


_TOKEN = re.compile(r"\s*(\[|\]|\{|\}|,|x\s*\d+|[^\[\]{},\s]+)")


def expand(text: str) -> list[str]:
    """The flat firing list of a compact schedule string (the inverse of `compact`)."""
    tokens = [m.group(1) for m in _TOKEN.finditer(text)]
    pos = 0

    def fail(what: str):
        raise InputError(f"schedule {text!r}: expected {what} at item {pos}")

    def group() -> list[str]:  # after '[': either a name or items, then ']'
        nonlocal pos
        if pos < len(tokens) and tokens[pos] not in "[]{},":
            name = tokens[pos]
            pos += 1
            body = [name]
        else:
            body = items("]")
        if pos >= len(tokens) or tokens[pos] != "]":
            fail("']'")
        pos += 1
        if pos < len(tokens) and tokens[pos].startswith("x"):
            body = body * int(tokens[pos][1:])
            pos += 1
        return body

    def items(close: str) -> list[str]:
        nonlocal pos
        out: list[str] = []
        while pos < len(tokens) and tokens[pos] != close:
            if tokens[pos] != "[":
                fail("'['")
            pos += 1
            out.extend(group())
            if pos < len(tokens) and tokens[pos] == ",":
                pos += 1
        return out

    if not tokens or tokens[0] != "{":
        fail("'{'")
    pos = 1
    result = items("}")
    if pos != len(tokens) - 1:
        fail("'}' at the end")
    return result
