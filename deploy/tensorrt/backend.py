"""TensorRT backend: engines built from the same ONNX step models, run by the standalone
board runner (deploy/tensorrt/board_runner.py and its trt_*.py modules, RUNNER_FILES), which
must work on a Jetson TX2 under Python 3.6 with TensorRT 8.2 and so cannot import this
package. This module only connects `explore deploy` and `explore run --backend tensorrt` on a
machine with a GPU to that runner, and copies the runner into a deployment."""
from __future__ import annotations

import shutil
from pathlib import Path

from deploy.tensorrt import board_runner
from sdf3.errors import InputError

# the standalone runner: the script and the modules it imports, all copied flat into DIR
RUNNER_FILES = ("board_runner.py", "trt_cuda.py", "trt_manifest.py", "trt_engines.py", "trt_board.py",
                "trt_measure.py")


def available() -> bool:
    """True when the tensorrt package and the CUDA runtime can be loaded here."""
    if board_runner.trt is None:
        return False
    try:
        board_runner.Cuda()
    except (RuntimeError, OSError):
        return False
    return True


def copy_runner(out_dir: str | Path) -> Path:
    """Put the standalone runner (every file of RUNNER_FILES) next to the deployment, so DIR is
    all the board needs; the path of the copied board_runner.py."""
    here = Path(board_runner.__file__).parent
    for name in RUNNER_FILES:
        shutil.copyfile(here / name, Path(out_dir) / name)
    return Path(out_dir) / "board_runner.py"


def build_engines(out_dir: str | Path, manifest) -> int:
    """Engines for every step model of `manifest` (deploy/runtime/manifest_records.Manifest;
    the runner reads its JSON form into the runner's own records, trt_manifest.py)."""
    return board_runner.build_all(str(out_dir), board_runner.read_manifest(manifest.to_dict()))


def measure(deploy_dir: str | Path, frames: int, seed: int, warmup: int, check: bool) -> dict:
    if not available():
        raise InputError("--backend tensorrt: needs the tensorrt package and an NVIDIA GPU with "
                         "the CUDA runtime; neither is here (use --backend onnxruntime)")
    board_runner.build_all(str(deploy_dir))
    return board_runner.measure(str(deploy_dir), frames, seed, warmup, check)
