"""The report directory: ``report.md`` (tables for people) and ``metrics.json`` (for machines)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from denpex_ml.baselines import GPUALERT_MAP
from denpex_ml.evaluation.plots import safe_name
from denpex_ml.taxonomy.groups import GROUPS

if TYPE_CHECKING:
    from denpex_ml.evaluation.result import EvalResult

__all__ = ["HEADLINE", "render_markdown", "write_report"]

#: Metrics in the per-data-set tables, in order, with how they read.
HEADLINE: tuple[tuple[str, str], ...] = (
    ("n", "jobs with a known label"),
    ("n_unknown", "jobs labelled unknown"),
    ("top1", "top-1 accuracy"),
    ("top3", "top-3 accuracy"),
    ("macro_f1", "macro-F1"),
    ("ece", "ECE (10 bins)"),
    ("unknown_precision", "abstention precision"),
    ("unknown_recall", "abstention recall"),
    ("coverage", "coverage (known jobs answered)"),
    ("answered_accuracy", "accuracy of answered"),
    ("accuracy_with_abstention", "accuracy, unknown counted"),
    ("initiator_accuracy", "first-failing-rank accuracy"),
    ("initiator_accuracy_visible", "... where the rank is in the log"),
    ("seconds_mean", "seconds per job, mean"),
    ("seconds_p95", "seconds per job, p95"),
)


def _fmt(v: Any) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    if isinstance(v, float) and v.is_integer() and abs(v) >= 1:
        return str(int(v))
    if isinstance(v, float):
        return f"{v:.4f}" if abs(v) < 0.01 else f"{v:.3f}"
    return str(v)


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header), *("| " + " | ".join(r) + " |" for r in rows)]


def _group_table(metrics: dict[str, float], ds: str, systems: list[str]) -> list[str]:
    """Top-1 / top-3 per report group (hang, transport, crash, unknown, no-failure)."""
    rows = []
    for g in GROUPS:
        n = metrics.get(f"{ds}/group_{g}_n")
        if not n:
            continue
        cells = []
        for s in systems:
            infix = "" if s == "model" else f"{s}/"
            cells.append(
                f"{_fmt(metrics.get(f'{ds}/{infix}group_{g}_top1'))} / {_fmt(metrics.get(f'{ds}/{infix}group_{g}_top3'))}"
            )
        rows.append([g, str(int(n)), *cells])
    if not rows:
        return []
    return [
        "",
        "Per group (top-1 / top-3; an abstention is right only on `unknown` rows):",
        "",
        *_table(["group", "n", *systems], rows),
    ]


def _ablation_section(result: EvalResult) -> list[str]:
    """What each part of the model adds on real logs (grouped cross-validation, argmax answers)."""
    if not result.ablation:
        return []
    lines = [
        "## Ablation on real logs (grouped cross-validation)",
        "",
        "The head refitted per fold with parts of its evidence only, each row adding a part; answers are the "
        "argmax (no abstention), so `unknown` rows are left out. Optimistic like all cross-validation on these "
        "logs (fingerprints were written while reading many of them).",
        "",
    ]
    groups = [g for g in GROUPS if g != "unknown"]
    rows = []
    for name, m in result.ablation.items():
        cells = [f"{_fmt(m.get('top1'))} / {_fmt(m.get('top3'))}"]
        cells += [f"{_fmt(m.get(f'group_{g}_top1'))} / {_fmt(m.get(f'group_{g}_top3'))}" for g in groups]
        rows.append([name, *cells])
    lines += _table(["evidence", "all known", *groups], rows)
    return [*lines, ""]


def _prequential_section(result: EvalResult, plot: dict[str, str]) -> list[str]:
    """Test-then-train: each new batch of real logs scored before it was used for anything."""
    if not result.prequential:
        return []
    lines = [
        "## Test-then-train: real logs scored before they were used",
        "",
        "Each batch of newly collected real logs (grouped by source thread) was scored once, by the model of "
        "that moment, before it shaped fingerprints, recipes or training (`eval/prequential.py`). These figures "
        "predict accuracy on logs nobody has shown the model; cross-validation over logs the fingerprints were "
        "written from does not.",
        "",
    ]
    rows = []
    for p in result.prequential:
        summ = p.get("summary") or {}
        for g in ("all", *GROUPS):
            m = summ.get(g) or {}
            if not m.get("n"):
                continue
            rows.append(
                [
                    str(p.get("batch")),
                    f"`{p.get('model_id')}`",
                    g,
                    str(int(m["n"])),
                    _fmt(m.get("top1")),
                    _fmt(m.get("top3")),
                    _fmt(m.get("rule_top1")),
                    str(int(m.get("answered_unknown", 0))),
                    _fmt(m.get("ece_answered")),
                    _fmt(m.get("rank_accuracy")),
                ]
            )
    lines += _table(
        ["batch", "model", "group", "n", "top-1", "top-3", "rules top-1", "answered unknown", "ECE (answered)", "rank"],
        rows,
    )
    pooled = result.prequential_pooled
    if pooled:
        summ = pooled["summary"]
        lines += [
            "",
            f"**Pooled**, the {len(pooled['batches'])} most recent batches, each as scored by the newest model that "
            f"had not trained on it ({', '.join(f'`{f}`' for f in pooled['files'])}):",
            "",
        ]
        prow = []
        for g in ("known", *GROUPS):
            m = summ.get(g) or {}
            if m.get("n"):
                prow.append(
                    [
                        g,
                        str(int(m["n"])),
                        _fmt(m.get("top1")),
                        _fmt(m.get("top3")),
                        _fmt(m.get("rule_top1")),
                        _fmt(m.get("ece_answered")),
                    ]
                )
        lines += _table(["group", "n", "top-1", "top-3", "rules top-1", "ECE (answered)"], prow)
        lines += [
            "",
            f"Out of taxonomy: recall {_fmt(summ.get('unknown_recall'))}, "
            f"precision {_fmt(summ.get('unknown_precision'))}.",
        ]
    notes = sorted({str(p.get("model_id")) + ": " + str(p.get("note")) for p in result.prequential if p.get("note")})
    lines += ["", *(f"* {n}" for n in notes)]
    for kind, f in plot.items():
        lines += ["", f"![prequential {kind}]({f})"]
    return [*lines, ""]


def _abstention_rule(m: dict[str, Any]) -> str:
    """How the model decides to answer ``unknown``, in words."""
    if m.get("outside_threshold") is not None:
        return (
            f"`unknown` when the out-of-taxonomy detector's probability reaches {m['outside_threshold']} "
            f"(the abstention threshold {m['abstain_threshold']} serves only models without a detector)"
        )
    return f"abstention threshold {m['abstain_threshold']}"


def render_markdown(result: EvalResult, plots: dict[str, dict[str, str]] | None = None) -> str:
    plots = plots or {}
    m = result.model
    lines = [
        "# denpex_ml evaluation",
        "",
        f"Model `{m['path']}` (files hash `{m['files_hash']}`, encoder `{m['encoder']}`, taxonomy "
        f"`{m['taxonomy_hash']}`, training data `{m['training_data_hash']}`, trained on {m['training_counts']}); "
        f"{_abstention_rule(m)}. Run took {result.seconds:.0f} s.",
        "",
        "Every figure comes from data the model did not train on: the synthetic test split is a separate random "
        "stream of the model's own generator config; real incidents are scored out of fold (grouped by source "
        "thread, head refitted per fold). Baselines run on the same rows in the same run.",
        "",
        "## Data",
        "",
    ]
    lines += _table(
        ["data set", "jobs", "known", "unknown", "classes", "sha256[:16]", "how it was made"],
        [
            [ds, str(d["n"]), str(d["n_known"]), str(d["n_unknown"]), str(d["n_classes"]), f"`{d['hash']}`", d["split"]]
            for ds, d in result.data.items()
        ],
    )
    if result.notes:
        lines += ["", *(f"* {n}" for n in result.notes)]
    lines += ["", "Systems: " + "; ".join(f"**{k}** = {v}" for k, v in result.systems.items()), ""]
    metrics = result.metrics
    systems = list(result.systems)
    for ds, by in result.measured.items():
        lines += [f"## {ds}", "", result.data[ds]["description"] + ".", ""]
        rows = []
        for key, label in HEADLINE:
            vals = []
            for s in systems:
                if s != "model" and s not in by:
                    vals.append("not installed" if s == "gpualert" else "-")
                    continue
                infix = "" if s == "model" else f"{s}/"
                vals.append(_fmt(metrics.get(f"{ds}/{infix}{key}")))
            if any(v not in ("-", "not installed") for v in vals):
                rows.append([label, *vals])
        lines += _table(["metric", *systems], rows)
        lines += _group_table(metrics, ds, [s for s in systems if s == "model" or s in by])
        for kind, f in plots.get(ds, {}).items():
            lines += ["", f"![{ds} {kind}]({f})"]
        pc = by["model"].per_class
        if pc:
            others = [s for s in systems if s != "model" and s in by]
            f1 = {s: {r["label"]: r["f1"] for r in by[s].per_class} for s in others}
            lines += ["", "Per class (model; weakest F1 first; baseline F1 alongside):", ""]
            lines += _table(
                ["class", "support", "precision", "recall", "F1", *(f"F1 {s}" for s in others)],
                [
                    [r["label"], str(r["support"]), _fmt(r["precision"]), _fmt(r["recall"]), _fmt(r["f1"])]
                    + [_fmt(f1[s].get(r["label"])) for s in others]
                    for r in sorted(pc, key=lambda r: (r["f1"], r["label"]))
                ],
            )
        lines.append("")
    lines += _ablation_section(result)
    lines += _prequential_section(result, plots.get("prequential", {}))
    lines += [
        "## GPUAlert class mapping",
        "",
        "GPUAlert's first matching class, mapped onto taxonomy ids; no match = abstains.",
        "",
    ]
    lines += _table(["GPUAlert class", "taxonomy id"], [[k, f"`{v}`"] for k, v in GPUALERT_MAP.items()])
    return "\n".join(lines) + "\n"


def write_report(result: EvalResult, out: Path, plots: dict[str, dict[str, str]] | None = None) -> None:
    """Write ``report.md`` and ``metrics.json`` into ``out``."""
    payload = result.to_dict()
    payload["plots"] = plots or {}
    payload["gpualert_mapping"] = GPUALERT_MAP
    (out / "metrics.json").write_text(json.dumps(payload, indent=1, default=str) + "\n", encoding="utf-8")
    (out / "report.md").write_text(render_markdown(result, plots), encoding="utf-8")
    for name, rows in result.predictions.items():
        text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows)
        (out / f"predictions_{safe_name(name)}.jsonl").write_text(text, encoding="utf-8")
