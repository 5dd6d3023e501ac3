"""The default search's time budget on real networks: for each app, `explore APP --mem 0`
with the default settings (`--effort auto`, its 100 s budget) and the same run with
`--effort full` (no budget), each in its own process; records the wall seconds, the
`stages ...` line explore prints at the end, the least memory of each run's front
(pareto.json), the ratio default / full, and /proc/loadavg before and after each run.
Prints a markdown table.

The networks are exported by the user (torch, torchvision and timm are never needed by
the project), e.g. with a separate virtual environment:

    for m in timm:ghostnet_100 timm:mixnet_s googlenet efficientnet_b3; do
        /path/to/venv-with-torch/bin/python benchmarks/export_torchvision.py --model $m \\
            --exporter torchscript --opset 17 --out /work/models/${m#timm:}.onnx
    done

with one app file per network beside them (`cnns: [{name: NET, model: NET.onnx}]`), then

    PYTHONPATH=$PWD python benchmarks/search_budget.py /work/models/ghostnet_100.yaml \\
        /work/models/mixnet_s.yaml /work/models/googlenet.yaml /work/models/efficientnet_b3.yaml

PaddleOCR's networks (PP-OCRv4 detection at 640x640 alone, and the three-CNN OCR app:
detection, PP-OCRv4 recognition at 48x320 and the mobile v2.0 direction classifier at
48x192) are built as app files in a temporary folder from the ONNX files of `--ocr DIR`:

    PYTHONPATH=$PWD python benchmarks/search_budget.py --ocr /work/models --busy 4 --only default

`--busy N` starts N busy processes (`python -c "while True: pass"`) before each run and
ends them after it, so the run competes for the cores as on a loaded machine.
`--idle L` waits (polling every 20 s, at most `--wait` seconds) until the 1-minute load
average is below L before each run; `--cap S` stops a run after S seconds (reported as
not finished); `--full-limit S` gives the `--effort full` runs `--time-limit S` instead, so
one that would pass the cap ends with the front it has so far; `--only default|full` runs
one side alone; `--json F` writes the rows, `--rows F ...` merges earlier ones into the
table.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MIB = 1024 * 1024


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def wait_idle(below: float | None, most_s: float) -> str:
    """The load average once its 1-minute figure is below `below` (or `most_s` passed)."""
    end = time.monotonic() + most_s
    while below is not None and float(loadavg().split()[0]) >= below and time.monotonic() < end:
        time.sleep(20)
    return loadavg()


def layers(app: Path) -> int | None:
    """The layers `explore info` counts in the app's first CNN."""
    proc = subprocess.run([sys.executable, "-m", "explorer.cli.main", "info", str(app)],
                          capture_output=True, text=True, cwd=ROOT)
    for line in proc.stdout.splitlines():
        cells = [c.strip() for c in line.replace("┃", "│").split("│") if c.strip()]
        if len(cells) > 2 and cells[1].isdigit():
            return int(cells[1])
    return None


OCR = {
    "ppocr_det": [("det", "ch_PP-OCRv4_det_infer.onnx", [1, 3, 640, 640])],
    "ppocr_3cnn": [("det", "ch_PP-OCRv4_det_infer.onnx", [1, 3, 640, 640]),
                   ("rec", "ch_PP-OCRv4_rec_infer.onnx", [1, 3, 48, 320]),
                   ("cls", "ch_ppocr_mobile_v2.0_cls_infer.onnx", [1, 3, 48, 192])],
}


def ocr_apps(models: Path, folder: Path) -> list[Path]:
    """The OCR app files (OCR), written into `folder`, models from `models`."""
    out = []
    for name, cnns in OCR.items():
        lines = [f"name: {name}", "platform: jetson-tx2", "cnns:"]
        for cnn, model, shape in cnns:
            lines += [f"  - name: {cnn}", f"    model: {(models / model).resolve()}",
                      f"    input_shape: {shape}"]
        path = folder / f"{name}.yaml"
        path.write_text("\n".join(lines) + "\n")
        out.append(path)
    return out


