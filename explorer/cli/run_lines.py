"""The lines `explore run` prints for a measured run (memtrade.RunResult): backend and frames,
a warning when the plan was made for another machine, the bytes and the footprint beside the
plan's, and per CNN its fps beside the predicted, calls per frame and the verdict."""
from __future__ import annotations


def run_lines(res, no_check: bool) -> list[str]:
    from deploy.runtime.footprint import describe
    from memtrade.platform import plan_made_elsewhere
    data = res.to_dict()
    out = [f"backend {res.backend}, {res.frames} frames"]
    elsewhere = plan_made_elsewhere(data.get("plan_platform") or "", res.backend)
    if elsewhere:
        out.append(f"warning: the plan's fps and memory were predicted for {elsewhere[0]}, not "
                   f"this machine ({elsewhere[1]}); expect the measured figures to differ")
    out.append(f"arena bytes {res.arena_bytes}, parameter bytes {res.param_bytes}, scratch bytes "
               f"{data['scratch_bytes']}, peak RSS {(res.peak_rss_bytes or 0) / 2**20:.1f} MiB")
    if res.footprint_bytes is not None:
        out += describe(data)
    for cnn, fps in res.fps.items():
        v = res.verdicts.get(cnn)
        diff = data["max_abs_diff"].get(cnn)
        diff_s = ("not checked (--no-check)" if no_check else
                  "n/a (no reference model)" if diff is None else f"{diff:.3g}")
        if v is not None and v.tolerance is not None:
            diff_s += (f" on outputs up to {v.max_abs_output:.3g} (tolerance {v.tolerance:.3g}, "
                       f"{v.reference_dtype} reference"
                       + (", the model is stored in fp16" if v.stored_dtype else "")
                       + f"): {v.verdict}")
        predicted = res.plan_fps.get(cnn)
        beside = f" (predicted {predicted:.1f})" if predicted else ""
        out.append(f"  {cnn}: {fps:.1f} fps{beside}, {res.calls_per_frame[cnn]} calls/frame, "
                   f"max |diff| {diff_s}")
    bad = [c for c, v in res.verdicts.items() if v.verdict == "FAIL"]
    if bad:
        out.append(f"FAIL: outputs of {', '.join(bad)} differ from the unmodified model (exit 4)")
    return out
