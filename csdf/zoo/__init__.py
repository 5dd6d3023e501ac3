"""The built-in model zoo: real ONNX CNNs (opset 13, seeded random weights), referenced as `zoo:NAME`.

Each model is built with onnx.helper from the published architecture, so its layer shapes and
parameter count are those of the original network; the weights are random (seeded) but scaled
so activations stay O(1). Built files are cached: `model_path` builds once per builder version.
See docs/zoo.md for the published figures each model matches and the counting convention.
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import onnx

from csdf.zoo import cache
from sdf3.errors import InputError

# Bump when any builder changes: the version is part of the cached file name, so a changed
# builder rebuilds instead of reading a stale file.
VERSION = 3
DEFAULT_SEED = 0

NAMES: tuple[str, ...] = (
    "mobilenet_v2",
    "mobilenet_v1",
    "mobilenet_v1_025",
    "resnet50",
    "efficientnet_b0",
    "inception_v2",
    "densenet121",
    "densenet121_tv",
)
# Feature-extractor trunks (no classifier): the early layers a paper studies on their own.
TRUNKS: tuple[str, ...] = ("yolov2_16",)
# Small networks in the styles of TASO's evaluation (csdf/zoo/small.py), for primitive profiling.
SMALL: tuple[str, ...] = ("vgg_small", "resnet_small", "googlenet_small", "squeezenet_small")
ALL_NAMES: tuple[str, ...] = NAMES + TRUNKS + SMALL


def _builders() -> dict[str, Callable[[int], onnx.ModelProto]]:
    """Name -> builder(seed); imported lazily so `import csdf.zoo` stays cheap."""
    from csdf.zoo import densenet, efficientnet, inception, mobilenet, resnet, small, yolo

    return {
        "mobilenet_v2": mobilenet.mobilenet_v2,
        "mobilenet_v1": lambda seed: mobilenet.mobilenet_v1(seed, alpha=1.0),
        "mobilenet_v1_025": lambda seed: mobilenet.mobilenet_v1(seed, alpha=0.25),
        "resnet50": resnet.resnet50,
        "efficientnet_b0": efficientnet.efficientnet_b0,
        "inception_v2": inception.inception_v2,
        "densenet121": densenet.densenet121,
        "densenet121_tv": densenet.densenet121_tv,
        "yolov2_16": yolo.yolov2_16,
        "vgg_small": small.vgg_small,
        "resnet_small": small.resnet_small,
        "googlenet_small": small.googlenet_small,
        "squeezenet_small": small.squeezenet_small,
    }


def _check_name(name: str) -> None:
    if name not in ALL_NAMES:
        raise InputError(f"zoo:{name}: unknown zoo model; known: {', '.join(ALL_NAMES)}")


def build(name: str, seed: int = DEFAULT_SEED) -> onnx.ModelProto:
    """Build the named model in memory (no cache); same name and seed give identical bytes."""
    _check_name(name)
    return _builders()[name](seed)


def default_cache_dir() -> Path:
    """$MEMTRADE_CACHE/zoo if set, else ~/.cache/memtrade/zoo."""
    from csdf.cache_env import env_cache
    env = env_cache()
    return env / "zoo" if env is not None else Path.home() / ".cache" / "memtrade" / "zoo"


def model_path(name: str, cache_dir: Path | None = None, seed: int = DEFAULT_SEED) -> Path:
    """Path of the cached ONNX file for `name`, building it (atomically, with a digest beside
    it: csdf/zoo/cache.py) when missing or when the cached file does not verify."""
    _check_name(name)
    directory = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    path = directory / f"{name}-v{VERSION}-s{seed}.onnx"
    if cache.verifies(path):
        return path
    if path.exists() and not path.is_file():
        raise InputError(f"zoo:{name}: the cache entry {path} is not a file; remove it and run again")
    if path.exists():   # truncated, damaged, or another model saved under the name
        print(f"memtrade: zoo cache entry {path} does not match its digest; rebuilding it",
              file=sys.stderr)
    return cache.store(path, build(name, seed).SerializeToString())


__all__ = ["NAMES", "TRUNKS", "ALL_NAMES", "VERSION", "build", "model_path", "default_cache_dir"]
