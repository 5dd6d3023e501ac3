"""The per-layer models `explore deploy --with-profile` writes for the board runner's
`profile` (deploy/tensorrt/trt_measure.py times them on the target): every layer's whole
model and, when it can go by parts, one interior part (deploy/steps/layer_models.py), listed
as the manifest's `ProfileModel`s with the ports the runner feeds."""
from __future__ import annotations

from pathlib import Path

import onnx

from csdf.model import CNN, INPUT
from csdf.parts import can_split
from deploy.build.layer_step import safe_name
from deploy.runtime.manifest_records import ProfileModel, ProfilePort
from deploy.steps import layer_models


def write_profile_models(cnns: dict[str, CNN], dtype: str, out_dir: Path) -> list[ProfileModel]:
    """Every layer's whole and interior-part model under out_dir/profile/, with the ports
    the board runner feeds when it times them."""
    entries = []
    for cnn in cnns.values():
        for name in cnn.order():
            layer = cnn.layer(name)
            if layer.op == INPUT:
                continue
            kinds = [False] + ([True] if can_split(layer) and layer.output_shape[2] > 1 else [])
            for part in kinds:
                model, ins, outs, idx = layer_models.layer_model(cnn, name, dtype, part)
                kind = "part" if part else "whole"
                rel = f"profile/{safe_name(cnn.name)}/{safe_name(name)}.{kind}.onnx"
                (out_dir / rel).parent.mkdir(parents=True, exist_ok=True)
                onnx.save(model, str(out_dir / rel))
                ports = []
                for port, const in zip(ins, idx):
                    ports.append(ProfilePort(port.name, tuple(port.stored_shape), dtype))
                    ports += [ProfilePort(k, values=tuple(int(x) for x in v.tolist()))
                              for k, v in const.items()]
                ports += [ProfilePort(p.name, tuple(p.stored_shape), dtype) for p in outs]
                entries.append(ProfileModel(cnn.name, name, kind, rel,
                                            int(layer.output_shape[2]) if part else 1, tuple(ports)))
    return entries
