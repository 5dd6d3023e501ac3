"""Precision per layer (`precision: auto`, docs/precision.md "Per layer"): which precision
each layer of each CNN runs at, and so the bytes of what it stores.

A layer at precision p holds its parameters at p's `par_bytes` and stores its output tensor
at p's `data_bytes`; a layer that reads a tensor of another precision converts it as it reads
it. A CNN's input has no producing layer: it is stored at the widest precision any of its
readers runs at, so that no reader gets its input at less than its own precision.

`LADDER` orders the precisions a `precision: auto` search gives a layer, from the reference
(fp32, gene value 0: the all-zeros chromosome keeps every layer at fp32) to the fewest bytes.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Iterable, Mapping

from csdf.model import CNN, INPUT
from explorer.app.model import PRECISIONS, Precision

AUTO = "auto"                          # the app's `precision:` value that asks for this
LADDER = ("fp32", "fp16", "int8")      # a layer's precision gene: index into this


@dataclass(frozen=True)
class LayerPrecisions:
    """Each layer's precision: `chosen` holds (cnn, layer, precision name) for the layers
    given one, sorted; every other layer runs at `default`."""
    chosen: tuple[tuple[str, str, str], ...] = ()
    default: str = "fp32"

    @staticmethod
    def of(by_cnn: Mapping[str, Mapping[str, str]], default: str = "fp32") -> "LayerPrecisions":
        """From {cnn: {layer: precision name}}; names must be PRECISIONS' keys."""
        rows = []
        for cnn, layers in by_cnn.items():
            for layer, name in layers.items():
                if name not in PRECISIONS:
                    raise ValueError(f"{cnn}.{layer}: precision {name!r}, expected one of "
                                     f"{', '.join(PRECISIONS)}")
                rows.append((str(cnn), str(layer), str(name)))
        return LayerPrecisions(tuple(sorted(rows)), default)

    def by_cnn(self) -> dict[str, dict[str, str]]:
        """{cnn: {layer: precision name}} of the layers given one (plan.json's form)."""
        out: dict[str, dict[str, str]] = {}
        for cnn, layer, name in self.chosen:
            out.setdefault(cnn, {})[layer] = name
        return out

    def name(self, cnn: str, layer: str) -> str:
        return self._index.get((cnn, layer), self.default)

    def layer(self, cnn: str, layer: str) -> Precision:
        return PRECISIONS[self.name(cnn, layer)]

    def tensor(self, graph: CNN, cnn: str, src: str) -> Precision:
        """The precision the tensor `src` produces in CNN `cnn` (graph `graph`) is stored at:
        its producer's; a CNN input's is the widest of its readers'."""
        if graph.layer(src).op != INPUT:
            return self.layer(cnn, src)
        readers = [self.layer(cnn, d) for d in graph.graph.successors(src)] or [PRECISIONS[self.default]]
        return max(readers, key=lambda p: p.data_bytes)

    def param_bytes(self, cnns: Mapping[str, CNN]) -> int:
        """Bytes of every CNN's stored parameters, each at its layer's `par_bytes`; an ONNX
        tensor read by several layers is stored once, at the widest of their precisions."""
        total = 0
        for name, graph in cnns.items():
            seen: dict[str, tuple[int, int]] = {}
            for layer in graph.layers():
                width = self.layer(name, layer.name).par_bytes
                for ident, size in layer.param_items():
                    old = seen.get(ident)
                    seen[ident] = (size, width if old is None else max(old[1], width))
            total += sum(size * width for size, width in seen.values())
        return total

    @cached_property
    def _index(self) -> dict[tuple[str, str], str]:
        return {(c, l): n for c, l, n in self.chosen}


def uniform(cnns: Mapping[str, CNN], name: str) -> LayerPrecisions:
    """Every layer of every CNN at precision `name`."""
    return LayerPrecisions.of({c: {l: name for l in g.order()} for c, g in cnns.items()}, name)


def names(values: Iterable[int]) -> tuple[str, ...]:
    """Precision names of gene values (indices into LADDER)."""
    return tuple(LADDER[int(v)] for v in values)
