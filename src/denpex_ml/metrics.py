"""Classification metrics shared by training, evaluation and the promotion gate.

Every evaluator returns a flat ``dict[str, float]``; :data:`PRIMARY_METRIC` names the one
that decides.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sklearn.metrics import f1_score, precision_recall_fscore_support

__all__ = ["PRIMARY_METRIC", "classification_metrics", "expected_calibration_error", "per_class_table"]

PRIMARY_METRIC = "macro_f1"


def expected_calibration_error(confidence: np.ndarray, correct: np.ndarray, n_bins: int = 10) -> float:
    """ECE with equal-width bins: sum over bins of |accuracy - mean confidence| x bin share."""
    confidence = np.asarray(confidence, dtype=float)
    correct = np.asarray(correct, dtype=float)
    if len(confidence) == 0:
        return float("nan")
    bins = np.clip((confidence * n_bins).astype(int), 0, n_bins - 1)
    ece = 0.0
    for b in range(n_bins):
        m = bins == b
        if m.any():
            ece += m.mean() * abs(correct[m].mean() - confidence[m].mean())
    return float(ece)


def classification_metrics(
    proba: np.ndarray,
    y: np.ndarray,
    *,
    abstain_threshold: float | None = None,
    unknown: int = -1,
    order: np.ndarray | None = None,
    abstain: np.ndarray | None = None,
) -> dict[str, float]:
    """Top-1/top-3 accuracy, macro-F1 and ECE over rows with a known label (``y != unknown``);
    with a threshold also the abstention precision/recall on ``unknown`` rows. ``order``: each
    row's class indices, best first, as the system lists its alternatives (default: descending
    ``proba``); top-3 looks at its first three. ``abstain``: which rows the system answers
    ``unknown`` (e.g. the out-of-taxonomy detector's verdicts), instead of a threshold."""
    proba = np.asarray(proba)
    y = np.asarray(y)
    known = y != unknown
    out: dict[str, float] = {"n": float(known.sum())}
    if known.any():
        P, t = proba[known], y[known]
        pred = P.argmax(axis=1)
        top3 = np.asarray(order)[known][:, :3] if order is not None else np.argsort(-P, axis=1)[:, :3]
        out["top1"] = float((pred == t).mean())
        out["top3"] = float(np.mean([t[i] in top3[i] for i in range(len(t))]))
        out["macro_f1"] = float(f1_score(t, pred, average="macro", labels=np.unique(t), zero_division=0))
        out["ece"] = expected_calibration_error(P.max(axis=1), pred == t)
    if abstain is not None or abstain_threshold is not None:
        abstain = np.asarray(abstain, dtype=bool) if abstain is not None else proba.max(axis=1) < abstain_threshold
        pred_all = np.where(abstain, unknown, proba.argmax(axis=1))
        is_unknown = y == unknown
        out["abstain_rate"] = float(abstain.mean())
        if is_unknown.any():
            out["unknown_recall"] = float(abstain[is_unknown].mean())
        if abstain.any():
            out["unknown_precision"] = float(is_unknown[abstain].mean())
        out["accuracy_with_abstention"] = float((pred_all == y).mean())
        if known.any():
            out["coverage"] = float((~abstain[known]).mean())
    return out


def per_class_table(
    proba: np.ndarray, y: np.ndarray, labels: Sequence[str], unknown: int = -1
) -> list[dict[str, float | str]]:
    """Precision, recall, F1 and support per class (rows with a known label)."""
    known = np.asarray(y) != unknown
    t = np.asarray(y)[known]
    pred = np.asarray(proba)[known].argmax(axis=1)
    idx = list(range(len(labels)))
    p, r, f, s = precision_recall_fscore_support(t, pred, labels=idx, zero_division=0)
    return [
        {"label": labels[i], "precision": float(p[i]), "recall": float(r[i]), "f1": float(f[i]), "support": int(s[i])}
        for i in idx
        if s[i] > 0 or (pred == i).any()
    ]
