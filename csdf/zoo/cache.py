"""The zoo's file cache: entries written atomically, each with a SHA-256 digest beside it,
verified before use, so a truncated, damaged or swapped file is rebuilt instead of used.

`<model>.onnx` and `<model>.onnx.sha256` (the hex digest of the bytes written) are each
replaced atomically (temporary file in the same directory, then os.replace). An entry whose
digest file is missing or does not match its bytes does not verify. The digest guards against
accidents (a killed writer, a full disk, a different model copied over the name), not against
someone who rewrites both files.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

CHUNK = 1 << 20
_verified: dict[Path, tuple[int, int, int]] = {}   # path -> (inode, size, mtime_ns) checked


def digest_path(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            h.update(block)
    return h.hexdigest()


def _stamp(path: Path) -> tuple[int, int, int]:
    st = path.stat()
    return st.st_ino, st.st_size, st.st_mtime_ns


def verifies(path: Path) -> bool:
    """True when `path` exists and its bytes have the digest stored beside it (each file is
    hashed once per process while it stays unchanged)."""
    try:
        stamp = _stamp(path)
        if _verified.get(path) == stamp:
            return True
        want = digest_path(path).read_text().split()[0]
        ok = sha256_file(path) == want
    except (OSError, IndexError, UnicodeDecodeError):
        return False
    if ok:
        _verified[path] = stamp
    return ok


def _replace(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; the cache is shared by the user's tools
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def store(path: Path, data: bytes) -> Path:
    """Write `data` to `path` and its digest beside it, each atomically. Two processes
    storing at once each replace complete files with equal ones (builds are deterministic)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _replace(path, data)
    _replace(digest_path(path), f"{hashlib.sha256(data).hexdigest()}  {path.name}\n".encode())
    _verified[path] = _stamp(path)
    return path
