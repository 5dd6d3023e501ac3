"""Temporary space of one `explore` command: every temporary file or folder the command and
its child processes make (ONNX Runtime's optimised models, profile deployments, the step
check's work) lies in one folder, `<system temp>/memtrade-<pid>-XXXX`, set as Python's
`tempfile.tempdir` and as TMPDIR for the children, and removed when the command ends, by
success, error, Ctrl-C or SIGTERM. A command killed outright (SIGKILL, the OOM killer) cannot
remove it; the next command removes the folders of processes that are gone.
"""
from __future__ import annotations

import os
import re
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from explorer.report.outputs import process_gone

PATTERN = re.compile(r"^memtrade-(\d+)-[A-Za-z0-9_]+$")


def sweep(root: Path) -> list[Path]:
    """Remove the scratch folders in `root` of processes that are gone; the ones removed."""
    removed = []
    try:
        entries = list(root.iterdir())
    except OSError:
        return removed
    for entry in entries:
        found = PATTERN.match(entry.name)
        if found and entry.is_dir() and not entry.is_symlink() and process_gone(int(found.group(1))):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


@contextmanager
def scratch_space() -> Iterator[Path]:
    """The command's scratch folder for the `with` block (see the module docstring)."""
    root = Path(tempfile.gettempdir())
    sweep(root)
    try:
        folder = Path(tempfile.mkdtemp(prefix=f"memtrade-{os.getpid()}-", dir=root))
    except OSError:          # no writable temporary space: the commands say so where they need it
        yield root
        return
    before_dir, before_env = tempfile.tempdir, os.environ.get("TMPDIR")
    tempfile.tempdir = str(folder)
    os.environ["TMPDIR"] = str(folder)
    try:
        yield folder
    finally:
        tempfile.tempdir = before_dir
        if before_env is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = before_env
        shutil.rmtree(folder, ignore_errors=True)