def busy(n: int) -> list[subprocess.Popen]:
    """`n` processes that keep a core busy each."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def run(app: Path, effort: str, out: Path, cap: float, limit: float | None = None,
        competing: int = 0) -> dict:
    """One `explore APP --mem 0` run in its own process: wall seconds, stages line, least
    memory; `limit`: its `--time-limit`; `competing`: busy processes beside it."""
    argv = [sys.executable, "-m", "explorer.cli.main", str(app), "--mem", "0",
            "--out", str(out), "--force"]
    if effort == "full":
        argv += ["--effort", "full"]
    if limit is not None:
        argv += ["--time-limit", str(limit)]
    hogs = busy(competing)
    row: dict = {"load_before": loadavg(), "busy": competing}
    start = time.perf_counter()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=cap, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return row | {"finished": False, "wall": cap, "load_after": loadavg()}
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    row |= {"wall": time.perf_counter() - start, "load_after": loadavg()}
    if proc.returncode not in (0, 3):
        return row | {"finished": False,
                      "error": (proc.stderr.strip().splitlines() or ["?"])[-1]}
    stages = [ln.strip() for ln in proc.stdout.splitlines() if ln.strip().startswith("stages")]
    front = json.loads((out / "pareto.json").read_text())
    plan = json.loads((out / "plan.json").read_text())
    return row | {"finished": True, "stages": stages[-1] if stages else "",
                  "least": min(p["memory_bytes"] for p in front["points"]),
                  "plan": plan.get("memory_bytes"),
                  "evaluations": front.get("evaluations"), "unique": front.get("unique"),
                  "effort": front.get("effort"), "stopped": front.get("stopped_on_time"),
                  "budget": front.get("budget")}


def mib(value) -> str:
    return f"{value / MIB:.2f}" if isinstance(value, (int, float)) else "-"


def wall(r: dict) -> str:
    if not r:
        return "-"
    if not r.get("finished"):
        return f"{r['wall']:.1f} (not finished)"
    return f"{r['wall']:.1f}" + (f" (stopped on time at {r['stopped']})" if r.get("stopped") else "")


def merged(paths: list[Path]) -> list[dict]:
    """The rows of earlier runs, one per app, the later file's run of a side replacing the earlier's."""
    rows: dict[str, dict] = {}
    for path in paths:
        for row in json.loads(path.read_text()):
            rows.setdefault(row["app"], {}).update(row)
    return list(rows.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("apps", nargs="*", type=Path,
                        help="app files, one network each (none: the table of --rows alone)")
    parser.add_argument("--cap", type=float, default=900.0,
                        help="seconds before a run is stopped (default 900)")
    parser.add_argument("--idle", type=float, help="wait for load1 below this before each run")
    parser.add_argument("--wait", type=float, default=300.0, help="most seconds to wait for it")
    parser.add_argument("--only", choices=["default", "full"])
    parser.add_argument("--full-limit", type=float,
                        help="--time-limit for the --effort full runs: one that would pass "
                             "--cap ends with the front it has (marked 'stopped on time')")
    parser.add_argument("--ocr", type=Path, metavar="DIR",
                        help="also run PaddleOCR's detection alone and the three-CNN OCR app, "
                             "their ONNX files in DIR")
    parser.add_argument("--busy", type=int, default=0,
                        help="busy processes competing for the cores during each run")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--rows", type=Path, nargs="*", default=[],
                        help="rows of earlier runs (--json files) to merge into the table, "
                             "by app; runs of this call replace theirs")
    args = parser.parse_args()
    rows = merged(args.rows)
    with tempfile.TemporaryDirectory() as tmp:
        apps = list(args.apps) + (ocr_apps(args.ocr, Path(tmp)) if args.ocr else [])
        for app in apps:
            row = next((r for r in rows if r["app"] == app.stem), None)
            if row is None:
                row = {"app": app.stem, "layers": layers(app)}
                rows.append(row)
            for effort in ("default", "full"):
                if args.only and args.only != effort:
                    continue
                wait_idle(args.idle, args.wait)
                row[effort] = run(app.resolve(), effort, Path(tmp) / f"{app.stem}-{effort}",
                                  args.cap, args.full_limit if effort == "full" else None,
                                  args.busy)
                print(f"{app.stem} {effort}: {json.dumps(row[effort])}", file=sys.stderr)
                if args.json:
                    args.json.write_text(json.dumps(rows, indent=1))
    print("| network | layers | default wall s | stages (default) | full wall s | least MiB default "
          "| least MiB full | ratio | load before / after |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for row in rows:
        d, f = row.get("default", {}), row.get("full", {})
        ratio = f"{d['least'] / f['least']:.4f}" if d.get("least") and f.get("least") else "-"
        load = "; ".join(f"{side} {r['load_before']} / {r['load_after']}"
                         + (f", {r['busy']} busy" if r.get("busy") else "")
                         for side, r in (("default", d), ("full", f)) if r)
        stages = d.get("stages", "").removeprefix("stages").strip() or "-"
        print(f"| {row['app']} | {row['layers']} | {wall(d)} | {stages} | {wall(f)} "
              f"| {mib(d.get('least'))} | {mib(f.get('least'))} | {ratio} | {load} |")


if __name__ == "__main__":
    main()
