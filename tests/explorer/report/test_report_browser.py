"""report.html's pictures of the memory, laid out by a real browser (headless Chromium), match
plan.json one to one: every stored tensor of every buffer is one rectangle at its buffer's
offset, as tall as its bytes and as wide as its life in the partition's schedule."""
from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from explorer.cli.main import main

ROOT = Path(__file__).resolve().parents[3]
APP = ROOT / "apps" / "worked_example.yaml"
BROWSER = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
if BROWSER is None and os.environ.get("CI"):
    raise RuntimeError("CI must have Chromium (.ci/run installs it): the report test renders the page")
pytestmark = pytest.mark.skipif(BROWSER is None, reason="no Chromium here (`apt-get install chromium`)")

MEASURE = """<script>
window.addEventListener('load', () => {
  const box = e => { const r = e.getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; };
  const out = [...document.querySelectorAll('svg.memory')].map(svg => ({
    plan: svg.closest('section').dataset.plan, partition: svg.dataset.partition,
    steps: +svg.dataset.steps, extent: +svg.dataset.extent, arena: box(svg.querySelector('rect.arena')),
    rects: [...svg.querySelectorAll('rect.tensor')].map(r => Object.assign({box: box(r)}, r.dataset))}));
  const pre = document.createElement('pre'); pre.id = 'layout';
  pre.textContent = JSON.stringify(out); document.body.appendChild(pre);
});
</script>"""


@pytest.fixture(scope="module")
def laid_out(tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "out"
    assert main([str(APP), "--out", str(out), "--quiet"]) in (0, 3)
    page = out / "report.measured.html"
    page.write_text((out / "report.html").read_text().replace("</body>", MEASURE + "</body>"))
    dom = subprocess.run([BROWSER, "--headless", "--no-sandbox", "--disable-gpu",
                          "--window-size=1400,1000", "--virtual-time-budget=5000", "--dump-dom",
                          page.as_uri()], capture_output=True, text=True, timeout=120).stdout
    found = re.search(r'<pre id="layout">(.*?)</pre>', dom, re.S)
    assert found, "the browser did not lay out the page"
    return json.loads((out / "plan.json").read_text()), json.loads(html.unescape(found.group(1)))


def test_rectangles_are_the_plans_buffers(laid_out):
    plan, svgs = laid_out
    chosen = [s for s in svgs if s["plan"] == "chosen"]
    assert sorted(s["partition"] for s in chosen) == sorted(p["name"] for p in plan["partitions"])
    drawn = set()
    for svg in chosen:
        assert svg["steps"] == len(plan["firings"][svg["partition"]])
        for r in svg["rects"]:
            buf = plan["buffers"][int(r["buffer"])]
            tensors = r["tensor"].split()
            assert set(tensors) <= set(buf["edges"])
            assert int(r["offset"]) == buf["offset"]
            assert int(r["bytes"]) == plan["edges"][tensors[0]]["elements"] * plan["data_bytes"]
            assert int(r["bytes"]) <= buf["bytes"]
            drawn |= {(int(r["buffer"]), t) for t in tensors}
    assert drawn == {(i, e) for i, b in enumerate(plan["buffers"]) for e in b["edges"]}


def test_laid_out_where_the_plan_puts_them(laid_out):
    plan, svgs = laid_out
    checked = 0
    for svg in svgs:
        ax, ay, aw, ah = svg["arena"]
        for r in svg["rects"]:
            x, y, w, h = r["box"]
            first, last = int(r["first"]), int(r["last"])
            assert y - ay == pytest.approx(int(r["offset"]) / svg["extent"] * ah, abs=1.0)
            assert h == pytest.approx(max(int(r["bytes"]) / svg["extent"] * ah, 0.5), abs=1.0)
            assert x - ax == pytest.approx(first / svg["steps"] * aw, abs=1.0)
            assert w == pytest.approx((last - first + 1) / svg["steps"] * aw, abs=1.0)
            checked += 1
    assert checked >= len(plan["buffers"])


def test_lives_follow_the_schedule(laid_out):
    """A tensor inside one partition holds data from its producer's first firing to its last
    reader's last firing in the partition's flat schedule (computed here from plan.json)."""
    plan, svgs = laid_out
    layers = {p["name"]: set(p["layers"]) for p in plan["partitions"]}
    checked = 0
    for svg in (s for s in svgs if s["plan"] == "chosen"):
        firings = plan["firings"][svg["partition"]]
        for r in svg["rects"]:
            ends = [e.split(".", 1)[1].split("->") for e in r["tensor"].split()]
            if "(" in r["tensor"] or not all({s, d} <= layers[svg["partition"]] for s, d in ends):
                continue
            src = ends[0][0]
            last = max(max(i for i, f in enumerate(firings) if f == d) for _, d in ends)
            assert (int(r["first"]), int(r["last"])) == (firings.index(src), last)
            checked += 1
    assert checked > 0
