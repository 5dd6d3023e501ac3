"""SIGTERM handled as Ctrl-C is: `kill`, a container stop or a CI time-out end a command the
way an interrupt does, with one line, the partial output removed (explorer/report/outputs.py
undoes a claimed destination for any KeyboardInterrupt) and exit status 143 (128 + 15, as a
shell reports a process the signal ended) instead of 130.

While `terminating_as_interrupt` is active, SIGTERM raises `Terminated` (a KeyboardInterrupt)
in the main thread; a second SIGTERM during the clean-up is ignored so that the clean-up
finishes. Worker processes forked by the search reset SIGTERM to its default
(explorer/search/parallel.py): the parent stops them.
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator

EXIT_TERMINATED = 128 + signal.SIGTERM      # 143
EXIT_INTERRUPTED = 128 + signal.SIGINT      # 130


class Terminated(KeyboardInterrupt):
    """The process was sent SIGTERM."""


def _raise_terminated(signum, frame) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)     # let the clean-up finish
    raise Terminated()



@contextmanager
def terminating_as_interrupt() -> Iterator[None]:
    """SIGTERM raises `Terminated` for the `with` block (main thread only; elsewhere a no-op);
    the previous handler is back afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def exit_status(err: KeyboardInterrupt) -> int:
    return EXIT_TERMINATED if isinstance(err, Terminated) else EXIT_INTERRUPTED


def word(err: KeyboardInterrupt) -> str:
    return "terminated" if isinstance(err, Terminated) else "interrupted"
