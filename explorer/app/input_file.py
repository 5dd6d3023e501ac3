"""Files a user names (application files, plans, fronts, profiles), checked before they are
opened: one that is missing, or not a regular file, is refused in one line naming it and
what it is. Opening a FIFO blocks until something writes to it, and reading a device or a
directory never gives a file's contents, so nothing is opened that `os.stat` does not call
a regular file; the check itself never blocks.

`read_json` reads such a file as UTF-8 JSON, again with one line for bytes that are not
UTF-8 (an ONNX model given where a plan is expected) or text that is not JSON.
"""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from sdf3.errors import InputError

KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
         (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
         (stat.S_ISBLK, "a block device"))


def not_regular(path: str | Path) -> str | None:
    """What `path` is when it exists and is not a regular file ("a FIFO (named pipe)", ...);
    None for a regular file or a path that cannot be looked at."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    if stat.S_ISREG(mode):
        return None
    return next((word for test, word in KINDS if test(mode)), "not a regular file")


def regular_file(path: str | Path, what: str) -> Path:
    """`path` when it names a regular file; else InputError "PATH: not found; expected WHAT" or
    "PATH: expected WHAT (a regular file), found a FIFO (named pipe)"."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise InputError(f"{path}: not found; expected {what}") from None
    except (OSError, ValueError) as err:
        reason = getattr(err, "strerror", None) or str(err)
        raise InputError(f"{path}: cannot read {what} ({reason})") from None
    if not stat.S_ISREG(mode):
        raise InputError(f"{path}: expected {what} (a regular file), found {not_regular(path)}")
    return Path(path)


def read_text(path: str | Path, what: str = "the file") -> str:
    """A user's regular text file as UTF-8; InputError with the byte offset otherwise."""
    regular_file(path, what)
    try:
        return Path(path).read_bytes().decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(f"{path}: not UTF-8 text (byte 0x{err.object[err.start]:02x} at "
                         f"offset {err.start}); expected {what}") from None
    except OSError as err:
        raise InputError(f"{path}: cannot read ({err.strerror})") from None


def read_json(path: str | Path, what: str) -> Any:
    """The JSON document in the regular UTF-8 file at `path` (`what` names the file's kind in
    refusals: "a plan.json written by `explore APP.yaml`")."""
    text = read_text(path, what)
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as err:
        raise InputError(f"{path}: not JSON ({' '.join(str(err).split())[:120]}); expected "
                         f"{what}") from None
