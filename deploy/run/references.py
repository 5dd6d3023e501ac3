"""What each CNN's verdict judges its deployment against, in words for the run's lines
(deploy/run/verdict.py says how): a reference at the plan's own precision, which is the
unmodified model only for fp32 plans.
"""
from __future__ import annotations

from pathlib import Path

WEIGHTS = {"float16": "fp16", "int8": "int8"}


def judged_against(manifest, name: str, deploy_dir: str | Path) -> str | None:
    """The reference of CNN `name` in a deployment's `manifest`, in words; None without one."""
    from deploy.backends import registry
    from deploy.checks.reference import stored_dtype
    info = manifest.cnns[name]
    if info.reference is None:
        return None
    if manifest.per_layer:
        return (f"the per-layer reference: the model with each stored tensor and each layer's "
                f"weights rounded at its layer's precision ({info.reference}), not the fp32 model")
    if manifest.quantization is not None:
        if info.source is not None and info.source.kind == "qdq":
            return f"the app's QDQ model itself ({info.reference})"
        return (f"the int8 reference: the model quantized (QDQ) with the deployment's own "
                f"scales and weights ({info.reference}), not the fp32 model")
    if stored_dtype(Path(deploy_dir) / info.reference) == "float16":
        return f"the fp16 model as ONNX Runtime runs it ({info.reference})"
    if manifest.dtype == "float16":
        held = registry.backend(manifest.backend).stored_weights(manifest.precision)
        weights = f" with {WEIGHTS[held]} weights" if held in WEIGHTS else ""
        return (f"the unmodified model{weights}, every stored tensor rounded to fp16 "
                f"({info.reference})")
    return f"the unmodified model ({info.reference})"
