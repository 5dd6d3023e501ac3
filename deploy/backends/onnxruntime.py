"""ONNX Runtime on this host's CPU (deploy/ort/): deploys every precision at the plan's own
parameter precision, fused tiles and int8 chain steps, runs the steps through the executor
with ONNX Runtime sessions over arena views, and is what `explore profile` measures. Its
modules load ONNX Runtime only when a method needs it, so asking the registry stays cheap."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, TYPE_CHECKING

from deploy.backends.protocol import Capabilities
if TYPE_CHECKING:       # the records import ONNX Runtime: only the methods need them
    from deploy.runtime.manifest_records import Manifest


class OnnxRuntime:
    name = "onnxruntime"
    capabilities = Capabilities(
        precisions=("fp32", "fp16", "mixed", "int8", "auto"), fused_tiles=True, chain_steps=True,
        layouts=("nchwc", "nchw", "auto", "blocked"),       # deploy/ort/backend.py LAYOUTS
        runs_on_host_cpu=True, profiles_here=True, own_runner=False)

    def stored_weights(self, precision: str) -> str:
        """At the plan's parameter precision (deploy/quant/stored.py WEIGHT_TYPES)."""
        from deploy.quant.stored import weights_for
        return weights_for(precision)

    def add_files(self, out_dir: Path) -> None:
        return None

    def after_derive(self, out_dir: Path, manifest: Manifest) -> list[str]:
        return []       # sessions are made when the deployment is loaded

    def process_init(self, threads: int, shared_pool: bool,
                     workspace_bytes: int) -> Callable[[], None]:
        """ONNX Runtime's process-wide arena and thread pool (deploy/ort/process.py)."""
        from deploy.ort import backend, blocked  # noqa: F401  (resident before the baseline)
        from deploy.ort import process
        return lambda: process.init_runtime(threads, shared_pool, workspace_bytes)

    def runtime(self, dtype: str, threads: int = 0, shared_pool: bool = False,
                layout: str = "nchwc", load_apart: bool | None = None):
        from deploy.ort.backend import OrtBackend
        return OrtBackend(dtype, threads, shared_pool, layout, optimize_in_child=load_apart)

    def measure(self, deploy_dir: str | Path, frames: int, seed: int, warmup: int,
                check: bool) -> None:
        return None     # the executor runs its steps
