"""How a deployment of a plan with a precision per layer (`precision: auto`,
explorer/app/layer_precision.py) stores each layer's tensors and weights.

A layer at fp32 stores its output as float32 and holds float32 weights; at fp16 float16 and
float16 weights; at int8 its output as the calibrated 8-bit type (`ActivationScales.dtype`,
uint8: deploy/quant/scales.py) and int8 weights, one scale per output channel
(deploy/quant/stored.py). A CNN input is stored at the widest precision of its readers
(`LayerPrecisions.tensor`). Every step computes in fp32 between the load of what it reads
(each input at its own producer's type, deploy/steps/storage.py) and the store of its
output, so a conversion at a precision boundary happens inside the reading step.

"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from csdf.model import CNN, INPUT
from deploy.quant.scales import ActivationScales
from deploy.quant.stored import data_type
from explorer.app.layer_precision import LayerPrecisions


@dataclass(frozen=True)
class LayerStorage:
    """Per CNN and layer: `tensors` the element type of the layer's output tensor (inputs
    included), `weights` the kind its parameters are held as (deploy/quant/stored.py)."""
    precisions: Mapping[str, Mapping[str, str]]
    tensors: Mapping[str, Mapping[str, str]]
    weights: Mapping[str, Mapping[str, str]]

    @staticmethod
    def of(layers: LayerPrecisions, cnns: Mapping[str, CNN], scales: ActivationScales | None,
           weights_for: Callable[[str], str]) -> "LayerStorage":
        """`weights_for`: the kind a backend holds the parameters of a layer at a precision
        in (its `stored_weights`)."""
        precisions, tensors, weights = {}, {}, {}
        for name, cnn in cnns.items():
            precisions[name] = {l: layers.name(name, l) for l in cnn.order()
                                if cnn.layer(l).op != INPUT}
            quant = scales.dtype if scales is not None else None
            tensors[name] = {l: data_type(layers.tensor(cnn, name, l).name, quant)
                             for l in cnn.order()}
            weights[name] = {l: weights_for(layers.name(name, l)) for l in cnn.order()}
        return LayerStorage(precisions, tensors, weights)

    def dtype(self, cnn: str, layer: str) -> str:
        return self.tensors[cnn][layer]

    def weight_kind(self, cnn: str, layer: str) -> str:
        return self.weights[cnn][layer]
