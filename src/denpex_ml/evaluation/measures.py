"""Metrics of one system on one data set: a flat dict plus the tables and curves behind it.

Rows whose true label is ``unknown`` (index -1) count only for abstention; a system abstains
on a row when its prediction is -1 (the model's own decision, or an all-zero baseline row).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sklearn.metrics import confusion_matrix

from denpex_ml.metrics import classification_metrics, per_class_table
from denpex_ml.taxonomy.groups import GROUPS, group_of

__all__ = ["Measured", "coverage_curve", "group_metrics", "measure", "reliability_bins"]


@dataclass
class Measured:
    """Flat metrics plus the per-class table, confusion matrix and curves."""

    metrics: dict[str, float]
    per_class: list[dict[str, Any]] = field(default_factory=list)
    confusion: list[list[int]] = field(default_factory=list)
    coverage: list[dict[str, float]] = field(default_factory=list)
    reliability: list[dict[str, float]] = field(default_factory=list)


def reliability_bins(confidence: np.ndarray, correct: np.ndarray, n_bins: int = 10) -> list[dict[str, float]]:
    """Equal-width confidence bins: count, mean confidence and accuracy of each non-empty bin."""
    bins = np.clip((np.asarray(confidence) * n_bins).astype(int), 0, n_bins - 1)
    out = []
    for b in range(n_bins):
        m = bins == b
        if m.any():
            out.append(
                {
                    "lo": b / n_bins,
                    "hi": (b + 1) / n_bins,
                    "n": int(m.sum()),
                    "confidence": float(np.mean(confidence[m])),
                    "accuracy": float(np.mean(correct[m])),
                }
            )
    return out


def coverage_curve(confidence: np.ndarray, correct: np.ndarray, steps: int = 20) -> list[dict[str, float]]:
    """Accuracy among the rows answered when answering only at confidence >= t, for t in [0, 1)."""
    out = []
    for t in np.linspace(0.0, 1.0, steps, endpoint=False):
        keep = confidence >= t
        out.append(
            {
                "threshold": round(float(t), 4),
                "coverage": float(keep.mean()) if len(keep) else float("nan"),
                "accuracy": float(correct[keep].mean()) if keep.any() else float("nan"),
            }
        )
    return out


def measure(
    proba: np.ndarray,
    y: np.ndarray,
    pred: np.ndarray,
    labels: Sequence[str],
    *,
    initiator: Sequence[tuple[int | None, int | None, bool]] | None = None,
    seconds: np.ndarray | None = None,
    order: np.ndarray | None = None,
) -> Measured:
    """Metrics of one system.

    Parameters
    ----------
    proba:
        (n, n_classes) class scores (rows may be all zero: no evidence).
    y:
        True class indices, -1 for ``unknown``.
    pred:
        The system's final answer per row, -1 when it abstains.
    initiator:
        Per row (true first failing rank, predicted rank, true rank visible in the log);
        rows with no true rank are skipped.
    seconds:
        Wall-clock seconds per job.
    order:
        Per row, the class indices as the system lists its alternatives, best first
        (:func:`~denpex_ml.model.alternatives.alternatives_order`); default descending ``proba``.
    """
    proba = np.asarray(proba, dtype=float)
    y = np.asarray(y)
    pred = np.asarray(pred)
    m = classification_metrics(proba, y, order=order) if len(y) else {"n": 0.0}
    known = y >= 0
    m["n_unknown"] = float((~known).sum())
    abstain = pred < 0
    m["abstain_rate"] = float(abstain.mean()) if len(y) else float("nan")
    if (~known).any():
        m["unknown_recall"] = float(abstain[~known].mean())
    if abstain.any() and known.any():
        m["unknown_precision"] = float((~known)[abstain].mean())
    if len(y):
        m["accuracy_with_abstention"] = float((pred == y).mean())
    if known.any():
        m["coverage"] = float((~abstain[known]).mean())
        m["answered_accuracy"] = (
            float((pred[known] == y[known])[~abstain[known]].mean()) if (~abstain[known]).any() else float("nan")
        )
    if initiator is not None:
        rows = [(t, p, vis) for t, p, vis in initiator if t is not None]
        vis = [(t, p) for t, p, v in rows if v]
        m["initiator_n"] = float(len(rows))
        m["initiator_accuracy"] = float(np.mean([t == p for t, p, _ in rows])) if rows else float("nan")
        m["initiator_n_visible"] = float(len(vis))
        m["initiator_accuracy_visible"] = float(np.mean([t == p for t, p in vis])) if vis else float("nan")
    if seconds is not None and len(seconds):
        m["seconds_mean"] = float(np.mean(seconds))
        m["seconds_p95"] = float(np.percentile(seconds, 95))
    out = Measured(m)
    if known.any():
        P, t = proba[known], y[known]
        conf = P.max(axis=1)
        correct = P.argmax(axis=1) == t
        out.per_class = per_class_table(P, t, labels)
        out.coverage = coverage_curve(conf, correct)
        out.reliability = reliability_bins(conf, correct)
    if len(y):
        idx = list(range(-1, len(labels)))  # -1 = unknown / abstained, first row and column
        out.confusion = confusion_matrix(y, pred, labels=idx).tolist()
    return out


def group_metrics(
    proba: np.ndarray, y: np.ndarray, pred: np.ndarray, labels: Sequence[str], order: np.ndarray | None = None
) -> dict[str, float]:
    """``group_<g>_n``, ``group_<g>_top1`` and ``group_<g>_top3`` for every report group present.

    Groups are :data:`~denpex_ml.taxonomy.groups.GROUPS` (hang, transport, crash, unknown,
    no-failure). ``top1`` is the final answer: an abstention is wrong on a known failure and
    right on an ``unknown`` row; ``top3`` looks at the three best entries (right for an
    ``unknown`` row only when the system abstained). ``order`` as in :func:`measure`.
    """
    proba = np.asarray(proba, dtype=float)
    y = np.asarray(y)
    pred = np.asarray(pred)
    names = np.asarray([group_of(labels[i]) if i >= 0 else "unknown" for i in y])
    out: dict[str, float] = {}
    if order is not None:
        top3 = np.asarray(order)[:, :3]
    else:
        top3 = np.argsort(-proba, axis=1)[:, :3] if len(y) else np.zeros((0, 3), dtype=int)
    for g in GROUPS:
        m = names == g
        if not m.any():
            continue
        hit1 = pred[m] == y[m]
        hit3 = np.asarray(
            [(yy < 0 and pp < 0) or (yy >= 0 and yy in t) for yy, pp, t in zip(y[m], pred[m], top3[m], strict=True)]
        )
        out[f"group_{g}_n"] = float(m.sum())
        out[f"group_{g}_top1"] = float(hit1.mean())
        out[f"group_{g}_top3"] = float((hit1 | hit3).mean())
    return out
