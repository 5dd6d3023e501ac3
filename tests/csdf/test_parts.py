"""Table 2 and Equation 6: which layers go by parts, their phases and the rows they read."""
import pytest

from csdf.model import CNN, Layer
from csdf.parts import (Window, all_parts, can_split, h_min_in, h_min_out, phase_windows,
                        phases_for)
from sdf3.errors import InputError


def conv(name, src, out, k=3, s=1, pad=1, d=1):
    return Layer(name, "Conv", dict(kernel_shape=[k, k], strides=[s, s], pads=[pad] * 4,
                                    dilations=[d, d], group=1), inputs=[src], output_shape=out)


def small_cnn() -> CNN:
    """input 3x16x16 -> conv 5x5 same -> maxpool 2/2 -> conv 3x3 dilation 2 -> GAP -> flatten
    -> gemm -> softmax."""
    cnn = CNN("small")
    cnn.add_layer(Layer("in", "Input", output_shape=(1, 3, 16, 16)))
    cnn.add_layer(conv("c1", "in", (1, 8, 16, 16), k=5, pad=2))
    cnn.add_layer(Layer("pool", "MaxPool", dict(kernel_shape=[2, 2], strides=[2, 2],
                                               pads=[0, 0, 0, 0]),
                          inputs=["c1"], output_shape=(1, 8, 8, 8)))
    cnn.add_layer(conv("c2", "pool", (1, 8, 8, 8), k=3, pad=2, d=2))
    cnn.add_layer(Layer("gap", "GlobalAveragePool", {}, inputs=["c2"], output_shape=(1, 8, 1, 1)))
    cnn.add_layer(Layer("flat", "Flatten", {}, inputs=["gap"], output_shape=(1, 8, 1, 1)))
    cnn.add_layer(Layer("fc", "Gemm", {}, inputs=["flat"], output_shape=(1, 10, 1, 1)))
    cnn.add_layer(Layer("soft", "Softmax", {}, inputs=["fc"], output_shape=(1, 10, 1, 1)))
    return cnn


def test_table2_which_layers_split():
    cnn = small_cnn()
    assert [n for n in cnn.order() if can_split(cnn.layer(n))] == ["c1", "pool", "c2"]
    for op in ("Add", "Relu", "Clip", "HardSwish", "BatchNormalization", "Mul"):
        assert can_split(Layer("x", op))
    assert can_split(Layer("x", "Concat", {"axis": 1}))
    assert not can_split(Layer("x", "Concat", {"axis": 2}))    # along the height: whole
    assert not can_split(Layer("x", "Concat", {"axis": -2}))
    assert can_split(Layer("x", "Pad", {"pads": [0, 0, 1, 1, 0, 0, 1, 1], "mode": "constant"}))
    assert not can_split(Layer("x", "Pad", {"pads": [0, 0, 1, 1, 0, 0, 1, 1], "mode": "reflect"}))


def test_equation6_phases():
    cnn = small_cnn()
    genes = {"c1": 1, "pool": 1, "c2": 0, "gap": 1, "fc": 1, "in": 1}
    assert phases_for(cnn, genes) == {"in": 1, "c1": 16, "pool": 8, "c2": 1, "gap": 1,
                                      "flat": 1, "fc": 1, "soft": 1}
    assert all_parts(cnn) == {"in": 1, "c1": 16, "pool": 8, "c2": 8, "gap": 1, "flat": 1,
                              "fc": 1, "soft": 1}
    with pytest.raises(InputError, match="nope"):
        phases_for(cnn, {"nope": 1})


def test_h_min():
    cnn = small_cnn()
    assert h_min_in(cnn, "c1") == 5 and h_min_out(cnn, "c1") == 1
    assert h_min_in(cnn, "pool") == 2
    assert h_min_in(cnn, "c2") == 5            # 3x3 with dilation 2 spans 5 rows
    assert h_min_in(cnn, "fc") == 1 and h_min_out(cnn, "fc") == 1   # [1, 8, 1, 1]: one row
    assert h_min_in(cnn, "gap") == 8            # the whole input height


def brute_taps(p, k, s, pad, d, height):
    return [r for r in (p * s - pad + i * d for i in range(k)) if 0 <= r < height]


@pytest.mark.parametrize("k,s,pad,d,h", [(3, 1, 1, 1, 7), (3, 2, 1, 1, 8), (5, 1, 2, 1, 32),
                                         (3, 2, 0, 1, 8), (3, 1, 2, 2, 9), (7, 2, 3, 1, 15),
                                         (2, 2, 0, 1, 8), (3, 3, 4, 3, 10)])
def test_windows_match_direct_formula(k, s, pad, d, h):
    out_h = (h + 2 * pad - (k - 1) * d - 1) // s + 1
    win = Window(k, s, pad, d)
    for p in range(out_h):
        assert list(win.taps(p, h)) == brute_taps(p, k, s, pad, d, h)


def test_windows_of_a_layer_and_padding():
    cnn = small_cnn()
    # 5x5 'same' conv over 16 rows: first phase reads rows 0-2, the last rows 13-15
    w = phase_windows(cnn, "c1", "in", 16)
    assert (list(w[0]), list(w[1]), list(w[15])) == ([0, 1, 2], [0, 1, 2, 3], [13, 14, 15])
    assert list(phase_windows(cnn, "pool", "c1", 8)[3]) == [6, 7]
    assert phase_windows(cnn, "gap", "c2", 1) == [range(8)]
    with pytest.raises(InputError, match="c1"):
        phase_windows(cnn, "c1", "in", 5)
    with pytest.raises(InputError, match="gap"):
        phase_windows(cnn, "gap", "c2", 8)


def test_pad_and_broadcast_rows():
    cnn = CNN("t")
    cnn.add_layer(Layer("in", "Input", output_shape=(1, 4, 4, 4)))
    cnn.add_layer(Layer("pad", "Pad", {"pads": [0, 0, 2, 1, 0, 0, 1, 1]}, inputs=["in"],
                        output_shape=(1, 4, 7, 6)))
    cnn.add_layer(Layer("se", "GlobalAveragePool", {}, inputs=["in"], output_shape=(1, 4, 1, 1)))
    cnn.add_layer(Layer("mul", "Mul", {}, inputs=["in", "se"], output_shape=(1, 4, 4, 4)))
    # Pad shifts rows down by its top padding: phases 0, 1 and 6 read no real row
    assert [list(w) for w in phase_windows(cnn, "pad", "in", 7)] == [[], [], [0], [1], [2],
                                                                     [3], []]
    # the squeeze-excite scale (1 row) is read by every phase of the Mul
    assert phase_windows(cnn, "mul", "se", 4) == [range(0, 1)] * 4
    assert [list(w) for w in phase_windows(cnn, "mul", "in", 4)] == [[0], [1], [2], [3]]
