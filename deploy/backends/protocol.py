"""The interface every backend implements, and the record of what it supports. A caller
holds a backend by its name only until it asks the registry (deploy/backends/registry.py)
for the object; from there on it asks the object what it supports and lets it do its work,
so adding a backend is one module and one registry entry."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol, TYPE_CHECKING

if TYPE_CHECKING:       # the records import ONNX Runtime: only the methods need them
    from deploy.runtime.manifest_records import Manifest


@dataclass(frozen=True)
class Capabilities:
    """What a backend supports.

    precisions: the plan precisions it deploys (explorer/app/model.py PRECISIONS names;
    "auto": a precision per layer, explorer/app/layer_precision.py).
    fused_tiles: whether it runs a plan's fused-tiled groups (key 'tilings').
    chain_steps: whether an int8 plan's consecutive whole layers run as one chain step
    (deploy/build/chains.py). layouts: the `explore run --layout` values its runtime takes
    (storage and kernels); empty when it chooses its own. runs_on_host_cpu: it runs on this
    host's CPU, so a plan predicted for another platform deserves a warning. profiles_here:
    `explore profile` can measure its layer times on this host. own_runner: a whole
    deployment is measured by its own runner, not by deploy/runtime/executor.py."""
    precisions: tuple[str, ...]
    fused_tiles: bool
    chain_steps: bool
    layouts: tuple[str, ...]
    runs_on_host_cpu: bool
    profiles_here: bool
    own_runner: bool


class Backend(Protocol):
    """One backend. `name` is what plans, manifests and `--backend` call it."""
    name: str
    capabilities: Capabilities

    def stored_weights(self, precision: str) -> str:
        """How a deployment of a plan at `precision` stores layer parameters: "float32",
        "float16" or "int8" (deploy/quant/stored.py Weights.kind)."""

    def add_files(self, out_dir: Path) -> None:
        """Write what the deployment folder needs besides the step models and the manifest
        (before the folder's digests are taken)."""

    def after_derive(self, out_dir: Path, manifest: Manifest) -> list[str]:
        """Its build step after `explore deploy` wrote the folder; the lines to print."""

    def process_init(self, threads: int, shared_pool: bool,
                     workspace_bytes: int) -> Callable[[], None] | None:
        """Import what its runtime loads (so it is resident before the footprint's baseline)
        and return the process's one-time initialisation the footprint runs, or None."""

    def runtime(self, dtype: str, threads: int = 0, shared_pool: bool = False,
                layout: str = "nchwc", load_apart: bool | None = None) -> Any:
        """The runtime backend deploy/runtime/executor.py runs the steps with. `load_apart`:
        do the heavy part of loading (graph optimisation) in a child process, so the
        process running the deployment never holds its transient (default: when
        `shared_pool`, a process that does nothing else)."""

    def measure(self, deploy_dir: str | Path, frames: int, seed: int, warmup: int,
                check: bool) -> dict | None:
        """A whole deployment measured by its own runner (`capabilities.own_runner`), or None:
        the executor measures it."""
