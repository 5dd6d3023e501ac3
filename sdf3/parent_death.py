"""Child processes that end with their parent, quietly.

A process killed outright (SIGKILL, the OOM killer) cannot stop its children: the search's
forked evaluation workers, the Dask scheduler and workers of `--cluster local`, the
measurement children of deploy. Left behind, they run on and print BrokenPipeError
tracebacks when they next write to the parent that is gone. On Linux a child asks the
kernel (prctl PR_SET_PDEATHSIG, through ctypes) to send it SIGKILL when its parent ends,
which ends it at once and silently; a parent that ended before the request was made is
seen by the parent id having changed. SIGPIPE is set back to its default in such a child,
so a write to a pipe whose reader is gone ends it (silently) instead of raising
BrokenPipeError where the pipe-death signal is not offered.

It lives in the lowest package, as the one error type does (sdf3/errors.py), so that every
layer that starts a child can use it.
"""
from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1              # <linux/prctl.h>
ENV = "MEMTRADE_PARENT_PID"       # set for a child started with exec (deploy's `python -m ...`)

_LIBC = None
if sys.platform.startswith("linux"):
    try:
        _LIBC = ctypes.CDLL(None, use_errno=True)     # loaded here, never in a forked child
    except OSError:
        _LIBC = None


def die_with_parent(parent_pid: int | None = None) -> bool:
    """In a child process: end (SIGKILL) when the parent ends, and quietly on a broken pipe.
    `parent_pid`: the parent's id as known before the child started (default $ENV, set by
    `child_env`); when the parent is already gone the child exits at once. Whether the
    kernel took the request (False off Linux)."""
    if parent_pid is None and os.environ.get(ENV, "").isdigit():
        parent_pid = int(os.environ[ENV])
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    armed = _LIBC is not None and _LIBC.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(0)                   # the parent ended before the request: end as it would
    return armed


def main(argv: list[str]) -> None:
    """`python -m sdf3.parent_death MODULE ARGS...`: run MODULE as `python -m MODULE ARGS...`
    would, ending with the parent (for children whose code is not memtrade's: Dask's)."""
    import runpy
    die_with_parent()
    sys.argv = argv
    runpy.run_module(argv[0], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
