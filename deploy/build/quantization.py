"""The scales an int8 plan is deployed with: per CNN, a model already quantized (QDQ) brings
its own (csdf/onnx_qdq.py); any other is calibrated on frames of input, the user's
(`explore deploy --calibration FILE`, .npy or .npz) or generated ones with a warning
(deploy/quant/calibration.py, ONNX Runtime's calibrator of the method asked for:
deploy/quant/methods.py, MinMax by default). Every tensor a step stores needs one: a layer
left without is refused in one line before anything is written. Where each CNN's scales came
from is kept with them (deploy/quant/origin.py), for the run to say."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from csdf.model import CNN
from deploy.quant import calibration
from deploy.quant.origin import ScalesOrigin
from deploy.quant.scales import ActivationScales, key
from sdf3.errors import InputError


def deployment_scales(cnns: dict[str, CNN], path: Path | None,
                      say: Callable[[str], None] = lambda line: None,
                      method: str | None = None) -> ActivationScales:
    """One record of the scales of every CNN of an int8 deployment, calibrated by `method`
    (deploy/quant/methods.py; None: minmax); `say` hears the warning when the frames are
    generated (once)."""
    from deploy.quant.methods import method as calibration_method
    chosen = calibration_method(method, "--calibration-method")    # before any work
    parts, warned = [], False
    for name, cnn in cnns.items():
        own = calibration.qdq_scales(cnn, name)
        if own is None:
            if cnn.source is None:
                raise InputError(f"CNN {name}: no ONNX model to calibrate int8 scales on")
            shape = next(iter(cnn.input_shapes.values()), None) or _input_shape(cnn)
            frames, warning = calibration.frames(path, shape)
            if warning and not warned:
                say(warning)
                warned = True
            origin = ScalesOrigin("generated" if warning else "file", chosen.name, len(frames),
                                  None if path is None else str(Path(path).resolve()))
            own = calibration.activation_scales(cnn.source, cnn, frames, name,
                                                None if path is None else str(path),
                                                method=chosen.name, origin=origin)
        _check_complete(cnn, name, own)
        parts.append(own)
    return calibration.merged(parts)


def _input_shape(cnn: CNN) -> tuple[int, ...]:
    from csdf.model import INPUT
    first = next(cnn.layer(n) for n in cnn.order() if cnn.layer(n).op == INPUT)
    return tuple(int(v) for v in first.output_shape)


def _check_complete(cnn: CNN, name: str, scales: ActivationScales) -> None:
    """Every layer's output has a scale, or one line naming the first that has none."""
    for layer in cnn.order():
        if key(name, layer) not in scales.by_tensor:
            why = ("the QDQ model computes it in fp32 (no QuantizeLinear on its output)"
                   if cnn.quantized is not None else "its ONNX tensor is not a float tensor")
            raise InputError(f"CNN {name}: layer {layer}: no int8 scale for its output ({why}); "
                             f"expected one for every tensor an int8 deployment stores")
