"""Engines of the board runner: an engine built from each ONNX step model (and where it is
stored), and a deserialized engine whose one context owns no device memory and binds arena
addresses (TensorRT 8: bindings by index; TensorRT 10: tensor addresses).

Part of the standalone runner (board_runner.py and its trt_*.py modules, copied beside a
deployment): Python 3.6 compatible, imports nothing of memtrade.
"""
import os
import sys

try:
    from .trt_cuda import trt, trt_major, device_capsule, trt_logger
except ImportError:  # run as a script: the modules lie flat in DIR
    from trt_cuda import trt, trt_major, device_capsule, trt_logger
try:
    from .trt_manifest import load_manifest
except ImportError:  # run as a script: the modules lie flat in DIR
    from trt_manifest import load_manifest


def build_engine(onnx_path, fp16, workspace=1 << 28):
    """Serialized engine (bytes) of one ONNX file; fp16 kernels allowed when asked."""
    logger = trt_logger()
    builder = trt.Builder(logger)
    if trt_major() >= 10:
        network = builder.create_network(0)   # explicit batch is the only mode
    else:
        flag = 1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH)
        network = builder.create_network(flag)
    parser = trt.OnnxParser(network, logger)
    with open(onnx_path, "rb") as f:
        if not parser.parse(f.read()):
            errors = [str(parser.get_error(i)) for i in range(parser.num_errors)]
            raise RuntimeError("%s: ONNX parser: %s" % (onnx_path, "; ".join(errors)))
    config = builder.create_builder_config()
    if hasattr(config, "set_memory_pool_limit"):      # TensorRT >= 8.4
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, workspace)
    else:                                             # TensorRT 8.2
        config.max_workspace_size = workspace
    if fp16:
        config.set_flag(trt.BuilderFlag.FP16)
    plan = builder.build_serialized_network(network, config)
    if plan is None:
        raise RuntimeError("%s: TensorRT could not build an engine" % onnx_path)
    return bytes(plan)


def engine_path(deploy_dir, model_rel):
    return os.path.join(deploy_dir, "engines", model_rel[:-len(".onnx")] + ".engine")


def build_all(deploy_dir, manifest=None, fp16=None, verbose=False):
    """Build (or keep) an engine for every step model, the reference models and the profile
    models of `manifest` (trt_manifest.Manifest; None: DIR's)."""
    manifest = manifest or load_manifest(deploy_dir)
    if fp16 is None:
        fp16 = manifest.precision in ("fp16", "mixed")
    rels = list(manifest.models)
    rels += [c.reference for c in manifest.cnns.values() if c.reference]
    rels += [p.model for p in manifest.profile]
    built = 0
    for rel in rels:
        out = engine_path(deploy_dir, rel)
        if os.path.isfile(out) and os.path.getmtime(out) >= os.path.getmtime(os.path.join(deploy_dir, rel)):
            continue
        if not os.path.isdir(os.path.dirname(out)):
            os.makedirs(os.path.dirname(out))
        data = build_engine(os.path.join(deploy_dir, rel), fp16)
        with open(out, "wb") as f:
            f.write(data)
        built += 1
        if verbose:
            print("built " + out, file=sys.stderr)
    return built


class Engine(object):
    """A deserialized engine with one context that owns no device memory."""

    def __init__(self, runtime, path):
        with open(path, "rb") as f:
            self.engine = runtime.deserialize_cuda_engine(f.read())
        if self.engine is None:
            raise RuntimeError("%s: cannot deserialize the engine (built by another TensorRT?)" % path)
        e = self.engine
        if trt_major() >= 10:
            self.names = [e.get_tensor_name(i) for i in range(e.num_io_tensors)]
            size = getattr(e, "device_memory_size_v2", None)
            self.scratch = int(size if size is not None else e.device_memory_size)
        else:
            self.names = [e.get_binding_name(i) for i in range(e.num_bindings)]
            self.scratch = int(e.device_memory_size)
        self.context = None

    def attach(self, scratch_ptr):
        """Create the context on `scratch_ptr` (shared by every engine of one stage)."""
        e = self.engine
        if trt_major() >= 10:
            ctx = e.create_execution_context(trt.ExecutionContextAllocationStrategy.USER_MANAGED)
            if hasattr(ctx, "set_device_memory"):
                _set(lambda p: ctx.set_device_memory(p, self.scratch), scratch_ptr)
            else:
                _set(lambda p: setattr(ctx, "device_memory", p), scratch_ptr)
        else:
            ctx = e.create_execution_context_without_device_memory()
            _set(lambda p: setattr(ctx, "device_memory", p), scratch_ptr)
        self.context = ctx
        return ctx

    def call(self, addresses, stream):
        """A call that runs the engine on {tensor name: device address}."""
        ctx = self.context
        if trt_major() >= 10:
            pairs = [(n, int(addresses[n])) for n in self.names]

            def run():
                for name, ptr in pairs:
                    ctx.set_tensor_address(name, ptr)
                if not ctx.execute_async_v3(stream_handle=stream):
                    raise RuntimeError("execute_async_v3 failed")
            return run
        bindings = [int(addresses[n]) for n in self.names]

        def run_v2():
            if not ctx.execute_async_v2(bindings=bindings, stream_handle=stream):
                raise RuntimeError("execute_async_v2 failed")
        return run_v2


def _set(setter, ptr):
    try:
        setter(ptr)
    except TypeError:        # bindings that want a capsule for void*
        setter(device_capsule(ptr))
