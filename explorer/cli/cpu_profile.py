"""`platform: cpu`: this machine's CPU through ONNX Runtime, measured on the spot.

`cpu_profile(app)` returns the app's measured device profile from the cache
(explorer/throughput/profile_cache.py) or measures it (deploy/profile/app_profile.py) with
live lines on stderr and stores it; `explore APP.yaml` plans with it (docs/profile.md).
The app's `threads:` is the ONNX Runtime intra-op thread count measured, the one to give
`explore run --threads`."""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Callable, TextIO

from explorer.throughput.device_profile import DeviceProfile
from explorer.throughput.profile_cache import ProfileCache, machine_key, profile_key

PLATFORM = "cpu"


@dataclass
class LivePrinter:
    """Progress lines to a stream, each with the seconds since the start; indented lines at
    most one per `every_s` (the rest dropped), so a terminal hears something at least that
    often while measuring and is not flooded by per-layer lines."""
    stream: TextIO = sys.stderr
    every_s: float = 1.0
    start: float = 0.0
    last: float = float("-inf")

    def __post_init__(self) -> None:
        self.start = time.monotonic()

    def __call__(self, line: str) -> None:
        now = time.monotonic()
        if line.startswith(" ") and now - self.last < self.every_s:
            return
        self.last = now
        print(f"[{now - self.start:5.1f} s] {line}", file=self.stream, flush=True)


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
    say = say or (LivePrinter() if not quiet else (lambda line: None))
    settings = Settings(threads=app.threads)
    machine = machine_key()
    key = profile_key(app.cnns, app.precision.name, settings.threads, settings.layout,
                      settings.steps, machine)
    warn = (lambda line: print(f"explore: warning: {line}", file=sys.stderr, flush=True))
    found = cache.get(key)
    if found is not None:
        say(f"platform cpu: measured times from {cache.path(key)}")
        return found
    with cache.lock(key, lambda s: say(f"  waiting {s:.0f} s for another run measuring "
                                       f"the same models ({cache.path(key).name})")):
        found = cache.get(key, warn)        # the run that held the lock may have stored it
        if found is not None:
            say(f"platform cpu: measured times from {cache.path(key)}")
            return found
        say(f"platform cpu: measuring {', '.join(app.cnns)} on {machine}, "
            f"{settings.threads} thread(s), once for these models (cached in {cache.folder})")
        begin = time.monotonic()
        profile = measure_app(app, settings, say, {"machine": machine})
        profile.meta["measure_s"] = round(time.monotonic() - begin, 1)
        cache.put(key, profile)
        say(f"platform cpu: measured in {profile.meta['measure_s']:.0f} s, "
            f"stored {cache.path(key)}")
    return profile
