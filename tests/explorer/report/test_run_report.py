"""`explore run DIR` leaves DIR/run.json (the `--json` figures and the command's settings)
and DIR/run.html (the footprint by part beside the plan's memory by part on one scale, a
table per CNN), each written through a temporary file renamed into place."""
from __future__ import annotations

import contextlib
import io
import json
import os
import shutil

import pytest
from lxml import etree

from explorer.cli.main import main
from explorer.report import run_report
from refusals import tiny_least_memory

SVG = "{http://www.w3.org/2000/svg}"
RUN = ["--in-process", "--frames", "2"]


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """The tiny deployment run once with --json: (folder, the JSON printed)."""
    dep = tiny_least_memory(tmp_path_factory.mktemp("runrep"))
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["run", str(dep), *RUN, "--json"]) == 0
    return dep, json.loads(buf.getvalue())


def rects(page: str) -> dict[str, dict[str, etree._Element]]:
    """bar name -> data-part -> its rectangle, from run.html's inline SVG."""
    root = etree.fromstring(page.encode(), etree.HTMLParser())
    bars = {}
    for g in root.iter("g"):
        if g.get("data-bar"):
            bars[g.get("data-bar")] = {r.get("data-part"): r for r in g.iter("rect")}
    return bars


def test_run_json_holds_the_printed_figures_and_the_settings(ran):
    dep, printed = ran
    saved = json.loads((dep / "run.json").read_text())
    settings = saved.pop("settings")
    assert saved == printed                    # the same run: every figure equal
    assert {k: settings[k] for k in ("frames", "seed", "threads", "layout", "backend", "check")} \
        == {"frames": 2, "seed": 0, "threads": 0, "layout": "blocked", "backend": "onnxruntime",
            "check": True}
    assert settings["machine"].startswith("cpu:") and settings["date"].endswith("+00:00")
    for key in ("plan_fps", "plan_platform", "plan_memory_bytes", "plan_param_bytes", "verdict"):
        assert key in saved


def test_breakdown_adds_up_to_the_footprint(ran):
    saved = json.loads((ran[0] / "run.json").read_text())
    # footprint = peak - baseline, peak the higher of the load and run peaks
    peak = max(saved["load_peak_rss_bytes"], saved["run_peak_rss_bytes"])
    assert saved["footprint_bytes"] == peak - saved["baseline_rss_bytes"]
    assert sum(saved["breakdown"].values()) == saved["footprint_bytes"]
    assert saved["breakdown"]["weights_bytes"] == saved["param_bytes"]
    assert saved["breakdown"]["arena_bytes"] == saved["arena_bytes"]


def test_a_second_run_replaces_both_files(ran, capsys):
    dep, printed = ran
    first = json.loads((dep / "run.json").read_text())
    assert main(["run", str(dep), *RUN, "--seed", "3"]) == 0
    assert "tiny:" in capsys.readouterr().out           # the text report still printed
    second = json.loads((dep / "run.json").read_text())
    assert second["settings"]["seed"] == 3 and first["settings"]["seed"] == 0
    assert set(second) == set(first)
    assert {k: v for k, v in second.items() if k.startswith("plan_")} == \
        {k: v for k, v in printed.items() if k.startswith("plan_")}
    assert sum(second["breakdown"].values()) == second["footprint_bytes"]
    assert 'data-bytes="%d"' % second["breakdown"]["weights_bytes"] in (dep / "run.html").read_text()
    assert not [p for p in os.listdir(dep) if p.endswith(".tmp")]


def test_html_bars_one_rectangle_per_part_widths_proportional(ran):
    dep = ran[0]
    saved = json.loads((dep / "run.json").read_text())
    bars = rects((dep / "run.html").read_text())
    measured, plan = bars["measured"], bars["plan"]
    assert set(measured) == set(saved["breakdown"])
    for part, r in measured.items():
        assert int(r.get("data-bytes")) == saved["breakdown"][part]
    plan_keys = {k for k in ("plan_param_bytes", "plan_buffer_bytes", "plan_workspace_bytes",
                             "plan_session_bytes", "plan_output_bytes") if saved.get(k) is not None}
    assert set(plan) == plan_keys
    for part, r in plan.items():
        assert int(r.get("data-bytes")) == saved[part]
    # one scale for both bars: width / |bytes| the same for every rectangle
    every = [r for bar in (measured, plan) for r in bar.values() if int(r.get("data-bytes"))]
    ref = every[0]
    ref_ratio = float(ref.get("width")) / abs(int(ref.get("data-bytes")))
    for r in every:
        ratio = float(r.get("width")) / abs(int(r.get("data-bytes")))
        assert ratio == pytest.approx(ref_ratio, rel=1e-6), r.get("data-part")
    # the longer bar spans BAR_PX
    longest = max(sum(max(0, int(r.get("data-bytes"))) for r in bar.values())
                  for bar in (measured, plan))
    assert longest * ref_ratio == pytest.approx(run_report.BAR_PX, rel=1e-9)
    # positive parts are laid end to end from the label column, in drawing order
    x = run_report.LABEL_PX
    for r in measured.values():
        if int(r.get("data-bytes")) >= 0:
            assert float(r.get("x")) == pytest.approx(x, rel=1e-9)
            x += float(r.get("width"))


