"""First failing rank on labelled real logs: ``python eval/first_rank.py [FILE.jsonl ...] [--model DIR]``.

Classifies every record that states its ``initiating_rank`` with the shipped model (or
``--model``) and prints how often the diagnosis names that rank, how often it names none, and
each miss. In-sample for any rule written while reading those logs; ``denpex-ml eval`` gives
the grouped cross-validated figure (``real/initiator_accuracy``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("files", nargs="*", type=Path, help="incident JSONL files [data/real/*.jsonl]")
    ap.add_argument("--model", type=Path, default=None, help="model directory [the shipped model]")
    args = ap.parse_args(argv)
    from denpex_ml import load_model

    model = load_model(args.model) if args.model else load_model()
    files = args.files or sorted((REPO / "data" / "real").glob("*.jsonl"))
    n = ok = none = 0
    misses = []
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            rec = json.loads(line)
            if rec.get("initiating_rank") is None:
                continue
            d = model.classify(text=rec["log"])
            n += 1
            if d.initiating_rank == rec["initiating_rank"]:
                ok += 1
            else:
                none += d.initiating_rank is None
                misses.append((rec["id"], rec["label"], rec["initiating_rank"], d.initiating_rank))
    print(f"{n} logs state a rank: {ok} named right ({ok / max(n, 1):.2f}), {none} answered none")
    for rid, label, want, got in misses:
        print(f"  {rid}  {label}: stated {want}, named {got}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
