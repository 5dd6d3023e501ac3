"""Where a command may write: nothing a user wrote is overwritten unless they ask (--force)."""
from __future__ import annotations

from pathlib import Path

from sdf3.errors import InputError


def fresh_dir(path: str | Path, force: bool, flag: str = "--out") -> Path:
    """`path` as a directory to write into: absent, empty, or non-empty with --force."""
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise InputError(f"{flag} {out}: expected a directory, found a file")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise InputError(f"{flag} {out}: directory is not empty (use --force to write into it)")
    return out


def fresh_file(path: str | Path, force: bool, flag: str = "--out") -> Path:
    """`path` as a file to write: absent, or present with --force."""
    out = Path(path)
    if out.is_dir():
        raise InputError(f"{flag} {out}: expected a file, found a directory")
    if out.exists() and not force:
        raise InputError(f"{flag} {out}: file exists (use --force to overwrite it)")
    return out
