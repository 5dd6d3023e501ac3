"""Backends as objects: each backend (ONNX Runtime on this host's CPU, TensorRT on the board)
is one module behind `protocol.Backend`, saying what it supports (`protocol.Capabilities`)
and doing its part of deploying and running a plan. `registry` holds them by name, the one
place a backend's name is compared; every other module asks `registry.backend(name)` and
then the object.

May import: deploy.quant, deploy.runtime, deploy.ort, deploy.tensorrt, sdf3.
"""
