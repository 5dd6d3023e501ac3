"""The stage that sets a CNN's frame time (explorer/throughput/bottleneck.py), checked against
the evaluator's own frame times and partition times."""
from __future__ import annotations

from pathlib import Path

import pytest

from explorer.app.appfile import load_app
from explorer.throughput.bottleneck import bottlenecks
from explorer.throughput.evaluator import make_evaluator

APPS = Path(__file__).resolve().parents[3] / "apps"


@pytest.mark.parametrize("name", ["table12_app3_mobilenet_v2_pipelined.yaml",
                                  "table12_app1_mobilenet_v2.yaml", "worked_example.yaml"])
def test_bottleneck_sets_the_frame(name):
    app = load_app(APPS / name)
    ev = make_evaluator(app)
    frame = ev.frame_ms()
    times = {p.name: ev.partition_ms(p.name) for p in app.partitions}
    for cnn, b in bottlenecks(ev).items():
        assert b.frame_ms == pytest.approx(frame[cnn])
        assert 1000.0 / b.frame_ms == pytest.approx(ev.fps()[cnn])
        on_proc = [p.name for p in app.partitions
                   if p.name in b.partitions or (p.cnn == cnn and p.processor == b.processor)]
        assert b.period_ms == pytest.approx(sum(times[n] for n in b.partitions))
        assert all(app.partition(n).processor == b.processor for n in b.partitions)
        # no other set of the CNN, and no other processor in its set, takes longer
        for group in app.pipelines:
            if cnn in {app.partition(n).cnn for n in group}:
                assert ev.set_period_ms(group, times) <= b.period_ms + 1e-9
        assert on_proc


def test_pipelined_names_the_slower_processor():
    app = load_app(APPS / "table12_app3_mobilenet_v2_pipelined.yaml")
    ev = make_evaluator(app)
    times = {p.name: ev.partition_ms(p.name) for p in app.partitions}
    slow = max(app.partitions, key=lambda p: times[p.name])
    b = bottlenecks(ev)[slow.cnn]
    assert b.processor == slow.processor and b.partitions == (slow.name,)
    assert b.line().startswith(f"set by {slow.processor} running {slow.name}: ")


def test_explore_names_the_stage_of_a_missed_target(tmp_path, capsys):
    from explorer.cli.main import main
    app = load_app(APPS / "table12_app3_mobilenet_v2_pipelined.yaml")
    ev = make_evaluator(app)
    slow = max(app.partitions, key=lambda p: ev.partition_ms(p.name))
    assert main([str(APPS / "table12_app3_mobilenet_v2_pipelined.yaml"), "--fps", "100000",
                 "--mem", "1GB", "--quiet", "--out", str(tmp_path / "o")]) == 3
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("fps"))
    assert f"NOT met (the frame time is set by {slow.processor} running {slow.name}: " in line
