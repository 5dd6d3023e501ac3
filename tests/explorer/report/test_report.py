"""pareto.json / pareto.csv round trips and the self-contained HTML report."""
import csv
import json
import re

from explorer.search.pick import Point
from explorer.report.pareto import Baseline, write_pareto_csv, write_pareto_json, write_report_html

MB = 2 ** 20
GENES = ["net.c1", "net.c2", "net.c3"]
FRONT = [Point((1, 1, 1), 5 * MB, {"net": 40.0}), Point((0, 1, 0), 7 * MB, {"net": 65.5}),
         Point((0, 0, 0), 12 * MB, {"net": 79.0})]


def test_json_and_csv_round_trip(tmp_path):
    write_pareto_json(FRONT, ["net"], GENES, tmp_path / "p.json")
    data = json.loads((tmp_path / "p.json").read_text())
    assert [(tuple(r["genes"]), r["memory_bytes"], r["fps"]["net"]) for r in data["points"]] == \
           [(p.genes, p.memory_bytes, p.fps["net"]) for p in FRONT]
    assert data["points"][1]["by_parts"] == ["net.c2"]
    write_pareto_csv(FRONT, ["net"], GENES, tmp_path / "p.csv")
    rows = list(csv.DictReader(open(tmp_path / "p.csv")))
    assert [int(r["memory_bytes"]) for r in rows] == [5 * MB, 7 * MB, 12 * MB]
    assert [float(r["fps_net"]) for r in rows] == [40.0, 65.5, 79.0]
    assert rows[0]["layers_by_parts"].split() == GENES


def test_html_is_self_contained_with_constraints_and_baselines(tmp_path):
    path = tmp_path / "r.html"
    write_report_html(path, "toy", FRONT, ["net"], GENES, 8 * MB, {"net": 60.0},
                      [Baseline("no reduction", 20 * MB, {"net": 79.0}),
                       Baseline("Pisarchyk & Lee", 9 * MB, {})], FRONT[1], True)
    text = path.read_text()
    assert text.count("<svg") == 1 and "</html>" in text
    assert not re.search(r"""(src|href)=["']?(https?:|//|file:)""", text)   # nothing external
    assert "<script" not in text
    for label in ("M^c = 8 MB", "T^c net = 60 fps", "no reduction", "Pisarchyk &amp; Lee",
                  "chosen plan"):
        assert label in text
    assert text.count('class="chosen"') == 1 and "meets the constraints" in text
