"""The paper's apps through the front door, as a user runs them: `explore APP --mem M --out D`
writes plan.json, `explore deploy` builds it, the run checks it. MobileNetV2 (zoo, full
size): outputs equal the unmodified model's (< 1e-4; its softmax-free logits are O(1)),
the arena is the plan's buffer bytes, one compiled call per step, and the steps make the
plan's firings in order (a region step: a band of them, deploy/build/regions.py).
The full set (ResNet-50, multi-CNN, least memory) is benchmarks/deploy_apps.py."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from deploy.run.measure import measure
from deploy.runtime import manifest as mf
from explorer.cli.main import main
from deploy_fixtures import fired, planned

ROOT = Path(__file__).resolve().parents[3]


def explore_deploy_run(tmp_path: Path, app: str, *extra: str) -> tuple[dict, dict]:
    status = main([str(ROOT / "apps" / app), *extra, "--out", str(tmp_path / "x"), "--quiet"])
    assert status in (0, 3)
    plan = json.loads((tmp_path / "x" / "plan.json").read_text())
    assert main(["deploy", str(tmp_path / "x" / "plan.json"), "--out", str(tmp_path / "d")]) == 0
    # one thread: `explore run` shares one pool among the step sessions, the library's
    # default makes one per session (66 here), and making and joining them outweighs the run
    res = measure(tmp_path / "d", frames=1, warmup=1, threads=1)
    res["manifest"] = mf.load(tmp_path / "d")
    return plan, res


def check(plan: dict, res: dict) -> None:
    for cnn, diff in res["max_abs_diff"].items():
        assert diff is not None and diff < 1e-4, (cnn, diff)
    assert res["arena_bytes"] == plan["buffer_bytes"]
    manifest = res["manifest"]
    assert fired(manifest) == planned(plan)
    assert res["calls_per_frame"] == mf.firings_per_frame(manifest)


def test_mobilenet_v2_reuse_only(tmp_path):
    plan, res = explore_deploy_run(tmp_path, "table12_app1_mobilenet_v2.yaml", "--mem", "1GB")
    assert all(v == 1 for v in plan["phases"]["mobilenet_v2"].values())
    check(plan, res)
    # one call per layer (phases lists every layer); the weights the sessions hold, summed
    # from their arrays, are the parameters the explorer counted (fp32: 4 bytes each), the
    # first conv's a little more: ORT's NCHWc kernel keeps it with its 3 input channels
    # padded; the plan's figure is reported beside it
    assert res["calls_per_frame"]["mobilenet_v2"] == len(plan["phases"]["mobilenet_v2"])
    assert plan["param_bytes"] <= res["param_bytes"] <= 1.01 * plan["param_bytes"]
    assert res["plan_param_bytes"] == plan["param_bytes"]


def test_mobilenet_v2_table12_15mb(tmp_path):
    """Table 12's 15 MB constraint (a short search): layers by parts, ring buffers."""
    plan, res = explore_deploy_run(tmp_path, "table12_app1_mobilenet_v2.yaml", "--mem", "15MB",
                                   "--population", "8", "--generations", "2", "--seed", "1")
    assert any(v > 1 for v in plan["phases"]["mobilenet_v2"].values())
    check(plan, res)


@pytest.mark.parametrize("mem", ["1GB"])
def test_mobilenet_v2_pipelined(tmp_path, mem):
    """Table 12 app 3: head and tail as concurrent stages, the crossing edge doubled."""
    plan, res = explore_deploy_run(tmp_path, "table12_app3_mobilenet_v2_pipelined.yaml", "--mem", mem)
    assert [len(g) for g in plan["pipelines"]] == [2]
    assert sum(name.endswith("(2)") for name in plan["edges"]) >= 1
    check(plan, res)
