"""Fused tiling (MAFAT / DeepThings FTP) on YOLOv2-16 and MobileNetV2.

--predictor: MAFAT's Algorithm 1 on YOLOv2-16 for every configuration of Algorithm 2's space
(paper: 5x5/8/2x2 predicted at 66 MB) and Table 1's Algorithm column, paper vs ours, for both
loop orders and the weight-count variants (docs/tiling.md).

    PYTHONPATH=$PWD python benchmarks/fused_tiling.py --predictor
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import csdf.zoo as zoo  # noqa: E402
from csdf.onnx_import import load_onnx  # noqa: E402
from explorer import mafat  # noqa: E402

MB = 2 ** 20
TABLE1 = {256: "1x1/NoCut", 192: "1x1/NoCut", 128: "2x2/NoCut", 96: "2x2/12/2x2", 80: "3x3/8/2x2",
          64: "5x5/8/2x2", 48: "5x5/8/2x2", 32: "5x5/8/2x2", 16: "5x5/8/2x2"}
PAPER_5x5_8_2x2 = 66


def predictor_table() -> None:
    cnn = load_onnx(zoo.model_path("yolov2_16"), "yolov2_16")
    print("MAFAT Algorithm 1 on YOLOv2-16 (MB = 2^20 B, bias 31 MB, weights per network)")
    print(f"{'config':<12} {'predicted MB':>12}  largest tile-layer per group")
    for config in mafat.search_order():
        p = mafat.predict(cnn, config)
        where = "; ".join(f"{g.layer} tile {g.tile} {g.elements * 4 / MB:.1f} MB" for g in p.peaks)
        print(f"{str(config):<12} {p.bytes / MB:>12.1f}  {where}")
    p = mafat.predict(cnn, mafat.Config(5, 8, 2)).bytes / MB
    print(f"\n5x5/8/2x2: ours {p:.1f} MB, paper {PAPER_5x5_8_2x2} MB, ratio {p / PAPER_5x5_8_2x2:.3f}")
    print("\nTable 1, Algorithm column (MB limit: paper | ours by variant)")
    variants = [(w, o) for w in ("per-network", "once", "none") for o in ("published", "tiling-first")]
    print(f"{'MB':>4} {'paper':<11} " + " ".join(f"{w[:8] + '/' + o[:6]:<16}" for w, o in variants))
    got = {v: {mb: str(mafat.get_config(cnn, mb * MB, mafat.Options(weight_copies=v[0], order=v[1]))[0])
               for mb in TABLE1} for v in variants}
    for mb, paper in TABLE1.items():
        print(f"{mb:>4} {paper:<11} " + " ".join(f"{got[v][mb] + (' ' if got[v][mb] == paper else '*'):<16}"
                                                 for v in variants))
    print("(* differs from the paper)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--predictor", action="store_true", help="only the MAFAT predictor tables")
    args = parser.parse_args()
    predictor_table()


if __name__ == "__main__":
    main()
