"""TensorRT on the board (deploy/tensorrt/): the standalone board runner builds fp32/fp16
engines from the step models (parameters kept fp32: TensorRT converts them at the precision
it builds with) and runs layer and region steps, so int8 plans and fused tiles stay ONNX
Runtime's. Its layer profiles are measured on the board, and a deployment is measured by the
runner itself, not by the executor. deploy/tensorrt loads only when a method needs it."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from deploy.backends.protocol import Capabilities
if TYPE_CHECKING:       # the records import ONNX Runtime: only the methods need them
    from deploy.runtime.manifest_records import Manifest
from sdf3.errors import InputError

NOT_HERE = ("tensorrt is not installed here: engines will be built on the target by "
            "`python3 board_runner.py build DIR` (deploy/tensorrt/board_runner.py and its "
            "trt_*.py modules, copied into DIR)")


class TensorRT:
    name = "tensorrt"
    capabilities = Capabilities(
        precisions=("fp32", "fp16", "mixed"), fused_tiles=False, chain_steps=False,
        layouts=(), runs_on_host_cpu=False, profiles_here=False, own_runner=True)

    def stored_weights(self, precision: str) -> str:
        return "float32"

    def add_files(self, out_dir: Path) -> None:
        """The board runner (every file of deploy/tensorrt/backend.py RUNNER_FILES)."""
        from deploy.tensorrt.backend import copy_runner
        copy_runner(out_dir)

    def after_derive(self, out_dir: Path, manifest: Manifest) -> list[str]:
        """The engines, built here when TensorRT and a GPU are; else the board builds them."""
        from deploy.tensorrt import backend
        if not backend.available():
            return [NOT_HERE]
        return [f"built {backend.build_engines(out_dir, manifest)} TensorRT engines"]

    def process_init(self, threads: int, shared_pool: bool, workspace_bytes: int) -> None:
        return None

    def runtime(self, dtype: str, threads: int = 0, shared_pool: bool = False,
                layout: str = "nchwc", load_apart: bool | None = None):
        raise InputError("--backend tensorrt: its steps run in the board runner "
                         "(deploy/tensorrt/board_runner.py), not in the executor")

    def measure(self, deploy_dir: str | Path, frames: int, seed: int, warmup: int,
                check: bool) -> dict:
        from deploy.tensorrt import backend
        return backend.measure(deploy_dir, frames, seed, warmup, check)