def test_html_table_per_cnn(ran):
    dep = ran[0]
    saved = json.loads((dep / "run.json").read_text())
    root = etree.fromstring((dep / "run.html").read_bytes(), etree.HTMLParser())
    row = root.xpath('//tr[@data-cnn="tiny"]')[0]
    cells = [c.text for c in row.iter("td")]
    assert cells[0] == "tiny"
    assert cells[1] == f"{saved['plan_fps']['tiny']:.1f}"
    assert cells[2] == f"{saved['fps']['tiny']:.1f}"
    assert cells[3] == str(saved["calls_per_frame"]["tiny"])
    assert cells[5] == f"{saved['verdict']['tiny']['tolerance']:.3g}"
    assert cells[6] == saved["verdict"]["tiny"]["verdict"] == "PASS"


def test_unwritable_folder_is_one_warning_and_the_run_status(ran, tmp_path, capsys):
    dep = tmp_path / "dep"
    shutil.copytree(ran[0], dep)
    (dep / "run.json").unlink()
    (dep / "run.json").mkdir()                 # os.replace cannot put a file there
    assert main(["run", str(dep), *RUN]) == 0
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"explore run: warning: {dep}: run.json and run.html not written")
    assert "\n" not in err
    assert sorted(os.listdir(dep)) == sorted(os.listdir(ran[0]))     # no temporary file left


@pytest.mark.parametrize("stop", [KeyboardInterrupt, PermissionError])
def test_a_stopped_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch, stop):
    (tmp_path / "run.json").write_text("old\n")
    real = os.replace

    def interrupted(src, dst):
        raise stop(13, "Permission denied")
    monkeypatch.setattr(run_report.os, "replace", interrupted)
    result = {"fps": {"a": 1.0}, "breakdown": {"weights_bytes": 5, "arena_bytes": 3},
              "footprint_bytes": 8, "plan_param_bytes": 4}
    if stop is KeyboardInterrupt:
        with pytest.raises(KeyboardInterrupt):
            run_report.write_run_files(tmp_path, result, {"seed": 0})
    else:
        assert run_report.write_run_files(tmp_path, result, {"seed": 0}) == \
            f"{tmp_path}: run.json and run.html not written (Permission denied)"
    assert os.listdir(tmp_path) == ["run.json"]
    assert (tmp_path / "run.json").read_text() == "old\n"
    monkeypatch.setattr(run_report.os, "replace", real)
    assert run_report.write_run_files(tmp_path, result, {"seed": 0}) is None
    assert sorted(os.listdir(tmp_path)) == ["run.html", "run.json"]
    assert json.loads((tmp_path / "run.json").read_text())["breakdown"] == result["breakdown"]


def test_html_that_cannot_be_written_is_named_alone(tmp_path):
    (tmp_path / "run.html").mkdir()
    line = run_report.write_run_files(tmp_path, {"fps": {}}, {})
    assert line.startswith(f"{tmp_path}: run.html not written (")
    assert json.loads((tmp_path / "run.json").read_text())["fps"] == {}
    assert sorted(os.listdir(tmp_path)) == ["run.html", "run.json"]


def test_a_negative_part_is_drawn_at_its_size_back_from_the_end():
    record = {"breakdown": {"weights_bytes": 600, "arena_bytes": 400, "sessions_other_bytes": -100},
              "footprint_bytes": 900, "plan_param_bytes": 500, "plan_buffer_bytes": 250}
    bars = rects(run_report.run_html(record))
    m = bars["measured"]
    scale = run_report.BAR_PX / 1000                  # the longer bar: 600 + 400 bytes
    assert float(m["weights_bytes"].get("width")) == pytest.approx(600 * scale)
    assert float(m["sessions_other_bytes"].get("width")) == pytest.approx(100 * scale)
    end = run_report.LABEL_PX + 1000 * scale
    assert float(m["sessions_other_bytes"].get("x")) == pytest.approx(end - 100 * scale)
    assert float(bars["plan"]["plan_buffer_bytes"].get("width")) == pytest.approx(250 * scale)


@pytest.mark.parametrize("dev, want", [
    (None, "\u2013"),                                                    # fp32 plan
    ({"available": False, "reason": "gone"}, "unavailable"),
    ({"available": True, "outputs": [{"sqnr_db": 12.34, "max_abs_diff": 0.1},
                                     {"sqnr_db": 3.21, "max_abs_diff": 0.2}]}, "3.2 dB"),
    ({"available": True, "outputs": [{"sqnr_db": None, "max_abs_diff": 0.0}]}, "identical"),
    ({"available": True, "outputs": [{"sqnr_db": None, "max_abs_diff": 0.5},
                                     {"sqnr_db": 20.0, "max_abs_diff": 0.1}]}, "-inf dB"),
])
def test_the_vs_fp32_cell_is_the_least_sqnr_over_the_outputs(dev, want):
    assert run_report.vs_fp32_cell(dev) == want
