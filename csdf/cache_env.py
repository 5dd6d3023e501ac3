"""$MEMTRADE_CACHE: the folder memtrade keeps its caches under (zoo models in its zoo/,
measured device profiles in it), checked before either cache uses it: a path that exists
and is not a folder (a regular file, a FIFO) is refused in one line, instead of each cache
failing on it later with an operating-system error, after the work it was to keep."""
from __future__ import annotations

import os
from pathlib import Path

from sdf3.errors import InputError

ENV = "MEMTRADE_CACHE"


def env_cache() -> Path | None:
    """$MEMTRADE_CACHE (user folder expanded) when set, None when not; InputError when it
    names something that is not a folder."""
    value = os.environ.get(ENV)
    if not value:
        return None
    path = Path(value).expanduser()
    if path.exists() and not path.is_dir():
        from stat import S_ISFIFO
        what = "a FIFO" if S_ISFIFO(path.stat().st_mode) else "a file"
        raise InputError(f"{ENV}={value}: expected a folder for memtrade's caches, found {what}; "
                         f"unset it or name a folder")
    return path
