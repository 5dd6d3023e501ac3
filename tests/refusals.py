"""What every refusal test asks (docs/architecture.md, "Errors"): exit status 2 and one line
`explore: error: ...` naming the file, key or layer, never a traceback; and the tiny CNN's
least-memory deployment that the damage tests break."""
from __future__ import annotations

import json
from pathlib import Path

from explorer.cli.main import main


def one_line(stderr: str, stdout: str, words) -> str:
    """The refusal on stderr: one `explore: error:` line holding every one of `words`."""
    err = stderr.strip()
    assert err.startswith("explore: error: ") and "\n" not in err, err
    assert "Traceback" not in stderr + stdout
    for w in words:
        assert w in err, (w, err)
    return err


def refused(capsys, argv: list[str], *words: str) -> str:
    """`explore argv` in this process exits 2 with one line holding `words`."""
    assert main(argv) == 2
    captured = capsys.readouterr()
    return one_line(captured.err, captured.out, words)


_BUILT: list[Path] = []          # the one build, copied into every root asked for


def tiny_least_memory(root: Path) -> Path:
    """The tiny CNN (conftest.write_tiny_onnx) at its least memory (the budget met, so
    deploy warns of nothing), deployed on ONNX Runtime into root/dep.

    Built once per test session (two `explore` runs and `explore deploy`) and copied into
    each `root`, with the paths the files record (plan.json and pareto.json name the app
    file) rewritten to `root`, so each module has files of its own, as if built there."""
    if not _BUILT:
        import atexit
        import shutil
        import tempfile
        source = Path(tempfile.mkdtemp(prefix="tiny_least_memory-"))
        atexit.register(shutil.rmtree, source, True)
        _build(source)
        _BUILT.append(source)
    return _copy(_BUILT[0], Path(root))


def _copy(source: Path, root: Path) -> Path:
    import shutil
    shutil.copytree(source, root, dirs_exist_ok=True)
    for name in ("least", "run"):
        for written in ("plan.json", "pareto.json"):
            path = root / name / written
            path.write_text(path.read_text().replace(str(source), str(root)))
    return root / "dep"


def _build(root: Path) -> None:
    from conftest import write_tiny_onnx
    write_tiny_onnx(root / "tiny.onnx")
    (root / "tiny.yaml").write_text("name: t\ncnns:\n  - {name: tiny, model: tiny.onnx}\n")
    assert main([str(root / "tiny.yaml"), "--mem", "0", "--quiet",
                 "--out", str(root / "least")]) == 0              # the least-memory goal
    least = json.loads((root / "least" / "plan.json").read_text())["memory_bytes"]
    assert main([str(root / "tiny.yaml"), "--mem", f"{least}B", "--prefer", "memory", "--quiet",
                 "--out", str(root / "run")]) == 0
    assert main(["deploy", str(root / "run" / "plan.json"), "--out", str(root / "dep")]) == 0


def redigest(dep: Path) -> None:
    """Record the SHA-256 of every file of deployment `dep` as it is now (manifest key
    "files"), as if `explore deploy` had written the edited files: a damage test of what
    comes after the digests (ONNX Runtime's refusal, the step that fails) edits a file and
    re-records it, or the load would refuse the edit first (deploy/checks/files.py)."""
    from deploy.checks.files import digest
    path = dep / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["files"] = {rel: digest(dep / rel) if (dep / rel).is_file() else want
                         for rel, want in manifest["files"].items()}
    path.write_text(json.dumps(manifest))
