"""`explore run`'s verdict: PASS when the deployment computes the unmodified model (at the
plan's precision), FAIL and exit 4 when a step model was swapped for another of the same
shapes; `explore deploy` warns when the plan misses its constraints."""
from __future__ import annotations

import json
import shutil

import numpy as np

from csdf.onnx_import import load_onnx
from csdf.parts import all_parts
from deploy.build.derive import derive
from deploy.run.verdict import NOISE, RTOL, ULPS, judge
from explorer.cli.main import main
from onnx_cases import Net
from deploy_fixtures import make_plan
from refusals import redigest


def three_convs(tmp_path):
    """input -> conv a (3->4) -> b (4->4) -> c (4->4) -> d (4->4): b and c have equal ports."""
    n = Net(20)
    x = n.op("Relu", [n.conv("input", 3, 4, name="a")])
    y = n.op("Relu", [n.conv(x, 4, 4, name="b")])
    z = n.op("Relu", [n.conv(y, 4, 4, name="c")])
    n.conv(z, 4, 4, name="d")
    n.nodes[-1].output[0] = "output"
    return n.save(tmp_path / "three.onnx", [("input", [1, 3, 6, 5])], [("output", [1, 4, 6, 5])])


def deploy(tmp_path, parts=False, data_bytes=4):
    cnn = load_onnx(three_convs(tmp_path), "net")
    phases = all_parts(cnn) if parts else {k: 1 for k in cnn.order()}
    out = tmp_path / f"dep{int(parts)}{data_bytes}"
    shutil.rmtree(out, ignore_errors=True)
    derive(make_plan([cnn], {"net": phases}, data_bytes=data_bytes), {"net": cnn}, out)
    return out


def swap_models(out, first: str, second: str) -> None:
    """Exchange two layers' step model files: equal ports, other weights (a silent error)."""
    models = {m["layer"]: rel for rel, m in json.loads((out / "manifest.json").read_text())["models"].items()}
    a, b = out / models[first], out / models[second]
    data_a, data_b = a.read_bytes(), b.read_bytes()
    a.write_bytes(data_b)
    b.write_bytes(data_a)
    redigest(out)   # the verdict is tested here, not the load's digests


def reverse_window_rows(out, layer: str) -> None:
    """Make the third step of `layer` gather its window's rows in the wrong order (slot
    indices still inside the ring, so the manifest check lets it run)."""
    path = out / "manifest.json"
    manifest = json.loads(path.read_text())
    steps = [s for p in manifest["partitions"] for s in p["steps"] if s["layer"] == layer]
    idx = next(b for b in steps[2]["bind"] if b["kind"] == "const" and b["name"] == "in0_idx")
    assert len(set(idx["values"])) == 3, idx
    idx["values"] = idx["values"][::-1]
    path.write_text(json.dumps(manifest))


def run_json(capsys, out) -> tuple[int, dict]:
    capsys.readouterr()
    code = main(["run", str(out), "--frames", "2", "--json", "--in-process"])
    return code, json.loads(capsys.readouterr().out)


def test_pass_then_fail_after_a_swap(tmp_path, capsys):
    out = deploy(tmp_path, parts=True)
    code, res = run_json(capsys, out)
    v = res["verdict"]["net"]
    assert code == 0 and v["verdict"] == "PASS" and v["reference_dtype"] == "float32"
    assert v["rounding"] > 0          # the plain-kernel reference's distance from the reference
    assert v["max_abs_diff"] <= v["tolerance"] == max(RTOL["float32"] * v["max_abs_output"],
                                                      NOISE * v["rounding"])
    swap_models(out, "b", "c")
    code, res = run_json(capsys, out)
    assert code == 4 and res["verdict"]["net"]["verdict"] == "FAIL"
    assert main(["run", str(out), "--frames", "2", "--in-process"]) == 4
    assert "FAIL: outputs of net differ from the unmodified model (exit 4)" in capsys.readouterr().out


def test_fp16_plan_against_the_fp16_network(tmp_path, capsys):
    code, res = run_json(capsys, deploy(tmp_path, data_bytes=2))
    v = res["verdict"]["net"]
    assert code == 0 and v["verdict"] == "PASS" and v["reference_dtype"] == "float16"
    assert v["rounding"] > 0          # the fp16 network's own distance from the fp32 one


