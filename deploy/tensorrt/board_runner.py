#!/usr/bin/env python3
"""Standalone TensorRT runner for a memtrade deployment (the DIR of `explore deploy`).

Runs on the board itself: needs only numpy, tensorrt and the CUDA runtime (libcudart through
ctypes), and runs under Python 3.6 (JetPack 4.6, TensorRT 8.2) as well as 3.11 (TensorRT 10).
Copy this file and its modules (trt_cuda.py, trt_manifest.py, trt_engines.py, trt_board.py,
trt_measure.py) next to the deployment (explore deploy does) and run:

    python3 board_runner.py build DIR            # engines from the ONNX step models
    python3 board_runner.py run DIR --frames 50 --json
    python3 board_runner.py profile DIR --out profile.json   # needs `deploy --with-profile`

What it does is the executor of deploy/runtime/executor.py on the GPU: one device arena of the
manifest's device size with every buffer at its 256-byte aligned offset; per engine one
execution context without device memory of its own, all of them sharing one scratch region
(per pipeline stage); every step binds arena addresses (TensorRT 8: a bindings list by index
and execute_async_v2; TensorRT 10: set_tensor_address and execute_async_v3).

This module holds the command line; the work is in trt_cuda.py (CUDA runtime, tensorrt
import), trt_manifest.py (manifest.json read once into records), trt_engines.py (engines),
trt_board.py (the arena executor) and trt_measure.py (run and profile), whose names it
re-exports. Each imports its siblings
relatively inside the package deploy.tensorrt and flat when DIR runs this file as a script.
"""
import argparse
import json
import sys

try:
    from .trt_board import Board
    from .trt_cuda import ALIGN, D2H, H2D, Cuda, trt, trt_major
    from .trt_engines import Engine, build_all, build_engine, engine_path
    from .trt_manifest import Manifest, load_manifest, read_manifest
    from .trt_measure import Cycle, input_frames, input_shapes, measure, profile
except ImportError:  # run as a script: the modules lie flat in DIR, which is sys.path[0]
    from trt_board import Board
    from trt_cuda import ALIGN, D2H, H2D, Cuda, trt, trt_major
    from trt_engines import Engine, build_all, build_engine, engine_path
    from trt_manifest import Manifest, load_manifest, read_manifest
    from trt_measure import Cycle, input_frames, input_shapes, measure, profile

__all__ = ["ALIGN", "D2H", "H2D", "Board", "Cuda", "Cycle", "Engine", "Manifest", "build_all",
           "build_engine", "engine_path", "input_frames", "input_shapes", "load_manifest", "main",
           "measure", "profile", "read_manifest", "trt", "trt_major"]


def main(argv=None):
    parser = argparse.ArgumentParser(description="run a memtrade deployment with TensorRT")
    sub = parser.add_subparsers(dest="cmd")
    b = sub.add_parser("build")
    b.add_argument("dir")
    b.add_argument("--fp16", action="store_true", default=None)
    r = sub.add_parser("run")
    r.add_argument("dir")
    r.add_argument("--frames", type=int, default=20)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--json", action="store_true")
    p = sub.add_parser("profile")
    p.add_argument("dir")
    p.add_argument("--out", default="profile-tensorrt.json")
    p.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args(argv)
    if trt is None:
        print("board_runner: the tensorrt package is not installed", file=sys.stderr)
        return 2
    if args.cmd == "build":
        print("built %d engines" % build_all(args.dir, fp16=args.fp16, verbose=True))
    elif args.cmd == "run":
        build_all(args.dir)
        res = measure(args.dir, args.frames, args.seed)
        if args.json:
            print(json.dumps(res))
        else:
            for n, v in res["fps"].items():
                print("%s: %.1f fps (plain engine %.1f), %s calls/frame, max |diff| %s"
                      % (n, v, res["reference_fps"].get(n, float("nan")), res["calls_per_frame"][n],
                         res["max_abs_diff"][n]))
            print("device arena %d B, device bytes %d, engines %d B, peak RSS %d B"
                  % (res["arena_bytes"], res["device_bytes"], res["param_bytes"], res["peak_rss_bytes"]))
    elif args.cmd == "profile":
        build_all(args.dir)
        with open(args.out, "w") as f:
            json.dump(profile(args.dir, args.repeats), f, indent=1)
        print("wrote " + args.out)
    else:
        parser.print_help()
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
