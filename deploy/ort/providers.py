"""What every ONNX Runtime session of the project is built with: the CPU's execution
provider (the one the deployments run on), and the optimizer a session that keeps the plain
NCHW layout disables (ONNX Runtime's rewrite into its blocked NCHWc kernels)."""
from __future__ import annotations

CPU = ["CPUExecutionProvider"]
NCHW_ONLY = ["NchwcTransformer"]
