"""A fused-tiled group's step at run time: one call per tile of its model on arena views,
then the output tile pasted into the group's output tensor(s) (deploy/steps/tiles.py builds
the tile models and the step)."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

from deploy.runtime.manifest_records import Step
from sdf3.errors import InputError


def tile_calls(executor, backend, root: Path, step: Step, parity: int, run, sink_index: dict
               ) -> list[Callable[[], None]]:
    """One call per tile: ORT on the bound views, then the output tile pasted in place."""
    edges = executor.manifest.edges
    group = step.group
    in_e = edges[group.inputs[parity]]
    if in_e.layout not in ("nchw", "hncw") or not in_e.whole:
        raise InputError(f"plan: edge {group.inputs[parity]} feeds a tiled group but is not held whole")
    whole_in = executor.edge_view(in_e, 0, None)
    targets = [(executor.edge_view(edges[e[parity]], 0, None), edges[e[parity]].layout)
               for e in group.outs]
    for e in group.outs:
        if not edges[e[parity]].whole:
            raise InputError(f"plan: edge {e[parity]} leaves a tiled group but is not held whole")
    if group.sink is not None:
        targets.append((run.outputs[parity][sink_index[(run.name, group.sink)]], "nchw"))
    calls = []
    for t in group.tiles:
        session = backend.load(root / t.model)
        tile_out = np.zeros(t.out_shape, executor.dtype)
        executor.consts.append(tile_out)
        starts = np.asarray(t.starts, np.int64)
        ends = np.asarray(t.ends, np.int64)
        executor.consts.extend([starts, ends])
        outs = {**{f"mid{k}": executor.edge_view(edges[m.edges[parity]], 0, m.shape)
                   for k, m in enumerate(t.mids)}, "out": tile_out}
        run_tile = backend.bind(session, {"in0": whole_in, "starts": starts, "ends": ends}, outs)
        h0, h1, w0, w1 = t.region
        # rows-first (HNCW) targets take the tile transposed: a consumer by parts reads rows
        views = [(v[h0:h1, :, :, w0:w1], (2, 0, 1, 3)) if lay == "hncw" else (v[:, :, h0:h1, w0:w1], None)
                 for v, lay in targets]

        def call(run_tile=run_tile, views=views, tile_out=tile_out) -> None:
            run_tile()
            for v, perm in views:
                v[...] = tile_out if perm is None else tile_out.transpose(perm)
        calls.append(call)
    return calls
