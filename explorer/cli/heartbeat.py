"""No command is silent for long on a terminal: while a command runs with its stderr on a
terminal, a line saying it is still at work follows every `SILENCE_S` seconds in which it
printed nothing (loading the step models of a large network, writing a deployment, the
outputs of a search). The stages that know what they are doing say so themselves (the
search's progress, `explore profile`'s and `explore run`'s lines); this covers the rest.
Off a terminal (a log, a pipe, a test) it does nothing, so output stays what the command
prints.
"""
from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager
from typing import Iterator, TextIO

SILENCE_S = 8.0


class Watched:
    """A text stream that notes when it was last written to."""

    def __init__(self, stream: TextIO, clock: "Heartbeat"):
        self._stream, self._clock = stream, clock

    def write(self, text: str) -> int:
        self._clock.last = time.monotonic()
        return self._stream.write(text)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


class Heartbeat:
    """The watcher: `last` is when anything was last printed."""

    def __init__(self, what: str, stream: TextIO, silence_s: float = SILENCE_S):
        self.what, self.stream, self.silence_s = what, stream, silence_s
        self.start = self.last = time.monotonic()
        self._done = threading.Event()

    def watch(self) -> None:
        while not self._done.wait(0.5):
            now = time.monotonic()
            if now - self.last >= self.silence_s:
                self.last = now
                print(f"{self.what}: still working ({now - self.start:.0f} s)",
                      file=self.stream, flush=True)

    def stop(self) -> None:
        self._done.set()


@contextmanager
def heartbeat(what: str) -> Iterator[None]:
    """For the block: on a terminal, a line every SILENCE_S seconds of silence."""
    if not sys.stderr.isatty():
        yield
        return
    out, err = sys.stdout, sys.stderr
    beat = Heartbeat(what, err)
    sys.stdout, sys.stderr = Watched(out, beat), Watched(err, beat)
    thread = threading.Thread(target=beat.watch, daemon=True)
    thread.start()
    try:
        yield
    finally:
        beat.stop()
        thread.join(timeout=2)
        sys.stdout, sys.stderr = out, err
