"""Can 5 labelled incidents teach the model a failure class it has never seen?

``python eval/new_class.py [--base models/default] [--fixture tests/fixtures/new_class] [--out reports/new-class]``

Retrains ``--base`` with the fixture's taxonomy entry and its 5 training incidents
(``train.jsonl``), then measures on the fixture's held-out incidents (``heldout.jsonl``, other
formats and wordings, never trained on) the recall of the new class — counting an abstention as
a miss — and, from the promotion gate, how the existing classes moved (macro-F1 on the base's
synthetic test split and on the real logs by grouped CV). Writes ``report.md``,
``metrics.json`` and ``recall_by_format.png`` to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main(argv: list[str] | None = None) -> int:
    from denpex_ml.dataset import load_incidents
    from denpex_ml.model.core import load_model
    from denpex_ml.model.persistence import models_root
    from denpex_ml.taxonomy import load_taxonomy
    from denpex_ml.training import retrain

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default=str(models_root() / "default"))
    ap.add_argument("--fixture", default="tests/fixtures/new_class")
    ap.add_argument("--out", default="reports/new-class")
    ap.add_argument("--cache", default=None, help="feature cache directory (default: the user cache)")
    args = ap.parse_args(argv)

    fixture = Path(args.fixture)
    tax_dir = fixture / "taxonomy"
    new_ids = sorted(set(load_taxonomy([tax_dir]).ids) - set(load_taxonomy().ids))
    if len(new_ids) != 1:
        print(f"expected exactly one new taxonomy id in {tax_dir}, found {new_ids}", file=sys.stderr)
        return 2
    new_id = new_ids[0]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        result = retrain(
            args.base,
            [fixture / "train.jsonl"],
            out=Path(tmp) / "model",
            taxonomy_dirs=[tax_dir],
            holdout=[fixture / "heldout.jsonl"],
            cache_dir=args.cache,
            track=False,
        )
        seconds = time.perf_counter() - t0
        model = load_model(result.model_dir, taxonomy_dirs=[tax_dir])
        labels = set(model.taxonomy.ids)
        held = load_incidents(fixture / "heldout.jsonl", labels=labels)
        rows = []
        for inc in held:
            d = model.classify(
                dict(inc.logs) if inc.logs is not None else None, text=inc.log if inc.logs is None else None
            )
            rows.append(
                {
                    "id": inc.id,
                    "format": str(inc.meta.get("launcher", "?")),
                    "label": d.label,
                    "best_guess": d.best_guess,
                    "confidence": round(d.confidence, 3),
                    "hit": d.label == new_id,
                }
            )
    gate = result.gate
    by_format: dict[str, list[bool]] = {}
    for r in rows:
        by_format.setdefault(r["format"], []).append(r["hit"])
    recall = sum(r["hit"] for r in rows) / max(len(rows), 1)
    deltas = {f"{r['set']}/{r['figure']}": r for r in gate.overall}
    metrics = {
        "new_class": new_id,
        "train_incidents": sum(1 for _ in (fixture / "train.jsonl").open()),
        "heldout_incidents": len(rows),
        "heldout_recall": recall,
        "heldout_recall_by_format": {k: sum(v) / len(v) for k, v in sorted(by_format.items())},
        "wrong_labels": dict(Counter(r["label"] for r in rows if not r["hit"])),
        "existing_classes": {
            k: {"base": v["base"], "candidate": v["candidate"], "delta": v["delta"]} for k, v in deltas.items()
        },
        "gate_passed": gate.passed,
        "gate_regressions": gate.regressions,
        "retrain_seconds": round(seconds, 1),
        "rows": rows,
    }
    (out / "metrics.json").write_text(json.dumps(metrics, indent=1) + "\n", encoding="utf-8")
    lines = [
        f"# New failure class from 5 incidents: `{new_id}`",
        "",
        f"Retrained `{args.base}` with `{tax_dir}` and {metrics['train_incidents']} incidents in {seconds:.0f} s.",
        "",
        f"**Held-out recall: {recall:.2f}** ({sum(r['hit'] for r in rows)}/{len(rows)}; an abstention counts as a miss)",
        "",
        "| format | held-out | recall |",
        "|---|---:|---:|",
        *[f"| {k} | {len(v)} | {sum(v) / len(v):.2f} |" for k, v in sorted(by_format.items())],
        "",
        "Existing classes (promotion gate, same data for both models):",
        "",
        "| data | figure | base | retrained | change |",
        "|---|---|---:|---:|---:|",
        *[
            f"| {r['set']} | {r['figure']} | {r['base']:.3f} | {r['candidate']:.3f} | {r['delta']:+.3f} |"
            for r in gate.overall
        ],
        "",
        f"Gate: {'passed' if gate.passed else 'FAILED'}" + ("" if gate.passed else ": " + "; ".join(gate.regressions)),
    ]
    (out / "report.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    _plot(by_format, out / "recall_by_format.png", new_id)
    print("\n".join(lines))
    return 0


def _plot(by_format: dict[str, list[bool]], path: Path, new_id: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted(by_format)
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.bar(names, [sum(by_format[n]) / len(by_format[n]) for n in names], color="#4477aa")
    ax.axhline(0.8, color="#cc6677", linestyle="--", label="target 0.8")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("held-out recall")
    ax.set_title(f"{new_id}: recall by log format after 5 training incidents")
    ax.legend(loc="lower right")
    plt.setp(ax.get_xticklabels(), rotation=30, ha="right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
