"""What `explore run` leaves in the deployment's folder: run.json (the figures `--json`
prints, and the command's settings under `settings`) and run.html, a self-contained page
(no scripts, inline SVG) with the footprint by part beside the plan's memory by part on
one scale, and a table per CNN of fps predicted and measured, calls per frame and verdict.

Both files are memtrade's own output, so an earlier run's are replaced; each is written to
a temporary sibling and renamed over the file (os.replace), so a run stopped while writing
leaves the old file or the new one, never half of one, and no temporary file.
"""
from __future__ import annotations

import contextlib
import html
import json
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path

MiB = 2 ** 20
RUN_JSON = "run.json"
RUN_HTML = "run.html"

# the footprint's breakdown (deploy/runtime/footprint.py) and the plan's memory by part
# (the manifest's plan_* figures), in drawing order, with a label and a colour each
MEASURED_PARTS = (("weights_bytes", "weights", "#4e79a7"), ("arena_bytes", "arena", "#f28e2b"),
                  ("scratch_bytes", "scratch", "#76b7b2"),
                  ("workspace_bytes", "workspace", "#e15759"),
                  ("sessions_other_bytes", "sessions/other", "#59a14f"),
                  ("load_excess_bytes", "load excess", "#bab0ac"))
PLAN_PARTS = (("plan_param_bytes", "params", "#4e79a7"), ("plan_buffer_bytes", "buffers", "#f28e2b"),
              ("plan_workspace_bytes", "workspace", "#e15759"),
              ("plan_session_bytes", "sessions", "#59a14f"),
              ("plan_output_bytes", "outputs", "#9c755f"))
BAR_PX = 640.0          # the longer of the two bars
LABEL_PX = 90.0
BAR_H = 24.0


def size(nbytes: int | float) -> str:
    """Bytes as a reader wants them: MiB from 1 MiB up, KiB from 1 KiB up, else B."""
    if abs(nbytes) >= MiB:
        return f"{nbytes / MiB:.1f} MiB"
    if abs(nbytes) >= 1024:
        return f"{nbytes / 1024:.1f} KiB"
    return f"{int(nbytes)} B"


