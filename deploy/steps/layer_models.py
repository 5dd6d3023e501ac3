"""The step models a profile times: for every layer its whole model and, when it can go by
parts, one interior part (the middle output row), built as a deployment builds them
(deploy/steps/parts.py) with the ports and constant inputs of that phase. `explore deploy`
writes them beside a TensorRT deployment for the board runner's `profile`."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx

from csdf.model import CNN, INPUT
from csdf.parts import can_split, window
from deploy.quant.stored import weights_of
from deploy.steps.parts import InPort, OutPort, needs_mask, step_model, window_rows


def _ports(cnn: CNN, name: str, part: bool) -> tuple[list[InPort], list[OutPort], list]:
    """Ports of the step model a deployment uses for `name` (whole, or its one part model)
    and the constant inputs of the interior phase timed (slot indices, all-real mask)."""
    layer = cnn.layer(name)
    srcs = list(dict.fromkeys(layer.inputs))
    ins, consts = [], []
    p = layer.output_shape[2] // 2
    for i, src in enumerate(srcs):
        shape = tuple(int(v) for v in cnn.edge_shape(src, name))
        if part and shape[2] > 1:
            rows, real = window_rows(cnn, name, src, p)
            masked = needs_mask(cnn, name, src)
            ins.append(InPort(f"in{i}", shape, "hncw", max(window(cnn, layer, src).extent, len(rows)),
                              len(rows), masked))
            const = {f"in{i}_idx": np.arange(len(rows), dtype=np.int32)}
            if masked:
                const[f"in{i}_mask"] = np.asarray(real, np.int32)
            consts.append(const)
        else:
            ins.append(InPort(f"in{i}", shape, "nchw", shape[2], None))
            consts.append({})
    shape = tuple(int(v) for v in layer.output_shape)
    outs = [OutPort("out0", shape, "hncw" if part else "nchw", part)]
    return ins, outs, consts


def layer_model(cnn: CNN, name: str, dtype: str, part: bool, weights: str = "float32",
                scales: dict | None = None):
    """The step model timed for layer `name` (whole, or one interior phase) and its ports;
    `weights`: the parameters' storage type (deploy/quant/stored.py WEIGHT_TYPES)."""
    ins, outs, consts = _ports(cnn, name, part)
    model = step_model(cnn.layer(name), ins, outs, dtype, part, weights=weights_of(weights, cnn),
                       scales=scales)
    return model, ins, outs, consts


def write_profile_models(cnns: dict[str, CNN], dtype: str, out_dir: Path) -> list[dict]:
    """Every layer's whole and interior-part model under out_dir/profile/, with the ports
    the board runner feeds when it times them (`board_runner.py profile`, whose code is in
    deploy/tensorrt/trt_measure.py)."""
    entries = []
    for cnn in cnns.values():
        for name in cnn.order():
            layer = cnn.layer(name)
            if layer.op == INPUT:
                continue
            kinds = [False] + ([True] if can_split(layer) and layer.output_shape[2] > 1 else [])
            for part in kinds:
                model, ins, outs, idx = layer_model(cnn, name, dtype, part)
                kind = "part" if part else "whole"
                rel = f"profile/{_safe(cnn.name)}/{_safe(name)}.{kind}.onnx"
                (out_dir / rel).parent.mkdir(parents=True, exist_ok=True)
                onnx.save(model, str(out_dir / rel))
                ports = []
                for port, const in zip(ins, idx):
                    ports.append({"name": port.name, "shape": port.stored_shape, "dtype": dtype})
                    ports += [{"name": k, "values": v.tolist()} for k, v in const.items()]
                ports += [{"name": p.name, "shape": p.stored_shape, "dtype": dtype} for p in outs]
                entries.append({"cnn": cnn.name, "layer": name, "kind": kind, "model": rel,
                                "phases": int(layer.output_shape[2]) if part else 1, "ports": ports})
    return entries


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)
