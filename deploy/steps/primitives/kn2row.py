"""kn2row (TASO Section 3, Anderson et al.'s GEMM-accumulating kn2row): the convolution as
kh*kw 1x1 products of the whole padded input, each shifted by its kernel tap and accumulated
into the output. The scratch is one [N, O, Hp*Wp] product instead of im2col's kh*kw-times
larger patch matrix. Supports padding, dilation and groups; stride > 1 computes the full
product and keeps every stride-th output (correct, but the work of stride 1); refuses
nothing."""
from __future__ import annotations

from deploy.steps.primitives.base import ConvSpec, add_bias, conv_weight, pad, reshape, weights, window


class Kn2row:
    name = "kn2row"
    layout = "nchw"
    nchwc_kernels = False

    def refuses(self, spec: ConvSpec) -> str | None:
        return None

    def build(self, b, layer, spec: ConvSpec, x: str) -> str:
        s = spec
        g = s.group
        hp, wp = s.padded
        xp = reshape(b, pad(b, s, x), [s.n, g, s.c_in // g, hp * wp])
        w = conv_weight(b, layer)                                            # [O, C/G, kh, kw]
        taps = w.reshape(g, s.c_out // g, s.c_in // g, s.kh, s.kw)
        acc = None
        for i in range(s.kh):
            for j in range(s.kw):
                wk = weights(b, layer, f"W_kn2row_{i}_{j}", taps[..., i, j])  # [G, O/G, C/G]
                prod = reshape(b, b.node("MatMul", [wk, xp]), [s.n, s.c_out, hp, wp])
                part = window(b, prod, i * s.dilation[0], j * s.dilation[1], s.h_out, s.w_out, s.stride)
                acc = part if acc is None else b.node("Add", [acc, part])
        return add_bias(b, layer, acc, s.c_out)
