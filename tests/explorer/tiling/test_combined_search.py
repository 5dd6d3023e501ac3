"""`--tiling both` as one search call (explorer/tiling/search.combined_search): the outcome of
search_modes' combined search, with the single-mode searches' stages before its own."""
from __future__ import annotations

from explorer.app.appfile import load_app
from explorer.app.model import SearchSettings
from explorer.throughput.evaluator import make_evaluator
from explorer.tiling.genes import TiledEvaluation
from explorer.tiling.search import combined_search, search_modes


def test_combined_search_is_the_both_mode_of_search_modes(tmp_path):
    path = tmp_path / "app.yaml"
    path.write_text("name: vgg\ncnns:\n  - {name: n, model: 'zoo:vgg_small'}\n")
    app = load_app(path, mem="0")
    evaluator = make_evaluator(app)
    settings = SearchSettings(population=8, generations=2, workers=1)
    outcome = combined_search(app, TiledEvaluation(app, evaluator, "both"), settings)
    modes = search_modes(app, evaluator, settings)
    assert outcome.front == modes["both"].front and outcome.chosen == modes["both"].outcome.chosen
    assert [s.name for s in outcome.result.stages] == ["parts NSGA-II", "tiles NSGA-II", "NSGA-II"]
    assert outcome.result.stages[-1].evaluations == modes["both"].outcome.result.unique
