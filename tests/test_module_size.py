"""Small modules with one job each: no module of the project passes 450 lines (split it by
concern well before; docs/architecture.md)."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 450


def test_no_module_above_the_limit():
    long = {str(f.relative_to(ROOT)): n for top in ("sdf3", "csdf", "explorer", "deploy")
            for f in sorted((ROOT / top).rglob("*.py"))
            if (n := len(f.read_text().splitlines())) > LIMIT}
    assert long == {}
