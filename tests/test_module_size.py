"""Small modules with one job each: no module of the project passes 450 lines (split it by
concern well before; docs/architecture.md), and the command's modules (explorer/cli/), which
only parse, call memtrade and print, none past 150."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 450
CLI_LIMIT = 150


def _lengths(folder: Path) -> dict[str, int]:
    return {str(f.relative_to(ROOT)): len(f.read_text().splitlines()) for f in sorted(folder.rglob("*.py"))}


def test_no_module_above_the_limit():
    long = {f: n for top in ("sdf3", "csdf", "explorer", "deploy", "memtrade")
            for f, n in _lengths(ROOT / top).items() if n > LIMIT}
    assert long == {}


def test_the_commands_modules_are_thin():
    lengths = _lengths(ROOT / "explorer" / "cli")
    assert len(lengths) >= 10
    assert {f: n for f, n in lengths.items() if n > CLI_LIMIT} == {}
