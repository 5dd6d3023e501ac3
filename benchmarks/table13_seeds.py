"""The paper's Table 13 applications (apps/table13_*.yaml, their own precision and
constraints) searched at seeds 0-4 with the default search, each chosen plan deployed and run
through the front door: `explore APP --seed S --out D`, `explore deploy D/plan.json --out
D/dep`, `explore run D/dep --frames 2 --threads 1 --json`. A case passes when deploy exits
0 and the run exits 0 with every CNN's verdict PASS (a plan exit 3, constraints not met, is
still deployed: its min-memory plan is written). Prints one Markdown row per case and exits
1 if any case fails.

    .venv/bin/python benchmarks/table13_seeds.py [--seeds 0,1,2,3,4] [--apps SUBSTRING] [--jobs N]

`--jobs N` runs N cases at once (each its own processes; the rows keep the order of the
cases): on a machine of many cores the 20 cases take minutes instead of an hour. The
search's time budget holds whatever the load, so the plans may then differ from a one-case-
at-a-time run's where a search stops on time; every case must PASS either way.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APPS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "apps").glob("table13_*.yaml"))


def _explore(*args: str) -> tuple[int, str, float]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", "from explorer.cli.main import main; main()", *args], cwd=ROOT, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return out.returncode, (out.stdout + out.stderr).strip(), time.perf_counter() - start


def case(app: str, seed: int, work: Path) -> dict:
    out = work / f"{Path(app).stem}-{seed}"
    rc, text, t_search = _explore(app, "--seed", str(seed), "--out", str(out), "--quiet")
    row = {"app": app, "seed": seed, "search_rc": rc, "search_s": t_search}
    if rc not in (0, 3):
        return {**row, "ok": False, "why": text.splitlines()[-1:]}
    rc, text, t_deploy = _explore("deploy", str(out / "plan.json"), "--out", str(out / "dep"))
    row.update(deploy_rc=rc, deploy_s=t_deploy)
    if rc != 0:
        return {**row, "ok": False, "why": text.splitlines()[-1:]}
    rc, text, t_run = _explore("run", str(out / "dep"), "--frames", "2", "--threads", "1", "--json")
    row.update(run_rc=rc, run_s=t_run)
    try:
        result = json.loads(text[text.index("{"):text.rindex("}") + 1])
    except ValueError:
        return {**row, "ok": False, "why": text.splitlines()[-1:]}
    verdicts = {c: v["verdict"] for c, v in result.get("verdict", {}).items()}
    steps = json.loads((out / "dep" / "manifest.json").read_text())
    row.update(verdicts=verdicts, models=len(steps["models"]),
               steps=sum(len(p["steps"]) for p in steps["partitions"]))
    return {**row, "ok": rc == 0 and verdicts and all(v == "PASS" for v in verdicts.values())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2,3,4")
    parser.add_argument("--apps", default="")
    parser.add_argument("--jobs", type=int, default=1, help="cases run at once (default 1)")
    args = parser.parse_args()
    apps = [a for a in APPS if args.apps in a]
    print("| app | seed | search exit | deploy | steps (models) | run exit | verdicts | seconds (search/deploy/run) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    bad = 0
    cases = [(app, int(s)) for app in apps for s in args.seeds.split(",")]
    with tempfile.TemporaryDirectory() as tmp, \
            concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        for r in pool.map(lambda c: case(c[0], c[1], Path(tmp)), cases):
            bad += not r["ok"]
            secs = "/".join(f"{r[k]:.0f}" for k in ("search_s", "deploy_s", "run_s") if k in r)
            verdicts = ", ".join(f"{c} {v}" for c, v in r.get("verdicts", {}).items()) \
                or " ".join(r.get("why", []))
            print(f"| {Path(r['app']).stem} | {r['seed']} | {r['search_rc']} | {r.get('deploy_rc', '-')} "
                  f"| {r.get('steps', '-')} ({r.get('models', '-')}) | {r.get('run_rc', '-')} "
                  f"| {verdicts} | {secs} |", flush=True)
    print(f"load average at the end: {Path('/proc/loadavg').read_text().split()[:3]}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
