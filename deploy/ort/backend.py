"""ONNX Runtime (CPU) backend: compile step models to sessions and bind them, once, to numpy
views of the arena with I/O binding, so a step is one `run_with_iobinding` and no copy.

Session choices (docs/run.md): one session per step model file, shared by every phase
that uses it; weights shared across a layer's variants through `add_initializer` (one copy
per layer); graph optimisations on (ORT_ENABLE_ALL); the CPU memory arena and memory
patterns on, so the few intermediates a step has inside ORT (a gathered window, a transpose,
NCHWc reorders) are reused across runs, in one CPU arena shared by every step session
(deploy/ort/process.py), not in `scratch_bytes` (ONNX Runtime reports no arena statistics) but
in the peak RSS `explore run` reports.

Layout (`layout="auto"`): ORT_ENABLE_ALL rewrites a Conv or pool into blocked NCHWc kernels
with a reorder in and out, once in a whole-graph session but at every step in a step session,
where a 1x1 conv on a large map loses more to them than it gains (MobileNetV2: features_2_expand
0.99 ms NCHWc vs 0.65 ms plain; features_2_dw 0.92 vs 1.25). "auto" times both on the step's
arena views and keeps the faster; "nchwc" and "nchw" force one; the same model either way.
"""
from __future__ import annotations

import hashlib
import shutil
import tempfile
import time
import weakref
from pathlib import Path
from typing import Callable

import numpy as np
import onnx
import onnxruntime as ort

from deploy.ort import optimize as ort_optimize
from deploy.ort.io_binding import bind_views, runner
from deploy.ort.process import form_options, session_options
from deploy.ort.weights import external_arrays, inline
from deploy.ort.weight_holders import one_form_per_layer, sole_models, weightless_state
from deploy.runtime.footprint import HeapMeter, trim_heap
from deploy.ort.providers import CPU
from deploy.runtime.manifest_records import Manifest
from sdf3.errors import InputError

NP_DTYPE = {"float32": np.float32, "float16": np.float16, "uint8": np.uint8, "int8": np.int8}


