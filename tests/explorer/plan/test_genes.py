"""Granularity genes (explorer.plan.genes) and the search over them (explorer.search.algorithm2)."""
import itertools
import json
import random
from pathlib import Path

import pytest

from explorer.app.model import SearchSettings
from explorer.app.appfile import load_app
from explorer.plan.derive import Evaluation, derive, gene_labels, phases_of, plan_for
from explorer.plan.genes import gene_space, ladder
from explorer.plan.model import to_json
from explorer.plan.plan_file import from_dict
from explorer.search.algorithm2 import algorithm2, mutate_one_gene, nsga2
from explorer.throughput.evaluator import make_evaluator

ROOT = Path(__file__).resolve().parents[3]
WORKED = ROOT / "apps" / "worked_example.yaml"


def test_ladders():
    assert ladder(112) == (112, 56, 28, 16, 8, 4, 2, 1)     # 1, 2, 4, 7, 14, 28, 56, 112 phases
    assert ladder(32) == (32, 16, 8, 4, 2, 1)
    assert ladder(7) == (7, 4, 2, 1)
    assert ladder(1) == (1,)
    assert ladder(7, "binary") == (7, 1)
    for h in range(1, 300):
        rungs = ladder(h)
        phases = [-(-h // k) for k in rungs]
        assert rungs[0] == h and rungs[-1] == 1
        assert phases == sorted(set(phases))                 # distinct, whole first
        assert all(-(-h // n) == k for n, k in zip(phases, rungs))   # balanced k


@pytest.fixture(scope="module")
def app():
    return load_app(WORKED)


def test_binary_space_is_equation6(app):
    """Decoding binary genes gives Equation 6 (csdf.parts.phases_for) for every chromosome."""
    space = gene_space(app, "binary")
    assert space.labels == gene_labels(app) and space.upper == [1] * 7
    for genes in itertools.product((0, 1), repeat=7):
        assert phases_of(app, genes, space=space) == phases_of(app, genes)


def test_ladder_space_decodes_rows(app):
    space = gene_space(app, "ladder")
    assert space.labels == gene_labels(app)
    assert space.ladders[space.labels.index("CNN1.l3")] == (32, 16, 8, 4, 2, 1)
    genes = [0] * 7
    genes[space.labels.index("CNN1.l3")] = 3          # 4 rows per phase: 8 phases
    ph = phases_of(app, genes, space=space)
    assert ph["CNN1"]["l3"] == 8 and ph["CNN1"]["l4"] == 1 and ph["CNN2"]["l2"] == 1
    assert phases_of(app, space.row_by_row(), space=space) == phases_of(app, [1] * 7)
    with pytest.raises(ValueError, match="outside 0..5"):
        space.decode([9] + [0] * 6, ph)


def test_mutation_changes_one_gene_within_its_range():
    random.seed(5)
    upper = [0, 1, 5, 7, 3]
    for _ in range(500):
        ind = [random.randint(0, u) for u in upper]
        before = list(ind)
        (after,) = mutate_one_gene(ind, upper)
        changed = [i for i, (a, b) in enumerate(zip(before, after)) if a != b]
        assert len(changed) <= 1 and all(0 <= g <= u for g, u in zip(after, upper))
    reached = {mutate_one_gene([2], [4])[0][0] for _ in range(200)}
    assert reached == {0, 1, 3, 4}                     # always another value, any of them
    assert mutate_one_gene([1], [1]) == ([0],)


UP = [3, 2, 4]
SAVE = [[0, 4, 6, 7], [0, 3, 5], [0, 2, 5, 7, 8]]     # memory saved per gene value
COST = [[0, 1, 3, 6], [0, 2, 5], [0, 1, 2, 4, 9]]     # fps lost per gene value


def toy(genes):
    mem = 100 - sum(SAVE[i][g] for i, g in enumerate(genes))
    return mem, {"net": 50.0 - sum(COST[i][g] for i, g in enumerate(genes))}


def test_integer_nsga2_finds_the_true_front_seeded_and_deterministic():
    seen = []

    def counting(g):
        seen.append(g)
        return toy(g)

    settings = SearchSettings(population=24, generations=25, seed=2)
    res = nsga2(UP, ["net"], counting, settings)
    assert seen[0] == (0, 0, 0) and seen[1] == tuple(UP)      # all whole, all row by row
    points = {toy(g)[0]: None for g in itertools.product(*(range(u + 1) for u in UP))}
    allv = {(toy(g)[0], toy(g)[1]["net"]) for g in itertools.product(*(range(u + 1) for u in UP))}
    true = {p for p in allv if not any(q[0] <= p[0] and q[1] >= p[1] and q != p for q in allv)}
    assert {(p.memory_bytes, p.fps["net"]) for p in res.front} == true
    assert len(points) > 2
    again = nsga2(UP, ["net"], toy, settings)
    assert [p.genes for p in again.front] == [p.genes for p in res.front]


def test_ladder_search_on_the_worked_example(app, tmp_path):
    """Least memory no worse than the best binary chromosome (exhaustive), a front with more
    points, and a plan.json that carries rows per phase and reads back."""
    settings = SearchSettings(population=24, generations=20, seed=1)
    evaluator = make_evaluator(app)
    binary_min = min(derive(app, phases_of(app, g)).memory_bytes
                     for g in itertools.product((0, 1), repeat=7))
    app.memory = 1                         # no early exit: search the whole front
    ladder_eval = Evaluation(app, evaluator, space=gene_space(app, "ladder"))
    out = algorithm2(app, ladder_eval, settings)
    binary = algorithm2(app, Evaluation(app, evaluator, space=gene_space(app, "binary")), settings)
    assert out.front[0].memory_bytes <= binary_min
    assert len(out.front) > len(binary.front)
    chosen = out.front[0]
    d = derive(app, ladder_eval.phases(chosen.genes))
    plan = plan_for(app, d, chosen.fps, False, chosen.genes)
    for cnn, ph in plan.phases.items():
        for layer, n in ph.items():
            h = app.cnns[cnn].layer(layer).output_shape[2]
            assert plan.rows[cnn][layer] == -(-h // n)
    to_json(plan, tmp_path / "plan.json")
    data = json.loads((tmp_path / "plan.json").read_text())
    assert from_dict(data).rows == plan.rows
    del data["rows"]                        # a plan written before rows per phase
    assert from_dict(data).phases == plan.phases


def test_ladder_seeds_binary_prefixes_then_uniform_rungs(app):
    """GeneSpace.seeds: none for binary genes (the paper's search is unchanged); for the
    ladder, per CNN the first 1/8, 1/4, 1/2, 3/4 of the genes row by row (at least one),
    then every gene at rung r = 1, 2, ... (its last rung when shorter), then each prefix in
    parts of k = 1, 2, 4, ... rows, duplicates and the two extremes left out."""
    assert gene_space(app, "binary").seeds() == []
    space = gene_space(app, "ladder")
    cnn1 = [i for i, label in enumerate(space.labels) if label.startswith("CNN1.")]
    cnn2 = [i for i, label in enumerate(space.labels) if label.startswith("CNN2.")]
    up = space.upper
    expected = []
    prefixes = [(max(1, len(cnn1) // 8), max(1, len(cnn2) // 8)),
                (max(1, len(cnn1) // 4), max(1, len(cnn2) // 4)),
                (len(cnn1) // 2, len(cnn2) // 2),
                (3 * len(cnn1) // 4, 3 * len(cnn2) // 4)]
    for n1, n2 in prefixes:
        on = set(cnn1[:n1]) | set(cnn2[:n2])
        expected.append(tuple(up[i] if i in on else 0 for i in range(len(up))))
    expected += [tuple(min(r, u) for u in up) for r in range(1, max(up))]
    tallest = max(r[0] for r in space.ladders)
    rows = [1 << j for j in range(tallest.bit_length()) if 1 << j < tallest]
    for n1, n2 in prefixes:
        on = set(cnn1[:n1]) | set(cnn2[:n2])
        for k in rows:       # each gene at its first rung of k rows or fewer
            genes = []
            for i, rungs in enumerate(space.ladders):
                fits = [g for g in range(1, len(rungs)) if rungs[g] <= k]
                genes.append((fits[0] if fits else up[i]) if i in on else 0)
            expected.append(tuple(genes))
    expected = [g for g in dict.fromkeys(expected) if g not in (space.whole(), space.row_by_row())]
    assert space.seeds() == expected
    assert all(set(g[i] for i in range(len(up))) <= {0, *up} for g in expected[:2])
    assert len(expected) >= 5


def test_ladder_search_starts_from_the_binary_search_and_the_seeds(app):
    """The ladder search runs the binary search first (same settings and seed), then seeds
    its population with that front (as ladder chromosomes) and the space's seeds: its least
    memory is never above the binary search's, and every seed was evaluated."""
    settings = SearchSettings(population=16, generations=3, seed=3, workers=1)  # calls seen here
    evaluator = make_evaluator(app)
    app.memory = 1                         # no early exit
    binary = algorithm2(app, Evaluation(app, evaluator, space=gene_space(app, "binary")),
                        settings)
    space = gene_space(app, "ladder")
    evaluate = Evaluation(app, evaluator, space=space)
    seen = []

    def counting(genes):
        seen.append(tuple(genes))
        return evaluate(genes)

    counting.space = space
    out = algorithm2(app, counting, settings)
    assert out.front[0].memory_bytes <= binary.front[0].memory_bytes
    assert {space.binary(p.genes) for p in binary.front} | set(space.seeds()) <= set(seen)
    # the binary stage asked for exactly the binary search's chromosomes, as ladder twins
    assert out.result.unique > binary.result.unique
    for b in binary.front:                 # each binary point kept, or beaten, in the front
        assert any(p.memory_bytes <= b.memory_bytes and
                   all(p.fps[c] >= b.fps[c] for c in b.fps) for p in out.front)
    plain = algorithm2(app, Evaluation(app, evaluator, space=space), settings, seeded=False)
    assert plain.result.unique < out.result.unique          # seeded=False: one NSGA-II run
