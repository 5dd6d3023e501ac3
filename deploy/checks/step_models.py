"""Every step model `explore deploy` writes, checked where it is written: onnx.checker (the
ONNX spec's structure) and ONNX Runtime loads made exactly as `explore run` makes them
(deploy/ort/backend.py: the model optimised with its initializers in a side file, then its
final form loaded with the weights handed over), in both kernel forms (NCHWc and plain), so
ONNX Runtime's shape inference and kernel lookup judge what the run will load. Not ONNX's
own shape inference, which gives up inside exports ORT runs (Swin-T's attention). A step
the run would refuse is then found at deploy, as one line naming the layer, its ONNX nodes
and the reason; each is also bound to zero arrays of its ports' shapes and run once, as the
executor binds and calls it (a model without outputs, which ONNX Runtime loads but never
runs, is refused before that); a model memtrade has just written and cannot load is memtrade's fault, and
the line says so and asks for a report.

The loads run in one child process (`python -m deploy.checks.step_models`, paths as JSON on
stdin, the first refusal as JSON on stdout): a session made in the deploying process would
fix ONNX Runtime's threading for the rest of it (a later `explore run` in the same process
needs its one global thread pool), as deploy/ort/optimize.py does for the same reason.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx

from csdf.model import CNN
from deploy.runtime.manifest_records import Manifest
from sdf3.errors import InputError


class StepModelRefused(InputError):
    """A step model fails the ONNX checker or ONNX Runtime's load."""


def _reason(err: BaseException) -> str:
    return " ".join(str(err).split())[:400] or type(err).__name__


def check_model(path: Path, feeds: dict[str, list[int]] | None = None) -> str | None:
    """Why `path` is not a model ONNX Runtime can run as `explore run` loads and calls it, or
    None. `feeds`: the integer inputs its first step binds (slot indices, a tile's starts and
    ends), by port; every other input is zeros."""
    from deploy.ort.backend import OrtBackend
    try:
        onnx.checker.check_model(str(path))   # structure; shapes are ORT's to judge below
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as err:
        return f"onnx.checker: {_reason(err)}"
    if not onnx.load(str(path), load_external_data=False).graph.output:
        return "memtrade's own check: it has no output (ONNX Runtime runs no model without one)"
    for layout in ("nchwc", "nchw"):   # "auto" and "blocked" build from these two forms
        backend = OrtBackend(threads=1, layout=layout, optimize_in_child=False)
        try:
            session = backend.load(path)
        except Exception as err:           # onnxruntime's Fail, InvalidGraph, NotImplemented
            return f"ONNX Runtime ({layout} form, as `explore run` loads it): {_reason(err)}"
        try:
            _run_once(backend, session, feeds or {})
        except Exception as err:           # what the run's first call would raise
            return f"ONNX Runtime ({layout} form, bound and run once as `explore run` " \
                   f"calls it): {_reason(err)}"
        finally:
            del backend
    return None


_NUMPY = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(uint8)": np.uint8,
          "tensor(int8)": np.int8, "tensor(int32)": np.int32, "tensor(int64)": np.int64}


def _run_once(backend, session, feeds: dict[str, list[int]]) -> None:
    """Bind `session` to arrays of the shapes and types its ports declare, `feeds` where
    given and zeros elsewhere, through the backend's own binding, as the executor binds
    arena views, and call it once."""
    def zeros(port) -> np.ndarray:
        shape = [d if isinstance(d, int) and d > 0 else 1 for d in port.shape]
        return np.zeros(shape, _NUMPY.get(port.type, np.float32))

    def fed(port) -> np.ndarray:
        if port.name not in feeds:
            return zeros(port)
        return np.asarray(feeds[port.name], _NUMPY.get(port.type, np.int64))
    inputs = {p.name: fed(p) for p in session.get_inputs()}
    outputs = {p.name: zeros(p) for p in session.get_outputs()}
    backend.bind(session, inputs, outputs)()


def check_entry(entry: str | list) -> str | None:
    """`check_model` of one entry of the child's list: a path, or [path, feeds]."""
    if isinstance(entry, str):
        return check_model(Path(entry))
    return check_model(Path(entry[0]), entry[1])


def first_refused(paths: list) -> tuple[int, str] | None:
    """(index, reason) of the first of `paths` (each a path, or [path, feeds] as
    `check_entry` takes it) that fails `check_model`, from one child."""
    from deploy.runtime.child import child_env
    if not paths:
        return None
    out = subprocess.run([sys.executable, "-m", "deploy.checks.step_models"],
                         input=json.dumps(paths), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=child_env())
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        tail = " ".join(out.stderr.strip().splitlines()[-1:]) or f"exit status {out.returncode}"
        raise InputError(f"checking the step models failed in the child process: {tail}")
    report = json.loads(lines[-1])
    return None if report is None else (int(report[0]), str(report[1]))


def check_models(out: Path, manifest: Manifest, cnns: dict[str, CNN]) -> None:
    """Check every step model of `manifest` and its profile models (--with-profile)."""
    layers = {rel: (m.cnn, m.layer, m.layers) for rel, m in manifest.models.items()}
    layers.update({p.model: (p.cnn, p.layer, None) for p in manifest.profile or ()})
    variants = {rel: m.variant for rel, m in manifest.models.items()}
    rels = list(layers)
    feeds = _feeds(manifest)
    found = first_refused([[str(out / rel), feeds.get(rel, {})] for rel in rels])
    if found is not None:
        rel, why = rels[found[0]], found[1]
        cnn_name, layer, group = layers[rel]
        cnn = cnns.get(cnn_name)
        members = group or [layer]      # a fused-tiled group or a band: its layers
        nodes = [n for m in members if cnn is not None and m in cnn.graph
                 for n in cnn.layer(m).onnx_nodes]
        shown = ", ".join(nodes[:6]) + (f", ... ({len(nodes) - 6} more)" if len(nodes) > 6 else "")
        kind = {"region": "band of layers from", "chain": "chain of layers from"}.get(
            variants.get(rel, ""), "fused-tiled group")
        what = f"{kind} {layer}" if group else f"layer {layer}"
        first = next(((part, t, st) for part, t, st in manifest.steps() if st.model == rel), None)
        if first is not None:
            part, t, st = first
            what = f"step {t} of partition {part.name} (layer {st.layer} phase {st.phase}), " + what
        raise StepModelRefused(f"{what} of CNN {cnn_name}"
                               + (f" (ONNX nodes {shown})" if shown else "")
                               + f": step model {rel}, just written by memtrade, is refused by "
                               f"{why}; this is a fault of memtrade, please report it with the "
                               f"model file")


def _feeds(manifest: Manifest) -> dict[str, dict[str, list[int]]]:
    """Per step model, the integer inputs the first step calling it binds: its `const`
    bindings (ring slot indices, masks) or a tile call's `starts` and `ends`."""
    out: dict[str, dict[str, list[int]]] = {}
    for _, _, step in manifest.steps():
        if step.model is not None and step.model not in out:
            out[step.model] = {b.name: [int(v) for v in b.values] for b in step.bind
                               if b.kind == "const"}
        for t in step.group.tiles if step.group else ():
            out.setdefault(t.model, {"starts": [int(v) for v in t.starts],
                                     "ends": [int(v) for v in t.ends]})
    return out


def main() -> None:
    for i, entry in enumerate(json.loads(sys.stdin.read())):
        why = check_entry(entry)
        if why is not None:
            print(json.dumps([i, why]))
            return
    print(json.dumps(None))


if __name__ == "__main__":
    from sdf3.parent_death import die_with_parent
    die_with_parent()          # ends with the explore that started it (child_env)
    main()
