"""A planner is asked by its properties (explorer.memory.placement.planner), never by name:
outside explorer/memory/placement/ no source compares a planner's name (==, !=, in, not in,
is) with anything. The tests themselves are not scanned."""
from __future__ import annotations

import ast
from pathlib import Path

from explorer.memory.placement import NAMES

ROOT = Path(__file__).resolve().parents[4]
TOPS = ("sdf3", "csdf", "explorer", "deploy", "memtrade", "benchmarks")
REGISTRY = ROOT / "explorer" / "memory" / "placement"


def _names_in(node: ast.AST) -> set[str]:
    """The planner names a comparison operand spells out: a string, or one in a literal
    tuple, list or set."""
    if isinstance(node, ast.Constant) and node.value in NAMES:
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return {n for e in node.elts for n in _names_in(e)}
    return set()


def compared(source: str) -> list[tuple[int, str]]:
    """(line, name) of every comparison in `source` with a planner name as an operand."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                out += [(node.lineno, n) for n in sorted(_names_in(operand))]
    return out


def test_the_scan_finds_comparisons():
    assert compared('per = app.placement != "shared-objects"\n') == [(1, "shared-objects")]
    assert compared('if x == "optimal" or "offsets" in y:\n    pass\n') == [
        (1, "optimal"), (1, "offsets")]
    assert compared('ok = name in ("greedy-by-size", "other")\n') == [(1, "greedy-by-size")]
    assert compared('place(uses, pipelines, "offsets")\nstatus = "optimal"\n') == []


def test_no_planner_name_is_compared_outside_the_registry():
    found = []
    for top in TOPS:
        for path in sorted((ROOT / top).rglob("*.py")):
            if REGISTRY in path.parents:
                continue
            found += [f"{path.relative_to(ROOT)}:{line}: {name}"
                      for line, name in compared(path.read_text())]
    assert found == []
