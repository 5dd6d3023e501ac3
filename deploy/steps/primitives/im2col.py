"""im2col + MatMul (TASO Section 3: the GEMM-based primitive with the kh*kw-times larger
patch matrix): every kernel tap's strided window of the padded input is stacked into the
[N, G, C/G*kh*kw, Ho*Wo] patch matrix, multiplied by the [G, O/G, C/G*kh*kw] weights.
Supports stride, padding, dilation and groups; refuses nothing."""
from __future__ import annotations

import numpy as np

from deploy.steps.primitives.base import ConvSpec, add_bias, conv_weight, pad, reshape, weights, window


class Im2col:
    name = "im2col"
    layout = "nchw"
    nchwc_kernels = False

    def refuses(self, spec: ConvSpec) -> str | None:
        return None

    def build(self, b, layer, spec: ConvSpec, x: str) -> str:
        s = spec
        g = s.group
        xp = pad(b, s, x)
        taps = []
        for i in range(s.kh):
            for j in range(s.kw):
                win = window(b, xp, i * s.dilation[0], j * s.dilation[1], s.h_out, s.w_out, s.stride)
                taps.append(b.node("Unsqueeze", [win, b.const(b.tmp("ax"), np.array([2], np.int64))]))
        cols = b.node("Concat", taps, axis=2) if len(taps) > 1 else taps[0]   # [N, C, k, Ho, Wo]
        cols = reshape(b, cols, [s.n, g, s.c_in // g * s.kh * s.kw, s.h_out * s.w_out])
        w = conv_weight(b, layer).reshape(g, s.c_out // g, -1)  # (c, i, j) order
        y = b.node("MatMul", [weights(b, layer, "W_im2col", w), cols])        # [N, G, O/G, P]
        y = reshape(b, y, [s.n, s.c_out, s.h_out, s.w_out])
        return add_bias(b, layer, y, s.c_out)
