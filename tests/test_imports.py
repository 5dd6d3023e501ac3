"""Imports point one way (docs/architecture.md): every package's __init__ docstring says what
it may import in a line `May import: a, b.c` (or `nothing of memtrade`); a module is governed
by the nearest package above it that has such a line and may import its own package and the
names listed. The listed allowances form no circle, and no module imports itself round a
circle. Imports inside functions count: a lazy import is still a dependency."""
from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
OURS = ("sdf3", "csdf", "explorer", "deploy", "memtrade")


def _modules() -> dict[str, Path]:
    found = {}
    for top in OURS:
        for f in sorted((ROOT / top).rglob("*.py")):
            parts = f.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return found


MODULES = _modules()
PACKAGES = {m for m, f in MODULES.items() if f.name == "__init__.py"}


def _imports(module: str, path: Path) -> set[str]:
    """The memtrade modules `module` imports (a name imported from a package resolves to its
    submodule when there is one, else to the package)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base
                     for a in node.names]
        else:
            continue
        for name in names:
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name and name.split(".")[0] in OURS:
                found.add(name)
    return found


GRAPH = nx.DiGraph()
for _m, _f in MODULES.items():
    GRAPH.add_node(_m)
    GRAPH.add_edges_from((_m, d) for d in _imports(_m, _f) if d != _m)


def _rule(package: str) -> list[str] | None:
    doc = ast.get_docstring(ast.parse(MODULES[package].read_text())) or ""
    lines = [ln for ln in doc.splitlines() if ln.startswith("May import:")]
    if not lines:
        return None
    listed = lines[0].removeprefix("May import:").strip().rstrip(".")
    return [] if listed == "nothing of memtrade" else [x.strip() for x in listed.split(",")]


RULES = {p: r for p in PACKAGES if (r := _rule(p)) is not None}


def _governor(module: str) -> str:
    name = module
    while name:
        if name in RULES:
            return name
        name = name.rpartition(".")[0]
    raise AssertionError(f"{module}: no package above it says what it may import")


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def test_every_top_package_and_subpackage_documents_its_imports():
    needed = {p for p in PACKAGES if p in ("sdf3", "csdf") or
              (p.count(".") == 1 and p.split(".")[0] in ("explorer", "deploy"))}
    assert needed - set(RULES) == set()
    for listed in RULES.values():
        for name in listed:
            assert name in PACKAGES, f"'May import: {name}' names no package"


def test_imports_follow_the_documented_direction():
    wrong = []
    for module, dep in GRAPH.edges:
        gov = _governor(module)
        if not any(_under(dep, p) for p in [gov, *RULES[gov]]):
            wrong.append(f"{module} -> {dep} (its package {gov} may import {RULES[gov]})")
    assert wrong == []


def test_documented_directions_form_no_circle():
    rules = nx.DiGraph()
    for package, listed in RULES.items():
        rules.add_edges_from((package, p) for p in listed
                             if not _under(package, p) and not _under(p, package))
    assert nx.is_directed_acyclic_graph(rules), nx.find_cycle(rules)


def test_no_module_imports_itself_round_a_circle():
    cycles = list(nx.simple_cycles(GRAPH))
    assert cycles == []


@pytest.mark.parametrize("text", [
    "from deploy.steps import parts\nfrom .builder import Builder\n",
])
def test_the_walker_sees_package_and_relative_imports(tmp_path, text):
    """The walker itself: a module of a package, and a relative import, both resolve."""
    path = ROOT / "deploy" / "steps" / "x_probe.py"
    assert _imports("deploy.steps.x_probe", _write(tmp_path, text, path)) == {
        "deploy.steps.parts", "deploy.steps.builder"}


def _write(tmp_path: Path, text: str, like: Path) -> Path:
    """`text` as a file whose package is `like`'s (the walker reads only the path's name)."""
    f = tmp_path / like.name
    f.write_text(text)
    return f
