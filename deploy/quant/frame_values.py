"""Frames of input checked for their values before anything runs on them: a frame holding
NaN or an infinity, or a value beyond float32's range (a float64 1e300 becomes an infinity
when the frame is cast to float32, the type every step and the reference run in), is
refused in one line naming where the frames came from and the frame's index. Used for
`explore deploy --calibration` frames (deploy/quant/calibration.py) and for the frames
`explore run --input` and `memtrade.run(inputs=...)` are given (memtrade/measuring.py).
"""
from __future__ import annotations

import numpy as np

from sdf3.errors import InputError

FLOAT32_MAX = float(np.finfo(np.float32).max)


def check_values(frames: np.ndarray, where: str, first: int = 0) -> None:
    """Refuse the first of `frames` (an array, frames on axis 0; frame i named `first + i`)
    that holds a non-finite value or one beyond float32's range."""
    frames = np.asarray(frames)
    if frames.dtype.kind not in "fc" or not frames.size:
        return
    for i, frame in enumerate(frames):
        finite = np.isfinite(frame)
        if not finite.all():
            raise InputError(f"{where}: frame {first + i} holds NaN or infinite values; expected "
                             f"finite float32 values")
        peak = float(np.abs(frame).max())
        if peak > FLOAT32_MAX:
            raise InputError(f"{where}: frame {first + i} holds {peak:.3g}, beyond float32's range "
                             f"(±{FLOAT32_MAX:.3g}); expected float32 values")
