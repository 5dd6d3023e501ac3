"""`memtrade.profile`: an application's layers measured on this machine through ONNX Runtime
(deploy/profile/app_profile.py): each layer whole and per part size, in context, its
workspace and, with `primitives`, every conv primitive; the device profile the search plans
with (`platform:` a profile file, docs/profile.md)."""
from __future__ import annotations

from typing import Callable

from explorer.app.model import Application
from explorer.throughput.device_profile import DeviceProfile
from sdf3.errors import InputError


def profile(app: Application, *, threads: int = 0, repeats: int = 20, layout: str = "blocked",
            steps: str = "regions", frames: int = 10, rounds: int = 1, primitives: bool = False,
            say: Callable[[str], None] | None = None) -> DeviceProfile:
    """The measured device profile of `app` (`say` hears what is being measured)."""
    from deploy.profile.app_profile import Settings, measure_app, onnxruntime_dtype
    from explorer.throughput.profile_cache import machine_key
    onnxruntime_dtype(app, str(app.path or app.name))
    for key, value in (("--frames", frames), ("--rounds", rounds), ("--repeats", repeats)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(f"{key}: expected a positive number, got {value}")
    settings = Settings(threads, repeats, layout, steps, frames, rounds, primitives)
    return measure_app(app, settings, say or (lambda line: None), {"machine": machine_key()})
