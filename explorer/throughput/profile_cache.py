"""A cache of measured device profiles on disk, one file per key (`platform: cpu`,
docs/profile.md).

The key says what the times depend on: every CNN's model (the ONNX file's bytes, or the
layers of a synthetic model) and its layers as the app reads them (names, operators, output
shapes), the precision, the threads, the ONNX Runtime layout and steps, and the machine
(`machine_key`: architecture, CPU model, ONNX Runtime version). A changed model, a different
thread count or another machine is another key and is measured again.

Entries are written to a temporary sibling and renamed over the entry (os.replace), so a
reader sees a whole file or none; `ProfileCache.lock` (fcntl.flock on a lock file beside the
entry) lets two runs wanting the same key measure it once.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import platform
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterator

from csdf.model import CNN
from explorer.throughput.device_profile import DeviceProfile, load_profile, save_profile
from sdf3.errors import InputError

DEFAULT_DIR = Path("~/.cache/memtrade/profiles")
ENV = "MEMTRADE_CACHE"


def cache_dir() -> Path:
    """$MEMTRADE_CACHE when set (a folder: csdf/cache_env.py), else ~/.cache/memtrade/profiles."""
    from csdf.cache_env import env_cache
    return env_cache() or DEFAULT_DIR.expanduser()


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else platform.processor()."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model", "cpu model"):
                return " ".join(value.split())
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_key() -> str:
    """This machine as the times depend on it: architecture, CPU model, ONNX Runtime version."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        ort = version("onnxruntime")
    except PackageNotFoundError:
        ort = "none"
    return f"{platform.machine()}/{cpu_model()}/onnxruntime-{ort}"


def model_digest(cnn: CNN) -> str:
    """sha256 of the CNN's ONNX bytes (none for a synthetic model) and of its layers as read
    (name, operator, hyperparameters, inputs, output shape,
    parameter count), so an input shape given in the app file or
    an edited model is another digest."""
    h = hashlib.sha256()
    if cnn.source and Path(cnn.source).is_file():
        h.update(Path(cnn.source).read_bytes())
    for name in cnn.order():
        layer = cnn.layer(name)
        h.update(repr((name, layer.op, tuple(layer.output_shape), layer.param_count,
                       sorted(layer.hyper.items()), list(layer.inputs))).encode())
    h.update(repr(sorted(cnn.edges())).encode())
    return h.hexdigest()


@dataclass(frozen=True)
class ProfileKey:
    """What a measured profile depends on; `digest` names its cache entry."""
    models: tuple[tuple[str, str], ...]          # (CNN name, model_digest)
    precision: str
    threads: int
    layout: str
    steps: str
    machine: str
    code: str = ""      # digest of the code that builds and runs what was measured

    @property
    def digest(self) -> str:
        text = json.dumps([list(map(list, self.models)), self.precision, self.threads,
                           self.layout, self.steps, self.machine]
                          + ([self.code] if self.code else []))
        return hashlib.sha256(text.encode()).hexdigest()[:32]


def profile_key(cnns: dict[str, CNN], precision: str, threads: int, layout: str = "blocked",
                steps: str = "regions", machine: str | None = None, code: str = "") -> ProfileKey:
    """`code`: a digest of the code the measured step forms depend on (the caller's:
    deploy/profile/app_profile.py `code_digest`), so a profile measured by other code is
    measured again."""
    return ProfileKey(tuple((name, model_digest(cnn)) for name, cnn in cnns.items()),
                      precision, threads, layout, steps, machine or machine_key(), code)


class ProfileCache:
    """Measured profiles in `folder` (default `cache_dir()`), one `<digest>.json` per key."""

    def __init__(self, folder: str | Path | None = None):
        self.folder = Path(folder) if folder is not None else cache_dir()

    def path(self, key: ProfileKey) -> Path:
        return self.folder / f"{key.digest}.json"

    def get(self, key: ProfileKey,
            on_corrupt: Callable[[str], None] | None = None) -> DeviceProfile | None:
        """The stored profile, or None when there is none or it cannot be read (then
        `on_corrupt` gets one line saying so, and the entry is measured again)."""
        path = self.path(key)
        if not path.is_file():
            if path.exists() and on_corrupt is not None:
                on_corrupt(f"{path}: cache entry is not a file, measuring again")
            return None
        try:
            profile = load_profile(path)
        except InputError as err:
            if on_corrupt is not None:
                on_corrupt(f"{path}: unreadable cache entry, measuring again ({err})")
            return None
        if profile.meta.get("cache_key") != key.digest:
            if on_corrupt is not None:
                on_corrupt(f"{path}: cache entry for another key, measuring again")
            return None
        return profile

    def put(self, key: ProfileKey, profile: DeviceProfile,
            on_fail: Callable[[str], None] | None = None) -> Path | None:
        """Store `profile` under `key`: written whole to a temporary sibling, then renamed.
        None when it cannot be stored (the entry's name taken by a folder, a cache folder
        that cannot be written): `on_fail` hears why, and the caller keeps the profile."""
        profile = replace(profile, meta={**profile.meta, "cache_key": key.digest})
        tmp = None
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{key.digest}.", suffix=".json", dir=self.folder)
            os.close(fd)
            save_profile(profile, tmp)
            os.replace(tmp, self.path(key))
        except OSError as err:
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)
            if on_fail is not None:
                on_fail(f"{self.path(key)}: cannot store the measured profile ({err.strerror or err}); "
                        f"it serves this run only")
            return None
        except BaseException:
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)
            raise
        return self.path(key)

    @contextmanager
    def lock(self, key: ProfileKey, waiting: Callable[[float], None] | None = None,
             every_s: float = 5.0, on_fail: Callable[[str], None] | None = None) -> Iterator[None]:
        """Hold the key's lock file (fcntl.flock, exclusive) for the block; while another
        process holds it, `waiting(seconds waited)` is called every `every_s` seconds. A lock
        file that cannot be opened (a folder in its place, a read-only cache) is no reason to
        lose the work: `on_fail` hears why and the block runs unlocked."""
        import time
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            handle = open(self.folder / f"{key.digest}.lock", "a+")
        except OSError as err:        # a folder in the lock's place, a read-only cache
            if on_fail is not None:
                on_fail(f"{self.folder / (key.digest + '.lock')}: cannot lock the cache entry "
                        f"({err.strerror or err}); measuring without it")
            yield
            return
        with handle:
            start = last = time.monotonic()
            while True:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    now = time.monotonic()
                    if waiting is not None and now - last >= every_s:
                        waiting(now - start)
                        last = now
                    time.sleep(0.1)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
