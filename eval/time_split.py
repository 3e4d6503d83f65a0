"""A time split: train without the newest real batches, then score them as unseen.

    python eval/time_split.py --test br bt bu bv bw bx by bz ca --work /tmp/ts [--set real_weight=2 --set C=0.1]

takes ``training/configs/default.json``, removes the ``--test`` batches from its real data
(and the confidence recalibration, which is fitted on kept scores of those batches), applies the
``--set`` overrides, trains into ``WORK/model`` and scores every test batch with the model and
with the fingerprint rules alone, pooled. It answers "does this training choice help on logs the
model has not seen?" without spending new logs: run it once per choice, same ``--test``.

The figures are optimistic in absolute terms (fingerprints were written while reading the test
batches, and the taxonomy the model trains with holds them) but comparable between choices run
on the same split: only the training choice differs. Nothing is written to ``eval/prequential``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from denpex_ml.dataset import load_incidents
from denpex_ml.dataset.prequential import summarise, summary_table
from denpex_ml.evaluation.prequential import score_batch
from denpex_ml.model.core import load_model
from denpex_ml.training.config import TrainConfig
from denpex_ml.training.trainer import train

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "training" / "configs" / "default.json"


def _value(text: str) -> Any:
    """A ``--set`` value: JSON where it parses (numbers, true, null), else the string."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def split_config(config: dict[str, Any], test: list[str], overrides: dict[str, Any]) -> dict[str, Any]:
    """The default config without the ``test`` batches (and without recalibration), overridden."""
    names = {f"collected-2026-12-{b}.jsonl" for b in test}
    kept = [f for f in config["real_data"] if Path(f).name not in names]
    missing = names - {Path(f).name for f in config["real_data"]}
    if missing:
        raise SystemExit(f"not in the config's real data: {', '.join(sorted(missing))}")
    unknown = set(overrides) - set(config)
    if unknown:
        raise SystemExit(f"not a config field: {', '.join(sorted(unknown))}")
    return {**config, "real_data": kept, "confidence_calibration": None, **overrides}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--test", nargs="+", required=True, help="batch names held out and scored (br bt ...)")
    ap.add_argument("--work", type=Path, required=True, help="folder for the config and the model")
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE", help="override a config field")
    args = ap.parse_args(argv)
    overrides = dict(kv.split("=", 1) for kv in args.set)
    config = split_config(json.loads(CONFIG.read_text()), args.test, {k: _value(v) for k, v in overrides.items()})
    args.work.mkdir(parents=True, exist_ok=True)
    (args.work / "config.json").write_text(json.dumps(config, indent=1))
    result = train(TrainConfig.from_dict(config), out=args.work / "model")
    model = load_model(result.model_dir)
    rows = []
    for b in args.test:
        batch = REPO / "data" / "real" / f"collected-2026-12-{b}.jsonl"
        rows += score_batch(model, load_incidents(batch, labels=[*model.taxonomy.ids, "no-failure"]))
    s = summarise(rows)
    (args.work / "summary.json").write_text(json.dumps(s, indent=1))
    print(
        f"time split: {len(config['real_data'])} real files trained on, {len(rows)} logs of {' '.join(args.test)} scored"
    )
    print(f"overrides: {overrides or 'none'}; model trained in {result.seconds:.0f} s")
    print("\n".join(summary_table(s)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
