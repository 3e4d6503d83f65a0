"""Test-then-train: score a new batch of real logs before it is used for anything.

    python eval/prequential.py data/real/collected-2026-12-hangs.jsonl [--model DIR] [--tag NAME]
    python eval/prequential.py --pooled [N]      # the N most recent real batches together (default 6)
    python eval/prequential.py --calibration     # the model's confidence recalibration, judged batch by batch
    python eval/prequential.py --abstention [N]  # other abstention thresholds replayed on the N most recent batches
    python eval/prequential.py --detector [N]    # other out-of-taxonomy detector thresholds replayed likewise
    python eval/prequential.py --files F.json ...  # the rows of these kept files pooled (a chosen model per batch)

writes ``eval/prequential/<batch>__<tag>.json`` (figures per group and every row) and prints
the per-group table. Run it on a batch *once*, before the batch shapes fingerprints, recipes
or training, and commit the file: it is the estimate of accuracy on logs nobody has seen.
A record from a thread that ``data/real`` already holds, or whose log a held thread holds word for
word (one paste posted twice; ``--held DIR``), is refused first.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from denpex_ml.dataset import load_incidents
from denpex_ml.dataset.prequential import (
    POOLED_BATCHES,
    abstention_replay,
    confidence_map_check,
    detector_replay,
    pool_files,
    pool_latest,
    summarise,
    summary_table,
    write_prequential,
)
from denpex_ml.dataset.split import check_new_threads
from denpex_ml.errors import DatasetError
from denpex_ml.evaluation.prequential import score_batch
from denpex_ml.model.core import load_model


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("batch", type=Path, nargs="?")
    ap.add_argument(
        "--pooled",
        type=int,
        nargs="?",
        const=POOLED_BATCHES,
        default=None,
        metavar="N",
        help="print the N most recent real batches pooled, each as scored by the newest model that had not "
        f"trained on it (default {POOLED_BATCHES}), and exit",
    )
    ap.add_argument(
        "--calibration",
        action="store_true",
        help="the model's confidence recalibration: its map, the batches it was fitted on, and the pooled ECE "
        "when each of those batches is recalibrated by a map fitted on the others; then exit",
    )
    ap.add_argument(
        "--abstention",
        type=int,
        nargs="?",
        const=POOLED_BATCHES,
        default=None,
        metavar="N",
        help="replay other abstention thresholds on the N most recent real batches pooled (each row's "
        "head-scale confidence against each threshold; approximate, see abstention_replay), and exit",
    )
    ap.add_argument(
        "--detector",
        type=int,
        nargs="?",
        const=POOLED_BATCHES,
        default=None,
        metavar="N",
        help="replay other thresholds of the out-of-taxonomy detector on the N most recent real batches "
        "pooled (each row's recorded detector probability; approximate, see detector_replay), and exit",
    )
    ap.add_argument(
        "--files",
        type=Path,
        nargs="+",
        default=None,
        metavar="FILE",
        help="print the rows of these kept prequential files pooled (e.g. one release's batches as the "
        "previous release scored them), and exit",
    )
    ap.add_argument("--model", default=None, help="model directory (default: the shipped model)")
    ap.add_argument("--tag", default=None, help="name of the model in the output file (default: its id)")
    ap.add_argument("--out-dir", type=Path, default=Path(__file__).parent / "prequential")
    ap.add_argument("--note", default="")
    ap.add_argument(
        "--held",
        default=str(Path(__file__).parents[1] / "data" / "real"),
        help="folder of the real logs already held: a batch record from one of their threads, or with one "
        "of their logs word for word, is refused (default: data/real; an empty value skips the check)",
    )
    ap.add_argument("--taxonomy", action="append", default=None, help="taxonomy directory the model was trained with")
    args = ap.parse_args(argv)
    if args.files:
        chosen = pool_files(args.files)
        print("pooled: " + ", ".join(chosen["files"]))
        _print_table(chosen["summary"])
        return 0
    if args.pooled is not None:
        pooled = pool_latest(args.out_dir, last=args.pooled)
        if pooled is None:
            ap.error(f"no kept figures in {args.out_dir}")
        print("pooled: " + ", ".join(pooled["files"]))
        _print_table(pooled["summary"])
        return 0
    if args.abstention is not None or args.detector is not None:
        if args.abstention is not None:
            replay = abstention_replay(args.out_dir, last=args.abstention)
        else:
            replay = detector_replay(args.out_dir, last=args.detector)
        if replay is None:
            ap.error(f"no kept figures in {args.out_dir}")
        print(f"{'threshold':>9}{'accuracy':>10}{'known top1':>12}{'unk recall':>12}{'unk prec':>10}{'abstain':>9}")
        for r in replay:
            print(
                f"{r['threshold']:>9.2f}{r['accuracy']:>10.4f}{r['known_top1']:>12.4f}"
                f"{r['unknown_recall']:>12.3f}{r['unknown_precision']:>10.3f}{int(r['abstentions']):>9d}"
            )
        print(f"{int(replay[0]['n']) if replay else 0} rows replayed")
        return 0
    model = load_model(args.model, taxonomy_dirs=args.taxonomy) if args.batch or args.calibration else None
    if args.calibration:
        assert model is not None
        fitted = model.manifest.get("confidence_calibration") or {}
        if not fitted:
            ap.error(f"{model.model_id} was trained without a confidence recalibration")
        check = confidence_map_check(args.out_dir, among=fitted["batches"])
        print(f"{model.model_id}: map a={fitted['a']:.3f} b={fitted['b']:.3f} on {fitted['rows']} answers of")
        print("  " + ", ".join(fitted["batches"]))
        if check is not None:
            print(
                f"each batch recalibrated by a map fitted on the others: ECE {check['ece_before']:.3f} -> "
                f"{check['ece_after']:.3f} ({check['rows']} answers)"
            )
        return 0
    if args.batch is None or model is None:
        ap.error("give a batch file (or --pooled, --calibration)")
    labels = [*model.taxonomy.ids, "no-failure"]
    incidents = load_incidents(args.batch, labels=labels)
    if args.held:
        held = [p for p in sorted(Path(args.held).glob("*.jsonl")) if p.resolve() != args.batch.resolve()]
        try:
            check_new_threads(incidents, load_incidents(held, labels=labels))
        except DatasetError as exc:
            ap.error(f"{args.batch.name}: {exc}")
    rows = score_batch(model, incidents)
    tag = args.tag or model.model_id.replace("@", "-")
    path = write_prequential(
        rows,
        args.out_dir / f"{args.batch.stem}__{tag}.json",
        batch=args.batch.name,
        model_id=model.model_id,
        note=args.note,
        confidence_map=model.confidence_map if model.confidence_map != (1.0, 0.0) else None,
    )
    print(f"{args.batch.name}  model {model.model_id}  -> {path}")
    _print_table(summarise(rows))
    return 0


def _print_table(s: dict[str, Any]) -> None:
    print("\n".join(summary_table(s)))


if __name__ == "__main__":
    sys.exit(main())
