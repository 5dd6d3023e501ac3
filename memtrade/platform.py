"""`platform: cpu`: this machine's CPU through ONNX Runtime, measured on the spot.

`cpu_profile(app)` returns the app's measured device profile from the cache
(explorer/throughput/profile_cache.py) or measures it (deploy/profile/app_profile.py) with
live lines on stderr and stores it; `explore APP.yaml` plans with it (docs/profile.md).
The app's `threads:` is the ONNX Runtime intra-op thread count measured, the one to give
`explore run --threads`."""
from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, replace
from typing import Callable, TextIO

from explorer.throughput.device_profile import DeviceProfile
from explorer.throughput.profile_cache import ProfileCache, machine_key, profile_key

PLATFORM = "cpu"


@dataclass
class LivePrinter:
    """Progress lines to a stream, each with the seconds since the start; indented lines at
    most one per `every_s` (the rest dropped), so a terminal is not flooded by per-layer
    lines. Used as a context manager it also says what is still running when nothing was
    printed for `quiet_s` seconds (a ladder deployment timed on a loaded machine can take
    half a minute), so no stretch of silence is longer than that."""
    stream: TextIO | None = None        # None: sys.stderr as it is when a line is printed
    every_s: float = 1.0
    quiet_s: float = 5.0
    start: float = 0.0
    last: float = float("-inf")         # any line printed
    shown: float = float("-inf")        # an indented progress line printed
    doing: str = ""
    since: float = 0.0

    def __post_init__(self) -> None:
        self.start = self.since = time.monotonic()
        self._guard = threading.Lock()
        self._done = threading.Event()

    def __call__(self, line: str) -> None:
        now = time.monotonic()
        with self._guard:
            self.doing, self.since = line.strip(), now
            if line.startswith(" "):
                if now - self.shown < self.every_s:
                    return
                self.shown = now
            self._print(line, now)

    def _print(self, line: str, now: float) -> None:
        self.last = now
        print(f"[{now - self.start:5.1f} s] {line}", file=self.stream or sys.stderr, flush=True)

    def _watch(self) -> None:
        while not self._done.wait(0.25):
            now = time.monotonic()
            with self._guard:
                if self.doing and now - self.last >= self.quiet_s:
                    self._print(f"  ... still at it, {now - self.since:.0f} s since: {self.doing}", now)

    def __enter__(self) -> "LivePrinter":
        threading.Thread(target=self._watch, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()


def platform_name(profile: DeviceProfile | None, fallback: str) -> str:
    """The plan's platform: "cpu:<machine key>" for a profile measured through ONNX Runtime
    on a machine that named itself, else the profile's name (a built-in such as jetson-tx2)."""
    machine = (profile.meta.get("machine") if profile is not None else None)
    if machine:
        return f"{PLATFORM}:{machine}"
    return profile.name if profile is not None else fallback


def this_platform() -> str:
    """This machine as a plan's platform names it."""
    return f"{PLATFORM}:{machine_key()}"


def cpu_profile(app, cache: ProfileCache | None = None, quiet: bool = False,
                say: Callable[[str], None] | None = None) -> DeviceProfile:
    """The measured profile of `app` on this CPU (threads app.threads), cached per model
    content, precision, threads, layout and machine; a run holding the key's lock measures
    while another waits for its entry."""
    from deploy.profile.app_profile import Settings, measure_app

    cache = cache if cache is not None else ProfileCache()
    if say is None and not quiet:
        with LivePrinter() as printer:
            return cpu_profile(app, cache, quiet, printer)
    say = say or (lambda line: None)
    settings = Settings(threads=app.threads)
    machine = machine_key()
    from deploy.profile.app_profile import code_digest
    key = profile_key(app.cnns, app.precision.name, settings.threads, settings.layout,
                      settings.steps, machine, code_digest())
    warn = (lambda line: print(f"explore: warning: {line}", file=sys.stderr, flush=True))
    found = cache.get(key)
    if found is not None:
        say(f"platform cpu: measured times from {cache.path(key)}")
        return found
    with cache.lock(key, lambda s: say(f"  waiting {s:.0f} s for another run measuring "
                                       f"the same models ({cache.path(key).name})"), on_fail=warn):
        found = cache.get(key, warn)        # the run that held the lock may have stored it
        if found is not None:
            say(f"platform cpu: measured times from {cache.path(key)}")
            return found
        say(f"platform cpu: measuring {', '.join(app.cnns)} on {machine}, "
            f"{settings.threads} thread(s), once for these models (cached in {cache.folder})")
        begin = time.monotonic()
        profile = measure_app(app, settings, say, {"machine": machine})
        took = round(time.monotonic() - begin, 1)
        profile = replace(profile, meta={**profile.meta, "measure_s": took})
        stored = cache.put(key, profile, warn)
        say(f"platform cpu: measured in {took:.0f} s" + (f", stored {stored}" if stored else ""))
    return profile


def plan_made_elsewhere(planned_on: str, backend: str) -> tuple[str, str] | None:
    """(the plan's platform, this machine's) when a deployment run on this machine's CPU
    carries a plan whose fps and memory were predicted for another platform; else None."""
    from deploy.backends import registry
    if not planned_on or not registry.backend(backend).capabilities.runs_on_host_cpu:
        return None
    here = this_platform()
    return None if planned_on == here else (planned_on, here)