def test_judge_tolerance_is_relative():
    sizes = {"a": 0.1, "b": 4.0, "c": None}
    v = judge({"a": 1e-5, "b": 1e-3, "c": None}, sizes, "float32", {"a": 0.0, "b": 0.0, "c": None})
    assert [v[k].verdict for k in "abc"] == ["PASS", "FAIL", "n/a"]   # 1e-4 vs 2.5e-4 relative
    assert np.isclose(v["b"].relative_diff, 2.5e-4)
    # fp32: NOISE x the reference's spread where that exceeds RTOL x the outputs (a map near 0)
    near0 = judge({"a": 1.8e-7, "b": 1.8e-7}, {"a": 8e-4, "b": 8e-4}, "float32",
                  {"a": 1.8e-7, "b": 1e-8})
    assert near0["a"].verdict == "PASS" and np.isclose(near0["a"].tolerance, NOISE * 1.8e-7)
    assert near0["b"].verdict == "FAIL" and np.isclose(near0["b"].tolerance, RTOL["float32"] * 8e-4)
    v16 = judge({"a": 5e-3, "b": 1e-3, "c": None}, sizes, "float16", {"a": 3e-3, "b": 0.0, "c": None})
    # fp16 against the rounded reference: NOISE x its spread, at least ULPS fp16 units
    assert v16["a"].verdict == "PASS" and np.isclose(v16["a"].tolerance, NOISE * 3e-3)
    assert v16["b"].tolerance == ULPS * 2.0 ** -8      # fp16 numbers near 4 are 2^-8 apart
    over = judge({"a": 1.01 * NOISE * 3e-3, "b": 0.017, "c": None}, sizes, "float16",
                 {"a": 3e-3, "b": 0.0, "c": None})
    assert over["a"].verdict == over["b"].verdict == "FAIL"
    # run.json's form: the fields that apply, the spread beside a judged tolerance
    assert v["c"].to_dict() == {"verdict": "n/a", "reason": "no reference model or --no-check"}
    assert set(v["a"].to_dict()) == {"verdict", "max_abs_diff", "max_abs_output", "relative_diff",
                                     "tolerance", "reference_dtype", "rounding"}


def test_deploy_warns_when_constraints_unmet(tmp_path, capsys):
    three_convs(tmp_path)
    app_path = tmp_path / "app.yaml"
    app_path.write_text("name: three\ncnns:\n  - name: net\n    model: three.onnx\n")
    from explorer.app.appfile import load_app
    cnn = load_app(app_path).cnns["net"]
    plan = make_plan([cnn], {"net": {k: 1 for k in cnn.order()}})
    plan.update(app=str(app_path), par_bytes=4, memory_bytes=plan["buffer_bytes"] + 10, param_bytes=10,
                fps={"net": 5.0}, constraints={"memory_bytes": 100, "fps": {"net": 30.0}},
                constraints_met=False, schedules={p: "" for p in plan["firings"]})
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    assert main(["deploy", str(tmp_path / "plan.json"), "--out", str(tmp_path / "d")]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "warning" in err
    assert f"memory {plan['buffer_bytes'] + 10} B > 100 B" in err and "net 5.0 fps < 30 fps" in err


def test_a_model_stored_in_fp16_is_judged_at_fp16(tmp_path, capsys):
    """A model stored in fp16 (weights, input, output) deployed by an fp32 plan
    computes in fp32 while its reference computes in fp16; the tolerance follows the fp16
    reference, and a real error (two layers' models swapped) still fails."""
    import onnx
    from onnxruntime.transformers.float16 import convert_float_to_float16
    half = convert_float_to_float16(onnx.load(str(three_convs(tmp_path))), keep_io_types=False)
    assert half.graph.output[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT16
    path = tmp_path / "half.onnx"
    onnx.save(half, str(path))
    cnn = load_onnx(path, "net")
    out = tmp_path / "dep"
    derive(make_plan([cnn], {"net": all_parts(cnn)}, data_bytes=4), {"net": cnn}, out)
    code, res = run_json(capsys, out)
    v = res["verdict"]["net"]
    assert code == 0 and v["verdict"] == "PASS"
    assert v["reference_dtype"] == "float16" and v["stored_dtype"] == "float16"
    assert v["tolerance"] == RTOL["float16"] * v["max_abs_output"]
    assert v["max_abs_diff"] > RTOL["float32"] * v["max_abs_output"]   # an fp32 yardstick fails it
    assert main(["run", str(out), "--frames", "2", "--in-process"]) == 0
    assert "float16 reference, the model is stored in fp16): PASS" in capsys.readouterr().out
    swap_models(out, "b", "c")
    code, res = run_json(capsys, out)
    assert code == 4 and res["verdict"]["net"]["verdict"] == "FAIL"