class OrtBackend:
    """Host arena + ONNX Runtime sessions. `threads`: intra-op threads per session
    (0 = ORT's default, one per core)."""

    name = "onnxruntime"

    def __init__(self, dtype: str = "float32", threads: int = 0, shared_pool: bool = False,
                 layout: str = "nchwc", optimize_in_child: bool | None = None,
                 arena: bool = True):
        if layout not in LAYOUTS:
            raise ValueError(f"layout: expected one of {LAYOUTS}, got {layout!r}")
        self.dtype = np.dtype(NP_DTYPE[dtype])
        self.threads = threads
        self.shared_pool = shared_pool
        self.layout = layout
        self.arena = arena      # False: no ORT memory arena (profile measures workspace)
        self.chosen: dict[str, str] = {}     # model path -> layout kept ("auto")
        self._sessions: dict[str, ort.InferenceSession] = {}
        self._weights: dict[str, dict[str, np.ndarray]] = {}   # session key -> its weights
        self._values: dict[str, dict[str, ort.OrtValue]] = {}  # the same, as ORT sees them
        self._by_content: dict[tuple, tuple[np.ndarray, ort.OrtValue]] = {}   # shared weights
        self._run_options = ort.RunOptions()   # read-only during a run: shared by every binding
        self._blocked: dict[str, frozenset[str]] = {}   # model path -> ports stored blocked
        self._transforms: dict[str, Callable] = {}      # model path -> its blocked form (plan)
        self.blocked_edges: set[str] = set()
        self._block = 0                      # channels per NCHWc block (layout "blocked")
        self.prepacked: set[str] = set()     # step models whose sessions pre-pack (`prepare`)
        self._frame_orders: dict[str, list[int]] = {}   # edges a frame copy stores channels-last
        self._packed: dict[str, dict[str, int]] = {}   # their sessions -> bytes handed, by type
        self._heap = HeapMeter()             # session_heap and bind_heap readings
        self._work = tempfile.mkdtemp(prefix="memtrade-ort-")   # optimised models, briefly
        weakref.finalize(self, shutil.rmtree, self._work, True)
        self._opt_paths: dict[tuple[str, str], Path] = {}
        self._count = 0
        # whole-process runners optimise in a child process (its heap never becomes ours)
        self.optimize_in_child = shared_pool if optimize_in_child is None else optimize_in_child
        self.helper_peak_rss_bytes = 0
        # called with (session key, the graph it runs, its weights) as each session is built:
        # the profile keeps the forms as deployed to measure them (deploy/profile/deployed_forms.py)
        self.on_session: Callable[[str, onnx.ModelProto, dict[str, np.ndarray]], None] | None = None
        # [heap the bindings kept, how many]: counted only when a caller sets it (the
        # profile's ladder, deploy/profile/ladder.py), off every other load
        self.bind_heap: list[int] | None = None
        # {session key: heap its building kept beyond new weights (a pre-packing step's on a
        # build without them, weight_holders.weightless_state)}: likewise for the ladder
        self.session_heap: dict[str, int] | None = None

    # -- storage formats ----------------------------------------------------------------
    def prepare(self, manifest: Manifest, root: str | Path) -> None:
        """Have ONNX Runtime optimise every step model up front (in a child process when
        `optimize_in_child`, see deploy/ort/optimize.py), and for layout "blocked" choose the
        edges held in ONNX Runtime's NCHWc layout (deploy/ort/blocked.py; an int8 deployment's
        edges channels-last, deploy/ort/channels_last.py); the other steps then run as with
        "auto". The models that hold a layer's weights run in one form, and an int8 model
        that alone holds its layers' weights pre-packs them (deploy/ort/weight_holders.py)."""
        root = Path(root)
        if manifest.per_layer and self.layout in ("auto", "blocked"):
            self.layout = "nchwc"     # edges of several types: each as the manifest lays it out
        if self.dtype.itemsize == 1 and not manifest.per_layer:
            self.prepacked = sole_models(manifest, root)
        if any(s.primitive for _, _, s in manifest.steps()):
            from deploy.ort.primitive_forms import prepare_plan_forms   # the plan fixes the forms
            self.blocked_edges = prepare_plan_forms(self, manifest, root)
            return
        models = sorted({str(root / s.model) for _, _, s in manifest.steps() if s.model})
        first = [self.layout if self.layout == "nchw" else "nchwc"]
        self.prefetch([(key, form) for key in models for form in first])
        if self.layout == "auto":
            self.prefetch([(key, "nchw") for key in models])
        graphs: dict[str, onnx.ModelProto] = {}

        def graph(rel: str) -> onnx.ModelProto:
            """Step model `rel` as ONNX Runtime optimised it: the graph only (the weights
            stay in the side files), shapes inline; read once for every choice below."""
            if rel not in graphs:
                path = self.optimize(str(root / rel), "nchwc")
                graphs[rel] = onnx.load(str(path), load_external_data=False)
                external_arrays(graphs[rel], path.parent, weights=False)
            return graphs[rel]
        if self.layout in ("auto", "blocked") and self.dtype.itemsize > 1:
            rels = sorted({s.model for _, _, s in manifest.steps() if s.model})
            for rel in one_form_per_layer(manifest, {rel: graph(rel) for rel in rels}):
                self.chosen[str(root / rel)] = "nchw"
        if self.layout != "blocked":
            return
        if self.dtype.itemsize == 1:
            self._channels_last(manifest, root, models, graph)
            self._prepacked_first()
            return
        from deploy.ort import blocked as ob
        block = ob.block_size(self.options())
        self._block = block
        candidates = {s.model for _, _, s in manifest.steps()
                      if s.model and any(b.kind == "edge" for b in s.bind)
                      and str(root / s.model) not in self.chosen}
        regions = {s.model for _, _, s in manifest.steps() if s.region}
        forms = {}
        for rel in sorted(candidates):
            opt = graph(rel)
            forms[rel] = (ob.region_form(opt, block) if rel in regions
                          else ob.step_form(opt, ob.graph_only(root / rel, opt)))
        self.blocked_edges = ob.choose(manifest, forms, block)
        for rel, ports, transform in ob.step_ports(manifest, forms, self.blocked_edges, block):
            self._blocked[str(root / rel)] = ports
            if transform is not None:
                self._transforms[str(root / rel)] = transform
        self.prefetch([(key, "nchw") for key in models if key not in self._blocked])

    def _channels_last(self, manifest: Manifest, root: Path, models: list[str],
                       graph: Callable[[str], onnx.ModelProto]) -> None:
        """Layout "blocked" of an int8 deployment: tensors stored channels-last
        (deploy/ort/channels_last.py; ONNX Runtime's quantized kernels have no NCHWc form);
        `graph(model)`: the model as ONNX Runtime optimised it (`prepare`)."""
        from deploy.ort import channels_last as cl
        choice = cl.choose(manifest, graph)
        self.blocked_edges, self._frame_orders = choice.edges, choice.frame_orders
        for rel, ports in choice.ports.items():
            self._blocked[str(root / rel)] = frozenset(ports)
            self._transforms[str(root / rel)] = lambda model, ports=ports: cl.strip(model, ports)
        self.prefetch([(key, "nchw") for key in models if key not in self._blocked])

    def _prepacked_first(self) -> None:
        """Build the pre-packing sessions (`prepacked`) before any other, those with the most
        weight bytes first. While ONNX Runtime builds one, it holds the layer's weights up to
        three times (the model it parses, the initializer, the packed copy); built where the
        executor first binds it, that transient stood on everything loaded before it.
        Measured on int8 MobileNetV2's least-memory plan (one thread): the classifier's
        session, built last, rose 2.3 MiB above what it keeps, and the load peak 1.6 MiB
        above the run's. A model whose graph has NCHWc nodes is left to `_tune`, which times
        it on its views."""
        def weight_bytes(key: str) -> int:
            side = self.optimize(key, "nchwc").with_suffix(".bin")
            return side.stat().st_size if side.exists() else 0
        for key in sorted(self.prepacked, key=weight_bytes, reverse=True):
            if key in self._blocked:
                self._session(key, "blocked")
            else:
                self._without_nchwc(key)

    def frame_copy(self, targets, shape: list[int], scale: float, zero_point: int) -> Callable:
        """An int8 Input step: the frame quantized into `targets` ((arena view, layout,
        `frame_order`)) in one ONNX Runtime call (deploy/ort/frame_copy.py)."""
        from deploy.ort.frame_copy import frame_copy
        return frame_copy(targets, shape, scale, zero_point, self.dtype, self.options())

    def frame_order(self, edge: str) -> list[int] | None:
        """How the Input's frame copy stores `edge`: the axes of its manifest layout in
        stored order (np.transpose), or None when stored as the manifest lays it out."""
        return self._frame_orders.get(edge)

    def prefetch(self, jobs: list[tuple[str, str]]) -> None:
        """Optimise (model, form) pairs not yet optimised, all in one child process."""
        todo = []
        for key, form in jobs:
            if (key, form) not in self._opt_paths:
                self._count += 1
                target = Path(self._work) / f"{self._count}.onnx"
                todo.append((key, str(target), form))
                self._opt_paths[(key, form)] = target
        if not self.optimize_in_child:
            for key, target, form in todo:
                ort_optimize.optimize(key, target, form, self.options())
            return
        peak = ort_optimize.in_child(todo)
        self.helper_peak_rss_bytes = max(self.helper_peak_rss_bytes, peak)

    # -- memory -------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> np.ndarray:
        """The arena, every page written now: np.zeros maps pages lazily, so untouched they
        would be counted in the first run's workspace rather than in the load."""
        arena = np.empty(max(int(nbytes), 1), np.uint8)
        arena.fill(0)
        return arena

    def view(self, arena: np.ndarray, offset: int, shape: list[int], dtype=None) -> np.ndarray:
        dt = np.dtype(dtype) if dtype is not None else self.dtype
        count = int(np.prod(shape))
        if offset < 0 or offset + count * dt.itemsize > arena.nbytes:   # never wrap or run past
            raise InputError(f"manifest: a view of {count * dt.itemsize} bytes at offset {offset} "
                             f"lies outside the arena of {arena.nbytes} bytes")
        return arena[offset: offset + count * dt.itemsize].view(dt).reshape(shape)

    # -- compile ------------------------------------------------------------------------
    def options(self) -> ort.SessionOptions:
        """The options of this backend's step sessions (threads, shared pool and arena)."""
        return session_options(self.threads, self.shared_pool, self.arena)

    def load(self, path: str | Path):
        """A compiled step model. With layout "auto" the choice is made at the first bind,
        where the step's real arena views are known (see `bind`)."""
        key = str(path)
        if key in self._blocked:
            return self._session(key, "blocked")
        if key in self.chosen and self.layout not in ("auto", "blocked"):
            return self._session(key, self.chosen[key])
        if self.layout in ("auto", "blocked"):
            return _Pending(key) if key not in self.chosen else self._session(key, self.chosen[key])
        return self._session(key, self.layout)

    def optimize(self, key: str, layout: str) -> Path:
        """ONNX Runtime's optimised form of step model `key` (ORT_ENABLE_ALL, without the
        NCHWc rewrite for "nchw"), in the backend's work folder with every initializer in a
        side file, so neither the graph nor Python ever holds them."""
        form = "nchw" if layout == "nchw" else "nchwc"
        self.prefetch([(key, form)])
        return self._opt_paths[(key, form)]

    def _session(self, key: str, layout: str) -> ort.InferenceSession:
        """The session of step `key`: ONNX Runtime's optimised model, its initializers read
        once into arrays this backend owns and handed over with `add_initializer` (no copy
        in ONNX Runtime: the model it parses has only external references), loaded without
        further optimisation and without pre-packing (a pre-packed copy is a second copy of
        the weights). Measured on a 3x3 256-channel conv: 6.9 MiB per session for 2.25 MiB of
        weights before, 2.25 after. A step model in `prepacked` (an int8 model that alone
        holds its layers' weights, deploy/ort/weight_holders.py) gets them inside its model
        instead and pre-packs them: ONNX Runtime keeps the packed copy alone."""
        skey = f"{layout}:{key}"
        if skey not in self._sessions:
            before = self._heap.in_use() if self.session_heap is not None else None
            known = len(self._by_content)
            okey = "nchw" if layout == "nchw" else "nchwc"
            path = self.optimize(key, layout)
            model = onnx.load(str(path), load_external_data=False)
            arrays = external_arrays(model, path.parent, known=self._by_content)
            if layout == "blocked":
                from deploy.ort import blocked as ob
                model = (self._transforms[key](model) if key in self._transforms
                         else ob.strip(model, self._blocked[key], self._block))
            opts = form_options(self.threads, self.shared_pool, self.arena, key in self.prepacked)
            if self.on_session is not None:
                self.on_session(skey, model, arrays)
            if key in self.prepacked:     # ONNX Runtime owns them: it packs them, keeps one copy
                plain = onnx.ModelProto() if before is not None else None
                if plain is not None:
                    plain.CopyFrom(model)      # the graph, weights by reference: to measure
                self._packed[skey] = inline(model, arrays)
                held, arrays, values = arrays, {}, {}
            else:
                arrays, values = self._shared_weights(arrays)
            for name, value in values.items():   # ONNX Runtime keeps pointers: keep both alive
                opts.add_initializer(name, value)
            run_path = path.with_name(f"{path.stem}.{layout}.onnx")
            onnx.save(model, str(run_path))
            del model
            self._sessions[skey] = ort.InferenceSession(str(run_path), opts, providers=CPU)
            self._weights[skey] = arrays
            self._values[skey] = values
            run_path.unlink()
            if before is not None and key in self.prepacked:
                self.session_heap[skey] = weightless_state(plain, run_path, held, form_options(
                    self.threads, self.shared_pool, self.arena), self._heap)
            self._drop_optimized(key, okey)     # ONNX Runtime read only the graph
            trim_heap()
            if before is not None and key not in self.prepacked:
                added = list(self._by_content.values())[known:]     # this session's new weights
                self.session_heap[skey] = (self._heap.in_use() - before
                                           - sum(a.nbytes for a, _ in added))
        return self._sessions[skey]

    def _shared_weights(self, arrays: dict[str, np.ndarray]
                        ) -> tuple[dict[str, np.ndarray], dict[str, ort.OrtValue]]:
        """One array (and OrtValue) per distinct weight tensor across every session: the
        bands of a region step (deploy/steps/regions.py) and a layer's part models hold the
        same weights in several models. Keyed by content, not name: ONNX Runtime names the
        tensors it reorders per model. Measured on app 1's least-memory plan (64 models):
        13.9 MiB of weights held before, 13.3 after (= the plan's parameters)."""
        out, values = {}, {}
        for name, arr in arrays.items():
            key = (arr.dtype.str, arr.shape, hashlib.blake2b(np.ascontiguousarray(arr).data, digest_size=16).digest())
            if key not in self._by_content:
                self._by_content[key] = (arr, ort.OrtValue.ortvalue_from_numpy(arr))
            out[name], values[name] = self._by_content[key]
        return out, values

    def _drop_optimized(self, key: str, okey: str) -> None:
        path = self._opt_paths.pop((key, okey), None)
        if path is not None:
            path.unlink(missing_ok=True)
            path.with_suffix(".bin").unlink(missing_ok=True)

    def drop_session(self, skey: str) -> None:
        """Forget the session under `skey` and its weights (a candidate form timed and done)."""
        self._sessions.pop(skey, None)
        self._weights.pop(skey, None)
        self._values.pop(skey, None)
        self._packed.pop(skey, None)
        live = {id(a) for arrays in self._weights.values() for a in arrays.values()}
        self._by_content = {k: v for k, v in self._by_content.items() if id(v[0]) in live}

    def fix_form(self, path: str | Path, layout: str, ports: frozenset[str] = frozenset(),
                 transform: Callable | None = None) -> None:
        """Run step model `path` with `layout` kernels ("nchw": ONNX Runtime's NCHWc rewrite
        off; "nchwc": on) or, with `ports`, its NCHWc form reading/writing those ports
        blocked, `transform(optimised graph)` making that form (a primitive plan,
        deploy/ort/primitive_forms.py)."""
        key = str(path)
        if ports:
            self._blocked[key] = frozenset(ports)
            if transform is not None:
                self._transforms[key] = transform
        else:
            self.chosen[key] = layout

    def _tune(self, key: str, inputs, outputs) -> ort.InferenceSession:
        """Build the step both ways on its own views, keep the faster (best of 5 calls
        after 2 warm-ups each); the slower session is dropped before the next is built.
        A step ONNX Runtime leaves without NCHWc kernels (Gemm, Softmax, Add, ...) is the
        same both ways: it is built once (two sessions of the classifier at once were
        MobileNetV2's load peak, 4.9 MiB above the run's)."""
        if (same := self._without_nchwc(key)) is not None:
            return same
        best, best_t = None, float("inf")
        for layout in ("nchwc", "nchw"):
            session = self._session(key, layout)
            call = self._bind(session, inputs, outputs)
            for _ in range(2):
                call()
            t = min(_timed(call) for _ in range(5))
            if t < best_t * (0.95 if layout == "nchw" else 1.0):  # plain only if clearly faster
                if best is not None:
                    self.drop_session(f"{best}:{key}")
                best, best_t = layout, t
            else:
                self.drop_session(f"{layout}:{key}")
        self.chosen[key] = best
        return self._sessions[f"{best}:{key}"]

    def _without_nchwc(self, key: str) -> ort.InferenceSession | None:
        """The session of step `key`, built once in its "nchwc" form, when ONNX Runtime left
        its graph without NCHWc kernels (the same both ways); None when it has them."""
        from deploy.ort.blocked import NCHWC
        graph = onnx.load(str(self.optimize(key, "nchwc")), load_external_data=False)
        if any(n.domain == NCHWC for n in graph.graph.node):
            return None
        self.chosen[key] = "nchwc"
        self._drop_optimized(key, "nchw")
        return self._session(key, "nchwc")

    def session_key(self, path: str | Path) -> str:
        """The key of the session step model `path` runs in once bound (its layout)."""
        key = str(path)
        return f"{'blocked' if key in self._blocked else self.chosen.get(key, self.layout)}:{key}"

    def bind(self, session, inputs: dict[str, np.ndarray],
             outputs: dict[str, np.ndarray]) -> Callable[[], None]:
        """A call that runs `session` reading and writing exactly these arrays."""
        if isinstance(session, _Pending):
            key = session.path
            session = (self._session(key, self.chosen[key]) if key in self.chosen
                       else self._tune(key, inputs, outputs))
        return self._bind(session, inputs, outputs)

    def _bind(self, session: ort.InferenceSession, inputs: dict[str, np.ndarray],
              outputs: dict[str, np.ndarray]) -> Callable[[], None]:
        before = self._heap.in_use() if self.bind_heap is not None else None
        # one RunOptions for every call: 350 B each otherwise
        call = runner(session, bind_views(session, inputs, outputs), self._run_options)
        if before is not None:
            self.bind_heap[0] += self._heap.in_use() - before
            self.bind_heap[1] += 1
        return call

    def param_bytes(self) -> int:
        """Bytes of the weights the sessions hold: the arrays this backend handed them, at
        the type they are stored in (fp32, NCHWc-reordered where ONNX Runtime blocks a conv;
        fp16 or int8 with its scales where the plan stores parameters so, converted inside
        each step: deploy/steps/builder.py), one copy per distinct tensor (`_shared_weights`),
        and the weights handed inside the model to a session that pre-packs them, at the
        bytes handed (ONNX Runtime reports no size of its packed copy; the footprint that
        `explore run` measures holds it)."""
        return int(sum(self.param_bytes_by_type().values()))

    def param_bytes_by_type(self) -> dict[str, int]:
        """`param_bytes` by element type of the arrays held ("float32", "float16", "int8")."""
        held = {id(a): a for arrays in self._weights.values() for a in arrays.values()}
        out: dict[str, int] = {}
        for a in held.values():
            out[a.dtype.name] = out.get(a.dtype.name, 0) + int(a.nbytes)
        for by_type in self._packed.values():
            for name, nbytes in by_type.items():
                out[name] = out.get(name, 0) + nbytes
        return out

    def notes(self) -> list[str]:
        """What the run's report must say about how this backend holds and computes data."""
        if self.dtype == np.float16:
            return ["ONNX Runtime's CPU kernels compute in fp32: each step casts the fp16 tensors "
                    "it reads and the stored weights it uses to fp32 (workspace) and its result "
                    "back to fp16 (docs/precision.md)"]
        return []


LAYOUTS = ("nchwc", "nchw", "auto", "blocked")


class _Pending:
    """A step model whose layout is chosen when it is first bound ("auto")."""

    def __init__(self, path: str):
        self.path = path


def _timed(call: Callable[[], None]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start
