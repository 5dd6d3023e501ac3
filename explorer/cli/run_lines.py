"""The lines `explore run` prints for a measured run (memtrade.RunResult): backend and frames,
a warning when the plan was made for another machine, the bytes, the footprint and its parts
beside the plan's memory, and per CNN its fps beside the predicted, calls per frame, the
verdict and what it judged against, where its int8 scales came from and its deviation from
the fp32 model (explorer/cli/vs_fp32_lines.py)."""
from __future__ import annotations

MiB = 2 ** 20


def _mib(value: float) -> str:
    return f"{value / MiB:.1f} MiB"


def memory_lines(res) -> list[str]:
    """The footprint (peak RSS - RSS before loading), its parts, the plan's memory beside it
    (not measured), the optimising child's peak and the backend's notes."""
    m, plan = res.memory, res.plan
    lines = [f"footprint {_mib(m.footprint_bytes)} (peak RSS - RSS before loading, baseline "
             f"{_mib(m.baseline_rss_bytes)}, after the runtime's one-time init of "
             f"{_mib(m.runtime_init_bytes)})",
             "  " + ", ".join(f"{k.removesuffix('_bytes')} {_mib(v)}" for k, v in m.breakdown.items())]
    if plan.memory_bytes:
        lines.append(f"  plan (not measured): memory {_mib(plan.memory_bytes)} = parameters "
                     f"{_mib(plan.param_bytes or 0)} + buffers {_mib(plan.buffer_bytes or 0)} + "
                     f"workspace {_mib(plan.workspace_bytes or 0)}"
                     + (f" + sessions {_mib(plan.session_bytes)}" if plan.session_bytes else "")
                     + (f" + outputs {_mib(plan.output_bytes)}" if plan.output_bytes else "")
                     + f"; footprint / plan {m.footprint_bytes / plan.memory_bytes:.2f}")
    if m.load_helper_peak_rss_bytes:
        lines.append(f"  models optimised in a child process (its peak RSS "
                     f"{_mib(m.load_helper_peak_rss_bytes)}, before the run)")
    return lines + [f"  note: {n}" for n in res.notes]


def run_lines(res, no_check: bool) -> list[str]:
    from explorer.cli.vs_fp32_lines import cnn_lines, fail_lines
    from memtrade.platform import plan_made_elsewhere
    out = [f"backend {res.backend}, {res.frames} frames"]
    elsewhere = plan_made_elsewhere(res.plan.platform or "", res.backend)
    if elsewhere:
        out.append(f"warning: the plan's fps and memory were predicted for {elsewhere[0]}, not "
                   f"this machine ({elsewhere[1]}); expect the measured figures to differ")
    peak = res.memory.peak_rss_bytes if res.memory else 0
    out.append(f"arena bytes {res.arena_bytes}, parameter bytes {res.param_bytes}, scratch bytes "
               f"{res.scratch_bytes}, peak RSS {peak / MiB:.1f} MiB")
    if res.memory is not None:
        out += memory_lines(res)
    for cnn, fps in res.fps.items():
        v = res.verdicts.get(cnn)
        diff = res.max_abs_diff.get(cnn)
        diff_s = ("not checked (--no-check)" if no_check else
                  "n/a (no reference model)" if diff is None else f"{diff:.3g}")
        if v is not None and v.statistic == "rms" and v.tolerance is not None:
            diff_s += f", rms |diff| {v.max_abs_diff:.3g}"
        if v is not None and v.tolerance is not None:
            diff_s += (f" on outputs up to {v.max_abs_output:.3g} ({'rms ' if v.statistic else ''}"
                       f"tolerance {v.tolerance:.3g}, "
                       f"{v.reference_dtype} reference"
                       + (", the model is stored in fp16" if v.stored_dtype else "")
                       + f"): {v.verdict}")
        predicted = res.plan.fps.get(cnn)
        beside = f" (predicted {predicted:.1f})" if predicted else ""
        out.append(f"  {cnn}: {fps:.1f} fps{beside}, {res.calls_per_frame[cnn]} calls/frame, "
                   f"max |diff| {diff_s}")
        out += cnn_lines(res, cnn, no_check)
    return out + fail_lines(res)