def run_record(result: dict, settings: dict) -> dict:
    """run.json's content: the result as `--json` prints it, the settings beside it with
    the date (UTC, ISO 8601) added."""
    record = dict(result)
    record["settings"] = {**settings, "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    return record


def write_run_files(folder: str | Path, result: dict, settings: dict) -> str | None:
    """Write folder/run.json, then folder/run.html. Returns None, or, when the folder cannot
    be written, one line naming the files not written and why (no temporary file and no
    half file is left). An interruption (KeyboardInterrupt, SystemExit) propagates."""
    folder = Path(folder)
    record = run_record(result, settings)
    names = [RUN_JSON, RUN_HTML]
    for k, name in enumerate(names):
        try:
            write_atomic(folder / name, json.dumps(record, indent=1) + "\n" if name == RUN_JSON
                         else run_html(record))
        except OSError as err:
            return f"{folder}: {' and '.join(names[k:])} not written ({err.strerror or err})"
    return None


def write_atomic(path: Path, text: str) -> None:
    """`text` into `path` through a temporary sibling renamed over it; removed on any
    error or interruption (KeyboardInterrupt, SystemExit included)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.chmod(tmp, 0o666 & ~current_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def bar_parts(record: dict) -> tuple[list[tuple[str, str, str, int]], list[tuple[str, str, str, int]]]:
    """(measured, plan): (key, label, colour, bytes) per part present in the record."""
    breakdown = record.get("breakdown") or {}
    measured = [(k, label, colour, int(breakdown[k])) for k, label, colour in MEASURED_PARTS
                if k in breakdown]
    known = {k for k, _, _ in MEASURED_PARTS}
    measured += [(k, k.removesuffix("_bytes"), "#bbbbbb", int(v)) for k, v in breakdown.items()
                 if k not in known]
    plan = [(k, label, colour, int(record[k])) for k, label, colour in PLAN_PARTS
            if record.get(k) is not None]
    return measured, plan


def scale_of(measured: list, plan: list) -> float:
    """Pixels per byte, one scale for both bars: the longer bar (positive parts) is BAR_PX."""
    longest = max(sum(max(0, b) for *_, b in measured), sum(max(0, b) for *_, b in plan), 1)
    return BAR_PX / longest


def bar_svg(name: str, title: str, parts: list, y: float, scale: float) -> str:
    """One stacked bar: a rectangle per part, data-part its key and data-bytes its bytes,
    width bytes x scale. A negative part (sessions/other when loading kept less than the
    counted parts) is an outlined rectangle of its size laid back from the bar's end, so the
    bar ends, net, at the total."""
    x = LABEL_PX
    rects = []
    for key, label, colour, nbytes in parts:
        if nbytes < 0:
            continue
        width = nbytes * scale
        rects.append(rect(key, label, nbytes, x, y, width, f'fill="{colour}"'))
        x += width
    for key, label, colour, nbytes in parts:
        if nbytes >= 0:
            continue
        width = -nbytes * scale
        rects.append(rect(key, label, nbytes, x - width, y + BAR_H * 0.25, width,
                          f'fill="none" stroke="{colour}" stroke-dasharray="3 2" class="negative"',
                          BAR_H * 0.5))
    total = sum(b for *_, b in parts)
    return (f'<g data-bar="{name}"><text x="0" y="{y + BAR_H * 0.7}" font-size="12">'
            f'{html.escape(title)}</text>{"".join(rects)}'
            f'<text x="{LABEL_PX + max(total, 0) * scale + 6}" y="{y + BAR_H * 0.7}" '
            f'font-size="12">{size(total)}</text></g>')


def rect(key: str, label: str, nbytes: int, x: float, y: float, width: float, style: str,
         height: float = BAR_H) -> str:
    """Coordinates in full float precision (repr): widths stay proportional to bytes."""
    return (f'<rect data-part="{key}" data-bytes="{nbytes}" x="{x!r}" y="{y!r}" '
            f'width="{width!r}" height="{height!r}" {style}>'
            f'<title>{html.escape(label)}: {size(nbytes)} ({nbytes} B)</title></rect>')


def memory_svg(record: dict) -> str:
    """The footprint by part above the plan's memory by part, on one scale."""
    measured, plan = bar_parts(record)
    scale = scale_of(measured, plan)
    bars = [bar_svg("measured", "footprint", measured, 4.0, scale)]
    if plan:
        bars.append(bar_svg("plan", "plan", plan, 8.0 + BAR_H, scale))
    height = 12.0 + BAR_H * len(bars)
    width = LABEL_PX + BAR_PX + 80
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="memory" width="{width:g}" '
            f'height="{height:g}" viewBox="0 0 {width:g} {height:g}">{"".join(bars)}</svg>')


def legend(parts: list) -> str:
    return " ".join(f'<span class="key"><span class="swatch" style="background:{colour}"></span>'
                    f"{html.escape(label)} {size(nbytes)}</span>"
                    for _, label, colour, nbytes in parts)


def cnn_rows(record: dict) -> str:
    """One row per CNN: fps predicted and measured, calls per frame, max |diff|,
    tolerance, verdict, and the least SQNR against the fp32 model (fp16, mixed, int8)."""
    esc = html.escape
    predicted = record.get("plan_fps") or {}
    verdicts = record.get("verdict") or {}
    checked = (record.get("settings") or {}).get("check", True)
    num = lambda v, fmt: "&ndash;" if v is None else format(v, fmt)  # noqa: E731
    rows = []
    for cnn, fps in (record.get("fps") or {}).items():
        v = verdicts.get(cnn, {})
        verdict = v.get("verdict") or ("not checked" if not checked else "n/a")
        rows.append(f'<tr data-cnn="{esc(cnn)}"><td class="name">{esc(cnn)}</td>'
                    f"<td>{num(predicted.get(cnn), '.1f')}</td><td>{num(fps, '.1f')}</td>"
                    f"<td>{esc(str((record.get('calls_per_frame') or {}).get(cnn, '')))}</td>"
                    f"<td>{num((record.get('max_abs_diff') or {}).get(cnn), '.3g')}</td>"
                    f"<td>{num(v.get('tolerance'), '.3g')}</td>"
                    f'<td class="verdict {esc(verdict.replace(" ", "-"))}">{esc(verdict)}</td>'
                    f"<td>{esc(vs_fp32_cell((record.get('vs_fp32') or {}).get(cnn)))}</td></tr>")
    return "".join(rows)


