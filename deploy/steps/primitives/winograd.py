"""Winograd F(2x2, 3x3) (Lavin & Gray 2016; one of TASO's primitive families): the input is
cut into 4x4 tiles overlapping by 2, each transformed V = B^T d B; the weights are stored
transformed, U = G g G^T (16/9 of the plain weights); the 16 tile positions are 16 batched
products M = U V over channels, and every 2x2 output tile is A^T M A. The transforms are
written as MatMuls with the Kronecker products of the 1-D matrices. Supports padding and
groups; refuses kernels other than 3x3, stride > 1 and dilation > 1."""
from __future__ import annotations

import numpy as np

from deploy.steps.primitives.base import ConvSpec, add_bias, conv_weight, pad, reshape, weights, window

BT = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float32)
G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], np.float32)
AT = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.float32)


class Winograd:
    name = "winograd"
    layout = "nchw"
    nchwc_kernels = False

    def refuses(self, spec: ConvSpec) -> str | None:
        if (spec.kh, spec.kw) != (3, 3):
            return f"kernel {spec.kh}x{spec.kw} (F(2x2,3x3) needs 3x3)"
        if spec.stride != (1, 1):
            return f"stride {spec.stride[0]}x{spec.stride[1]} (needs 1)"
        if spec.dilation != (1, 1):
            return f"dilation {spec.dilation[0]}x{spec.dilation[1]} (needs 1)"
        return None

    def build(self, b, layer, spec: ConvSpec, x: str) -> str:
        s = spec
        g = s.group
        th, tw = -(-s.h_out // 2), -(-s.w_out // 2)
        hp, wp = s.padded
        xp = pad(b, s, x, extra_bottom=2 * th + 2 - hp, extra_right=2 * tw + 2 - wp)
        tiles = []
        for i in range(4):
            for j in range(4):
                win = window(b, xp, i, j, th, tw, (2, 2))                    # [N, C, th, tw]
                tiles.append(b.node("Unsqueeze", [win, b.const(b.tmp("ax"), np.array([0], np.int64))]))
        d = b.node("Concat", tiles, axis=0)                                  # [16, N, C, th, tw]
        d = reshape(b, b.node("Transpose", [d], perm=[0, 2, 1, 3, 4]), [16, -1])
        v = b.node("MatMul", [b.const(b.tmp("BB"), np.kron(BT, BT)), d])      # [16, C*N*P]
        v = reshape(b, v, [16, g, s.c_in // g, s.n * th * tw])
        w = conv_weight(b, layer).reshape(s.c_out, s.c_in // g, 9)
        u = (np.kron(G, G) @ w.reshape(-1, 9).T).reshape(16, g, s.c_out // g, s.c_in // g)
        m = b.node("MatMul", [weights(b, layer, "W_winograd", u), v])       # [16, G, O/G, N*P]
        y = b.node("MatMul", [b.const(b.tmp("AA"), np.kron(AT, AT)), reshape(b, m, [16, -1])])
        y = reshape(b, y, [2, 2, s.c_out, s.n, th, tw])
        y = reshape(b, b.node("Transpose", [y], perm=[3, 2, 4, 0, 5, 1]), [s.n, s.c_out, 2 * th, 2 * tw])
        if (2 * th, 2 * tw) != (s.h_out, s.w_out):
            y = window(b, y, 0, 0, s.h_out, s.w_out, (1, 1))
        return add_bias(b, layer, y, s.c_out)
