"""`explore run --input FRAMES --output OUT.npz`: the user's frames read, their outputs written.

FRAMES is .npy (an app of one CNN: [F, N, C, H, W], or [N, C, H, W] for one frame) or .npz
(arrays by CNN name). OUT.npz holds, per model output, the outputs of every frame stacked
frames first, as memtrade.Session.run returns them; keyed by the model's output name, or
"cnn/output" for an app of several CNNs. It is claimed before the run and written through a
temporary sibling, refused when it exists unless --force. A frame holding NaN, an infinity
or a value beyond float32's range is refused naming the file and the frame
(deploy/quant/frame_values.py)."""
from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from deploy.quant.frame_values import check_values
from explorer.app.input_file import not_regular
from explorer.report.outputs import Staged, claim_file
from sdf3.errors import InputError


def read_frames(path: str | Path):
    """The frames in `path`: an array (.npy) or {CNN name: array} (.npz); one line if not."""
    path = Path(path)
    if not path.is_file():
        found = not_regular(path)
        raise InputError(f"--input {path}: " + (f"{found}, not a file" if found else "no such file")
                         + " (expected .npy or .npz frames)")
    try:
        data = np.load(path, allow_pickle=False)
        if isinstance(data, np.lib.npyio.NpzFile):
            with data:
                data = {name: data[name] for name in data.files}
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as err:
        raise InputError(f"--input {path}: not a .npy or .npz of numbers "
                         f"({' '.join(str(err).split())[:200]})") from None
    for name, array in (data.items() if isinstance(data, dict) else [("", data)]):
        if array.ndim in (4, 5):        # one frame [N, C, H, W], or frames [F, N, C, H, W]
            check_values(array if array.ndim == 5 else array[None],
                         f"--input {path}" + (f": array '{name}'" if name else ""))
    return data


def claim_output(path: str | Path, force: bool) -> Staged:
    if not str(path).endswith(".npz"):
        raise InputError(f"--output {path}: expected a .npz file name")
    return claim_file(path, force, "--output")


def output_arrays(res) -> dict[str, np.ndarray]:
    """Per model output (per CNN and output with several CNNs), every frame's output stacked."""
    several = len(res.outputs) > 1
    out = {}
    for cnn, frames in res.outputs.items():
        for i, name in enumerate(res.output_names[cnn]):
            out[f"{cnn}/{name}" if several else name] = np.stack([f[i] for f in frames])
    return out


def write_outputs(res, tmp: Path) -> None:
    with open(tmp, "wb") as fh:
        np.savez(fh, **output_arrays(res))
