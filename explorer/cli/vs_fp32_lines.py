"""The lines under a CNN's verdict in `explore run`: what the verdict judged against, a note
when that reference's outputs are all zero on the frames run (the verdict then tests
nothing), where an int8 deployment's scales came from, and the deviation from the fp32 model
(memtrade.RunResult `vs_fp32`, deploy/run/vs_fp32.py); and the FAIL lines, each naming the
reference the failing CNNs were judged against."""
from __future__ import annotations

import math


def _db(value: float) -> str:
    return f"{value:.1f} dB" if math.isfinite(value) else ("inf dB (identical)" if value > 0 else "-inf dB")


def cnn_lines(res, cnn: str, no_check: bool) -> list[str]:
    out = []
    against = res.references.get(cnn)
    if against and not no_check:
        out.append(f"    judged against {against}")
    v = res.verdicts.get(cnn)
    if v is not None and v.max_abs_output == 0:
        out.append("    note: the reference's outputs are all 0 on these frames, so the verdict "
                   "tests nothing; run it on real input (--input FRAMES)")
    origin = res.calibration.get(cnn)
    if origin is not None:
        out.append(f"    int8 scales from {origin.words()}")
    dev = res.vs_fp32.get(cnn)
    if dev is None:
        return out
    if not dev.available:
        return out + [f"    vs fp32: unavailable: {dev.reason}"]
    for o in dev.outputs:
        agree = "" if o.argmax_agreement is None else f", argmax agreement {o.argmax_agreement:.1%}"
        guess = "" if dev.estimate_db is None else f" (the plan's estimate {_db(dev.estimate_db)})"
        out.append(f"    vs fp32 ({dev.model}, {dev.frames} frame{'s' if dev.frames != 1 else ''}) {o.output}: SQNR {_db(o.sqnr_db)}{guess}, "
                   f"cosine {o.cosine:.4f}{agree}, max |diff| {o.max_abs_diff:.3g}")
    return out


SHORT = {"float32": "the unmodified model", "float16": "the fp16 reference", "int8": "the int8 reference"}


def fail_lines(res) -> list[str]:
    """One line per kind of reference that some CNN's outputs differ from (exit 4)."""
    bad: dict[str, list[str]] = {}
    for cnn, v in res.verdicts.items():
        if v.verdict == "FAIL":
            bad.setdefault(SHORT.get(v.reference_dtype or "", "their reference"), []).append(cnn)
    return [f"FAIL: outputs of {', '.join(cnns)} differ from {ref} (exit 4)" for ref, cnns in bad.items()]
