"""The step models a profile times: for every layer its whole model and, when it can go by
parts, one interior part (the middle output row), built as a deployment builds them
(deploy/steps/parts.py) with the ports and constant inputs of that phase. `explore deploy
--with-profile` writes them for the board runner's `profile` (deploy/build/profile_models.py)."""
from __future__ import annotations

import numpy as np

from csdf.model import CNN
from csdf.parts import window
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
