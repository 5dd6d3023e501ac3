"""The manual's API page and the README's Python example run as written: docs/api.md's
```python blocks in order, in one namespace, in a fresh folder (a block marked `python
no-run` measures for minutes and is run by the tests its note names); the README's block
in a child process of this Python, from a folder holding a copy of apps/, as a user of a
fresh install would run it."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def blocks(path: Path) -> list[str]:
    return BLOCK.findall(path.read_text())


def test_every_public_name_is_on_the_api_page():
    import memtrade
    text = (ROOT / "docs" / "api.md").read_text()
    missing = [name for name in memtrade.__all__ if f"`{name}" not in text]
    assert missing == []


def test_the_api_page_runs_as_written(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code = blocks(ROOT / "docs" / "api.md")
    assert len(code) >= 5
    namespace: dict = {}
    for block in code:
        exec(compile(block, "docs/api.md", "exec"), namespace)
    printed = capsys.readouterr().out
    assert "refused: " in printed and "PASS" in printed
    assert (tmp_path / "out" / "plan.json").is_file() and (tmp_path / "dep" / "manifest.json").is_file()


def test_the_readme_python_example_runs_as_written(tmp_path):
    code = blocks(ROOT / "README.md")
    assert len(code) == 1 and len(code[0].strip().splitlines()) <= 12
    shutil.copytree(ROOT / "apps", tmp_path / "apps")
    done = subprocess.run([sys.executable, "-c", code[0]], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert (tmp_path / "dep" / "manifest.json").is_file()
