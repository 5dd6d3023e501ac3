"""Does `explore run`'s verdict still FAIL a damaged deployment? Copies DEPLOY_DIR once per
kind of damage, damages the copy, and runs `explore run COPY --frames 1 --seed S --json` on it
in a process of its own (the verdict as a user gets it), for each seed asked:

- weight: the largest |weight| of the last layer (in schedule order) with a Conv or
  ConvTranspose kernel, times 1.05, in every step model holding that kernel;
- rows: one interior step of the last layer whose steps gather a 3-row window from a ring
  (a 3x3 conv by parts or in a region) reads the window's rows in reverse order (slots
  still inside its ring, so the manifest check lets it run);
- swap: the last two step models (in schedule order) with the same ports and weight shapes
  and different weight values exchange files.

Prints one line per kind and seed: the verdict, max |diff|, tolerance and their ratio.

    python benchmarks/verdict_damage.py DEPLOY_DIR [--seeds 0 1] [--kinds weight rows swap]
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

ROOT = Path(__file__).resolve().parents[1]


def _steps(manifest: dict) -> list[dict]:
    return [s for p in manifest["partitions"] for s in p["steps"]]


def _layer_models(manifest: dict) -> list[tuple[str, list[str]]]:
    """(layer, its step model files) in the order the schedule first runs them."""
    order: dict[str, list[str]] = {}
    for step in _steps(manifest):
        if step.get("model"):
            models = order.setdefault(step["layer"], [])
            if step["model"] not in models:
                models.append(step["model"])
    return list(order.items())


def damage_weight(out: Path, manifest: dict) -> str | None:
    for layer, models in reversed(_layer_models(manifest)):
        graph = onnx.load(str(out / models[0])).graph
        kernels = {n.input[1] for n in graph.node if n.op_type in ("Conv", "ConvTranspose")}
        weights = [t.name for t in graph.initializer if t.name in kernels]
        if weights:
            name = weights[0]
            break
    else:
        return None
    where = None
    for path in sorted((out / "models").rglob("*.onnx")):    # every model holding it
        model = onnx.load(str(path))
        for t in model.graph.initializer:
            if t.name == name:
                w = numpy_helper.to_array(t).copy()
                where = where or np.unravel_index(int(np.argmax(np.abs(w))), w.shape)
                w[where] *= 1.05
                t.CopyFrom(numpy_helper.from_array(w, name))
                onnx.save(model, str(path))
    return f"{name} of layer {layer}, element {tuple(int(i) for i in where)}, x 1.05"


def damage_rows(out: Path, manifest: dict) -> str | None:
    for step in reversed(_steps(manifest)):
        idx = next((b for b in step["bind"] if b["kind"] == "const" and b["name"].endswith("_idx")
                    and len(set(b["values"])) == 3), None)
        if idx is not None:
            idx["values"] = idx["values"][::-1]
            (out / "manifest.json").write_text(json.dumps(manifest))
            return f"layer {step['layer']} phase {step['phase']} port {idx['name'][:-4]} rows reversed"
    return None


def damage_swap(out: Path, manifest: dict) -> str | None:
    def signature(path: Path) -> str | None:
        """Its ports' shapes and its weights' shapes; None without weights."""
        g = onnx.load(str(path)).graph
        if not g.initializer:
            return None
        dims = [[d.dim_value for d in v.type.tensor_type.shape.dim] for v in [*g.input, *g.output]]
        return json.dumps([dims, sorted(list(t.dims) for t in g.initializer)])
    def weights(path: Path) -> list[bytes]:
        """Its weights' values, whatever their names."""
        return sorted(numpy_helper.to_array(t).tobytes() for t in onnx.load(str(path)).graph.initializer)
    seen: dict[str, str] = {}
    for _, models in reversed(_layer_models(manifest)):
        for rel in models:
            sig = signature(out / rel)
            if sig is None:
                continue
            other = seen.setdefault(sig, rel)
            if other != rel and weights(out / rel) != weights(out / other):
                a, b = (out / rel).read_bytes(), (out / other).read_bytes()
                (out / rel).write_bytes(b)
                (out / other).write_bytes(a)
                return f"{rel} <-> {other}"
    return None


DAMAGE = {"weight": damage_weight, "rows": damage_rows, "swap": damage_swap}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--kinds", nargs="+", default=list(DAMAGE), choices=list(DAMAGE))
    args = parser.parse_args()
    for kind in args.kinds:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "dep"
            shutil.copytree(args.dir, out)
            what = DAMAGE[kind](out, json.loads((out / "manifest.json").read_text()))
            if what is None:
                print(f"{kind}: nothing of that form in this deployment", flush=True)
                continue
            for seed in args.seeds:
                res = subprocess.run([sys.executable, "-m", "explorer.cli.main", "run", str(out),
                                      "--frames", "1", "--seed", str(seed), "--json"],
                                     capture_output=True, text=True, cwd=ROOT)
                try:
                    verdicts = json.loads(res.stdout)["verdict"]
                except (ValueError, KeyError):
                    print(f"{kind} ({what}) seed {seed}: exit {res.returncode}: "
                          f"{res.stderr.strip().splitlines()[-1:]}", flush=True)
                    continue
                for cnn, v in verdicts.items():
                    print(f"{kind} ({what}) seed {seed} {cnn}: exit {res.returncode}, "
                          f"max |diff| {v['max_abs_diff']:.4g} on outputs up to "
                          f"{v['max_abs_output']:.3g}, tolerance {v['tolerance']:.4g}: ratio "
                          f"{v['max_abs_diff'] / v['tolerance']:.3g} {v['verdict']}", flush=True)


if __name__ == "__main__":
    main()