def vs_fp32_cell(dev: dict | None) -> str:
    """The least SQNR over a CNN's outputs against the fp32 model (docs/run.md), or why none."""
    if not dev:
        return "\u2013"
    if not dev.get("available"):
        return "unavailable"
    outputs = dev.get("outputs") or []
    if any(o.get("sqnr_db") is None and o.get("max_abs_diff") for o in outputs):
        return "-inf dB"           # an all-zero fp32 output the deployment does not match
    finite = [o["sqnr_db"] for o in outputs if o.get("sqnr_db") is not None]
    return f"{min(finite):.1f} dB" if finite else "identical" if outputs else "\u2013"


def run_html(record: dict) -> str:
    """The page for a run.json record (see the module docstring)."""
    esc = html.escape
    measured, plan = bar_parts(record)
    settings = record.get("settings") or {}
    footprint = record.get("footprint_bytes")
    plan_mem = record.get("plan_memory_bytes")
    ratio = (f"; footprint / plan {footprint / plan_mem:.2f}" if footprint is not None and plan_mem
             else "")
    where = record.get("plan_platform")
    platform_note = (f"<p>The plan's fps and memory were predicted for {esc(where)}; this run was "
                     f"measured on {esc(str(settings.get('machine', '?')))}.</p>" if where else "")
    setting_text = ", ".join(f"{esc(str(k))} {esc(str(v))}" for k, v in settings.items())
    notes = "".join(f"<li>{esc(str(n))}</li>" for n in record.get("notes") or [])
    mem_line = (f"Footprint {size(footprint)} (peak RSS - RSS before loading)"
                if footprint is not None else "No footprint measured")
    plan_line = f", plan {size(plan_mem)} (not measured){ratio}" if plan_mem else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>explore run: {esc(str(record.get('backend', '')))}</title>
<style>
body {{ font-family: sans-serif; margin: 2em; max-width: 70em; }}
table {{ border-collapse: collapse; font-size: 0.9em; }}
td, th {{ border: 1px solid #ccc; padding: 2px 6px; text-align: right; }}
td.name {{ text-align: left; }}
td.FAIL {{ background: #f8c4c4; font-weight: bold; }}
td.PASS {{ background: #d4efd0; }}
span.key {{ margin-right: 1.2em; font-size: 0.85em; white-space: nowrap; }}
span.swatch {{ display: inline-block; width: 0.9em; height: 0.9em; margin-right: 0.3em;
  vertical-align: middle; }}
svg {{ max-width: 100%; height: auto; }}
</style></head><body>
<h1>explore run</h1>
<p>{record.get('frames', '?')} frames on {esc(str(record.get('backend', '?')))}; settings: {setting_text}.</p>
{platform_note}
<h2>Memory by part</h2>
<p>{mem_line}{plan_line}. Both bars on one scale; a dashed outline is a part that came out
negative (loading kept less than the parts counted), laid back from the bar's end.</p>
<figure>{memory_svg(record)}</figure>
<p>footprint: {legend(measured)}</p>
<p>plan: {legend(plan) or "no plan figures in the manifest"}</p>
<h2>Per CNN</h2>
<table><tr><th>CNN</th><th>fps predicted</th><th>fps measured</th><th>calls/frame</th>
<th>max |diff|</th><th>tolerance</th><th>verdict</th><th>SQNR vs fp32</th></tr>
{cnn_rows(record)}</table>
<ul>{notes}</ul>
</body></html>
"""
