"""Test-then-train records: each real batch's logs as a model scored them before the batch was
used for anything (:class:`PrequentialRow`), summarised per group, kept as JSON files in
``eval/prequential/``, pooled over the most recent batches, and the confidence recalibration
fitted on them. Scoring a batch is :func:`denpex_ml.evaluation.prequential.score_batch`.

Every figure is reported per group (:data:`denpex_ml.taxonomy.groups.GROUPS`): ``top1``
counts an abstention as wrong on a known failure and right on an ``unknown`` one; ``top3``
looks at the three best taxonomy entries (the best guess even when the model abstains).
"""

from __future__ import annotations

import json
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from denpex_ml.errors import DatasetError
from denpex_ml.metrics import expected_calibration_error
from denpex_ml.taxonomy import UNKNOWN_ID
from denpex_ml.taxonomy.groups import GROUPS, NO_FAILURE_ID

__all__ = [
    "CALIBRATION_BATCHES",
    "POOLED_BATCHES",
    "PrequentialRow",
    "confidence_map_check",
    "fit_confidence_map",
    "load_prequential",
    "pool_latest",
    "summarise",
    "summary_table",
    "write_prequential",
]


@dataclass(frozen=True)
class PrequentialRow:
    """One real log of a batch, as the model and the rules saw it."""

    id: str
    source: str
    label: str
    group: str
    label_confidence: str
    predicted: str
    confidence: float
    top3: tuple[str, ...]
    rule: str
    initiating_rank: int | None
    predicted_rank: int | None
    rank_visible: bool
    seconds: float
    error: str | None = None
    #: for ``unknown`` answers: why (``Diagnosis.unknown_reason``), and the head's probability of
    #: its best entry (an abstention's stated confidence is the detector's probability when the
    #: detector decided, not one minus it); empty / None in files kept before the detector
    unknown_reason: str = ""
    best_probability: float | None = None
    #: the out-of-taxonomy detector's probability (None for a model without one)
    outside_probability: float | None = None

    @property
    def correct(self) -> bool:
        return self.predicted == self.label

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["top3"] = list(self.top3)
        d["correct"] = self.correct
        return d


def _group_metrics(rows: Sequence[PrequentialRow]) -> dict[str, float]:
    n = len(rows)
    if not n:
        return {"n": 0.0}
    out: dict[str, float] = {"n": float(n)}
    out["top1"] = float(np.mean([r.correct for r in rows]))
    out["top3"] = float(np.mean([r.correct or r.label in r.top3 for r in rows]))
    out["rule_top1"] = float(np.mean([r.rule == r.label for r in rows]))
    out["answered_unknown"] = float(sum(r.predicted == UNKNOWN_ID for r in rows))
    answered = [r for r in rows if r.predicted not in (UNKNOWN_ID, "error")]
    if answered:
        conf = np.asarray([r.confidence for r in answered])
        corr = np.asarray([r.correct for r in answered], dtype=float)
        out["answered"] = float(len(answered))
        out["answered_accuracy"] = float(corr.mean())
        out["answered_mean_confidence"] = float(conf.mean())
        out["ece_answered"] = expected_calibration_error(conf, corr)
    # a healthy log has no failing rank (a few kept rows of early batches state one: not counted)
    ranked = [r for r in rows if r.initiating_rank is not None and r.rank_visible and r.label != NO_FAILURE_ID]
    if ranked:
        out["rank_n"] = float(len(ranked))
        out["rank_accuracy"] = float(np.mean([r.predicted_rank == r.initiating_rank for r in ranked]))
    return out


def summarise(rows: Sequence[PrequentialRow]) -> dict[str, Any]:
    """Figures per group, for all rows and for rows whose label is not ``unconfirmed``."""
    out: dict[str, Any] = {"all": _group_metrics(rows)}
    known = [r for r in rows if r.label != UNKNOWN_ID]
    out["known"] = _group_metrics(known)
    for g in GROUPS:
        out[g] = _group_metrics([r for r in rows if r.group == g])
    abstained = [r for r in rows if r.predicted == UNKNOWN_ID]
    unknown_rows = [r for r in rows if r.label == UNKNOWN_ID]
    out["unknown_recall"] = float(np.mean([r.predicted == UNKNOWN_ID for r in unknown_rows])) if unknown_rows else None
    out["unknown_precision"] = float(np.mean([r.label == UNKNOWN_ID for r in abstained])) if abstained else None
    out["confident"] = _group_metrics([r for r in rows if r.label_confidence != "unconfirmed"])
    return out


def summary_table(s: dict[str, Any]) -> list[str]:
    """The lines of a :func:`summarise` result as the scripts print it: per group n, top-1, top-3,
    the rules' top-1, ``unknown`` answers and first-rank accuracy, then the known logs' line."""
    lines = [f"{'group':<12}{'n':>5}{'top1':>7}{'top3':>7}{'rules':>7}{'unk':>5}{'rank':>7}"]
    for g in ("all", *GROUPS):
        m = s[g]
        if m.get("n"):
            lines.append(
                f"{g:<12}{int(m['n']):>5}{m['top1']:>7.2f}{m['top3']:>7.2f}{m['rule_top1']:>7.2f}"
                f"{int(m['answered_unknown']):>5}{m.get('rank_accuracy', float('nan')):>7.2f}"
            )
    lines.append(f"unknown recall {s['unknown_recall']}  precision {s['unknown_precision']}")
    k = s["known"]
    if k.get("answered"):
        lines.append(
            f"known: top1 {k['top1']:.3f} top3 {k['top3']:.3f} rules {k['rule_top1']:.3f} (n {int(k['n'])}); "
            f"answered {int(k['answered'])}: accuracy {k['answered_accuracy']:.3f}, "
            f"mean confidence {k['answered_mean_confidence']:.3f}, ECE {k['ece_answered']:.3f}"
        )
    return lines


def write_prequential(
    rows: Sequence[PrequentialRow],
    out: Path,
    *,
    batch: str,
    model_id: str,
    note: str = "",
    confidence_map: tuple[float, float] | None = None,
) -> Path:
    """Write ``{batch, model_id, confidence_map, summary, rows}`` as JSON to ``out``; returns the
    path. ``confidence_map`` is the scoring model's recalibration ``(a, b)`` (``None`` for none):
    the rows' confidences are stated after it, and a later fit must undo it first
    (:func:`fit_confidence_map`)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "batch": batch,
        "model_id": model_id,
        "confidence_map": None if confidence_map is None else [float(confidence_map[0]), float(confidence_map[1])],
        "note": note,
        "scored_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "summary": summarise(rows),
        "rows": [r.to_dict() for r in rows],
    }
    out.write_text(json.dumps(payload, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    return out


def load_prequential(directory: str | Path) -> list[dict[str, Any]]:
    """The kept prequential figures (``{file, batch, model_id, note, scored_at, summary}``), oldest first."""
    d = Path(directory)
    if not d.is_dir():
        return []
    out = []
    for f in sorted(d.glob("*.json")):
        try:
            payload = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(payload, dict) or "summary" not in payload:
            continue
        out.append(
            {k: payload.get(k) for k in ("batch", "model_id", "note", "scored_at", "summary")} | {"file": f.name}
        )
    return sorted(out, key=lambda p: (str(p.get("scored_at")), p["file"]))


#: How many of the most recent real batches :func:`pool_latest` pools by default.
POOLED_BATCHES = 6


def pool_latest(
    directory: str | Path,
    *,
    last: int = POOLED_BATCHES,
    prefix: str = "collected-",
    among: Collection[str] | None = None,
) -> dict[str, Any] | None:
    """The ``last`` most recent batches pooled: per batch its scoring by the newest model that
    scored it (a model's age: when it first scored anything; every model here scored a batch
    before training on it), all their rows summarised together (:func:`summarise`), so that
    figures on a few dozen logs per batch gain the precision of a few hundred. Only batches whose
    name starts with ``prefix`` count (real logs from public threads are ``collected-*``; the
    reproduced jobs are not); with ``among``, only batches of those names. ``None`` without kept files. Returns ``{batches, files, summary}``."""
    d = Path(directory)
    kept: list[tuple[str, str, str, Path, list[dict[str, Any]]]] = []  # (batch, when, model, file, rows)
    for f in sorted(d.glob("*.json")) if d.is_dir() else []:
        try:
            payload = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(payload, dict) or not isinstance(payload.get("rows"), list):
            continue
        if not str(payload.get("batch")).startswith(prefix):
            continue
        if among is not None and str(payload.get("batch")) not in among:
            continue
        model = str(payload.get("model_id")).rsplit("@", 1)[-1]  # the same model under another directory name
        kept.append((str(payload.get("batch")), str(payload.get("scored_at")), model, f, payload["rows"]))
    if not kept:
        return None
    born: dict[str, str] = {}
    came: dict[str, str] = {}
    for batch, when, model, _, _ in kept:
        born[model] = min(born.get(model, when), when)
        came[batch] = min(came.get(batch, when), when)
    newest: dict[str, tuple[str, Path, list[dict[str, Any]]]] = {}
    for batch, _, model, f, rows in kept:
        if batch not in newest or born[model] > newest[batch][0]:
            newest[batch] = (born[model], f, rows)
    chosen = sorted(newest.items(), key=lambda kv: (came[kv[0]], kv[0]))[-last:]  # in the order batches came
    fields = set(PrequentialRow.__dataclass_fields__)
    pooled = [_row_from_dict(r, fields) for _, (_, _, rows) in chosen for r in rows]
    return {
        "batches": [b for b, _ in chosen],
        "files": [f.name for _, (_, f, _) in chosen],
        "summary": summarise(pooled),
    }


def pool_files(paths: Sequence[str | Path]) -> dict[str, Any]:
    """The rows of the given kept prequential files pooled and summarised (:func:`summarise`):
    a chosen scoring per batch, e.g. one release's batches as another release's model scored
    them, beside :func:`pool_latest`'s newest model per batch. Raises :class:`DatasetError` for
    a file that is not a kept prequential file. Returns ``{files, batches, summary}``."""
    fields = set(PrequentialRow.__dataclass_fields__)
    rows: list[PrequentialRow] = []
    batches: list[str] = []
    for path in map(Path, paths):
        try:
            payload = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise DatasetError(f"{path.name}: not a readable prequential file ({e.__class__.__name__})") from None
        if not isinstance(payload, dict) or not isinstance(payload.get("rows"), list):
            raise DatasetError(f"{path.name}: not a prequential file (no rows)")
        batches.append(str(payload.get("batch")))
        rows += [_row_from_dict(r, fields) for r in payload["rows"]]
    return {"files": [Path(p).name for p in paths], "batches": batches, "summary": summarise(rows)}


#: how many of the most recent batches the confidence recalibration is fitted on
CALIBRATION_BATCHES = 8
#: fewer answered rows than this: no recalibration (the identity)
MIN_CALIBRATION_ROWS = 50


def fit_confidence_map(
    directory: str | Path, *, last: int = CALIBRATION_BATCHES, among: Collection[str] | None = None
) -> tuple[tuple[float, float], dict[str, Any]] | None:
    """``(a, b)`` of ``sigmoid(a * logit(confidence) + b)``: how sure an answer should say it is,
    fitted (logistic regression of right-or-wrong on the stated confidence's logit) on the answered
    rows of the ``last`` most recent real batches, each as scored by a model that had not seen it
    (:func:`pool_latest`). Out-of-fold scores of the logs the fingerprints were written from are
    too sure of themselves; these are not. ``None`` with fewer than ``MIN_CALIBRATION_ROWS`` answered
    rows or a fit that would not be increasing (:func:`confidence_map_check` judges it on batches
    it was not fitted on). ``among`` restricts it to batches of those names
    (the trainer passes the batches it trains on: a batch kept out of training, to measure the
    model on, must not shape its confidence either). Returns the map and its provenance."""
    batches = _answered_by_batch(directory, last=last, among=among)
    if not batches:
        return None
    c = np.concatenate([bc for _, bc, _ in batches])
    y = np.concatenate([by for _, _, by in batches])
    fitted = _fit_map(c, y)
    if fitted is None:
        return None
    a, b = fitted
    info = {
        "batches": [name for name, _, _ in batches],
        "rows": len(c),
        "accuracy": round(float(y.mean()), 4),
        "mean_confidence_before": round(float(c.mean()), 4),
        "ece_before": round(float(expected_calibration_error(c, y)), 4),
        "ece_after_in_sample": round(float(expected_calibration_error(_apply_map(c, a, b), y)), 4),
    }
    return (a, b), info


def confidence_map_check(
    directory: str | Path, *, last: int = CALIBRATION_BATCHES, among: Collection[str] | None = None
) -> dict[str, Any] | None:
    """The recalibration judged on data it was not fitted on: for each of the batches
    :func:`fit_confidence_map` would use, the map fitted on the others and applied to it; the
    answers of all batches pooled, ECE before and after (``None`` with fewer than two batches)."""
    batches = _answered_by_batch(directory, last=last, among=among)
    if len(batches) < 2:
        return None
    before, after, right = [], [], []
    for i, (_, bc, by) in enumerate(batches):
        rest_c = np.concatenate([x for j, (_, x, _) in enumerate(batches) if j != i])
        rest_y = np.concatenate([x for j, (_, _, x) in enumerate(batches) if j != i])
        fitted = _fit_map(rest_c, rest_y)
        before.append(bc)
        after.append(bc if fitted is None else _apply_map(bc, *fitted))
        right.append(by)
    c, c2, y = np.concatenate(before), np.concatenate(after), np.concatenate(right)
    return {
        "batches": [name for name, _, _ in batches],
        "rows": len(c),
        "ece_before": round(float(expected_calibration_error(c, y)), 4),
        "ece_after": round(float(expected_calibration_error(c2, y)), 4),
    }


def _answered_by_batch(
    directory: str | Path, *, last: int, among: Collection[str] | None
) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Per pooled batch: its name, the head's confidence of its answers (abstentions and errors
    left out) and whether each was right. A batch scored by a recalibrated model states its
    confidences after that model's map (the file's ``confidence_map``); it is undone here, so that
    every batch enters the fit on the scale the new map will be applied to - the head's own."""
    out = []
    for name, payload in _pooled_payloads(directory, last=last, among=among) or []:
        rows = [
            r
            for r in payload["rows"]
            if r.get("predicted") not in (UNKNOWN_ID, "error") and r.get("confidence") is not None
        ]
        c = _head_scale(payload, [float(r["confidence"]) for r in rows])
        out.append((name, c, np.array([r["predicted"] == r["label"] for r in rows], dtype=int)))
    return out


def _pooled_payloads(
    directory: str | Path, *, last: int, among: Collection[str] | None
) -> list[tuple[str, dict[str, Any]]] | None:
    """The kept files :func:`pool_latest` pools, read: ``(batch, payload)`` each (``None`` without any)."""
    pooled = pool_latest(directory, last=last, among=among)
    if pooled is None:
        return None
    return [
        (name, json.loads((Path(directory) / f).read_text(encoding="utf-8")))
        for name, f in zip(pooled["batches"], pooled["files"], strict=True)
    ]


def _head_scale(payload: dict[str, Any], stated: Sequence[float] | np.ndarray) -> np.ndarray:
    """Answers' confidences as the head gave them: a batch scored by a recalibrated model states
    them after that model's map (the file's ``confidence_map``), undone here."""
    c = np.clip(np.array(stated, dtype=float), 1e-6, 1 - 1e-6)
    stated_by = payload.get("confidence_map")
    if stated_by:
        c = np.clip(_undo_map(c, float(stated_by[0]), float(stated_by[1])), 1e-6, 1 - 1e-6)
    return np.asarray(c)


def _fit_map(c: np.ndarray, y: np.ndarray) -> tuple[float, float] | None:
    """Logistic regression of right-or-wrong on the confidence's logit; ``None`` with too few
    answers, one outcome only, or a map that would not be increasing."""
    from sklearn.linear_model import LogisticRegression

    if len(c) < MIN_CALIBRATION_ROWS or y.min() == y.max():
        return None
    fit = LogisticRegression(C=1e4).fit(np.log(c / (1 - c))[:, None], y)
    a, b = float(fit.coef_[0][0]), float(fit.intercept_[0])
    if not 0 < a <= 10 or not -10 <= b <= 10:
        return None
    return a, b


def _apply_map(c: np.ndarray, a: float, b: float) -> np.ndarray:
    return np.asarray(1 / (1 + np.exp(-(a * np.log(c / (1 - c)) + b))))


def _undo_map(c: np.ndarray, a: float, b: float) -> np.ndarray:
    """The confidence before :func:`_apply_map` with ``(a, b)`` (``a > 0``)."""
    return np.asarray(1 / (1 + np.exp(-((np.log(c / (1 - c)) - b) / a))))


def _row_from_dict(r: dict[str, Any], fields: set[str]) -> PrequentialRow:
    """A kept row (``to_dict`` output) back as a :class:`PrequentialRow`."""
    kw: dict[str, Any] = {k: (tuple(v) if k == "top3" else v) for k, v in r.items() if k in fields}
    return PrequentialRow(**kw)


#: the thresholds :func:`abstention_replay` tries (on the head's scale, as the model's own)
REPLAY_THRESHOLDS: tuple[float, ...] = tuple(round(0.05 * k, 2) for k in range(2, 13))


def abstention_replay(
    directory: str | Path,
    *,
    last: int = POOLED_BATCHES,
    among: Collection[str] | None = None,
    thresholds: Sequence[float] = REPLAY_THRESHOLDS,
) -> list[dict[str, float]] | None:
    """What other abstention thresholds would have given on the pooled batches (:func:`pool_latest`),
    each as scored by a model that had not seen it: every row's confidence on the head's scale (an
    answer's stated confidence with its batch's recalibration undone; an abstention states one
    minus it, or records it as ``best_probability`` when the out-of-taxonomy detector decided)
    against each threshold, answered below it by ``unknown`` and above it by the row's
    best guess (an abstention's first alternative). Rows answered "no failure" keep that answer
    (the model gives it from the absence of any failure, whatever the threshold). Approximate: a
    row answered by the hang/transport family rule, or abstained for a failure the taxonomy knows
    to lie outside it, is replayed as any other. Per threshold: ``accuracy`` (``unknown`` right only
    on out-of-taxonomy logs), ``known_top1``, ``unknown_recall``, ``unknown_precision``,
    ``abstentions`` and ``n``. ``None`` without kept files."""
    payloads = _pooled_payloads(directory, last=last, among=among)
    if payloads is None:
        return None
    p_parts: list[np.ndarray] = []
    guess_right: list[bool] = []
    kept: list[bool] = []
    is_unknown: list[bool] = []
    for _, payload in payloads:
        rows = [r for r in payload["rows"] if r.get("predicted") != "error" and r.get("confidence") is not None]
        abstained = np.array([r["predicted"] == UNKNOWN_ID for r in rows], dtype=bool)
        stated = np.array([float(r["confidence"]) for r in rows], dtype=float)
        # an abstention states one minus the head's best probability, unmapped (or records it, when
        # the out-of-taxonomy detector decided); an answer, mapped
        best = np.array(
            [
                1.0 - c if r.get("best_probability") is None else float(r["best_probability"])
                for r, c in zip(rows, stated, strict=True)
            ],
            dtype=float,
        )
        p_parts.append(np.where(abstained, best, _head_scale(payload, stated)))
        for r, off in zip(rows, abstained.tolist(), strict=True):
            guess = (list(r.get("top3") or []) or [UNKNOWN_ID])[0] if off else r["predicted"]
            guess_right.append(guess == r["label"])
            kept.append(r["predicted"] == NO_FAILURE_ID)
            is_unknown.append(r["label"] == UNKNOWN_ID)
    p = np.concatenate(p_parts) if p_parts else np.zeros(0)
    right = np.array(guess_right, dtype=bool)
    keep = np.array(kept, dtype=bool)
    oot = np.array(is_unknown, dtype=bool)
    return [_replayed(float(t), (p < t) & ~keep, right, oot) for t in thresholds]


def _replayed(threshold: float, abstain: np.ndarray, right: np.ndarray, oot: np.ndarray) -> dict[str, float]:
    """One replayed threshold's figures: abstentions count right only on out-of-taxonomy rows, any
    other row by whether its answer was right."""
    correct = np.where(abstain, oot, right)
    return {
        "threshold": threshold,
        "accuracy": float(correct.mean()) if len(correct) else 0.0,
        "known_top1": float(correct[~oot].mean()) if (~oot).any() else 0.0,
        "unknown_recall": float(abstain[oot].mean()) if oot.any() else 0.0,
        "unknown_precision": float(oot[abstain].mean()) if abstain.any() else 0.0,
        "abstentions": float(abstain.sum()),
        "n": float(len(correct)),
    }


#: Out-of-taxonomy detector thresholds replayed by :func:`detector_replay`.
DETECTOR_THRESHOLDS: tuple[float, ...] = tuple(round(0.05 * k, 2) for k in range(4, 13))


def detector_replay(
    directory: str | Path,
    *,
    last: int = POOLED_BATCHES,
    thresholds: Sequence[float] = DETECTOR_THRESHOLDS,
) -> list[dict[str, float]] | None:
    """What other thresholds of the out-of-taxonomy detector would have given on the pooled
    batches (:func:`pool_latest`), each as scored by a model that had not seen it: a row whose
    recorded ``outside_probability`` reaches the threshold is answered ``unknown``, any other by
    its answer (an abstention the detector decided: by its first alternative). Rows the detector
    did not decide keep their answer whatever the threshold: "no failure", and abstentions for a
    failure the taxonomy knows to lie outside it or for the head's own doubt. Rows of models
    without a detector (no ``outside_probability``) are left out. Approximate: each row carries its
    own model's detector, and the family rule that keeps some answers above the threshold is not
    replayed. Per threshold: ``accuracy`` (``unknown`` right only on out-of-taxonomy logs),
    ``known_top1``, ``unknown_recall``, ``unknown_precision``, ``abstentions`` and ``n``.
    ``None`` without kept files."""
    payloads = _pooled_payloads(directory, last=last, among=None)
    if payloads is None:
        return None
    p: list[float] = []
    fixed: list[bool] = []  # answered without the detector: "no failure", or `unknown` for another reason
    fixed_unknown: list[bool] = []
    answer_right: list[bool] = []  # the answer when not abstaining: the row's own, or its best guess
    is_unknown: list[bool] = []
    for _, payload in payloads:
        for r in payload["rows"]:
            if r.get("predicted") == "error" or r.get("outside_probability") is None:
                continue
            predicted = r["predicted"]
            other_reason = predicted == UNKNOWN_ID and r.get("unknown_reason") != "detector"
            guess = (list(r.get("top3") or []) or [UNKNOWN_ID])[0] if predicted == UNKNOWN_ID else predicted
            p.append(float(r["outside_probability"]))
            fixed.append(predicted == NO_FAILURE_ID or other_reason)
            fixed_unknown.append(other_reason)
            answer_right.append(guess == r["label"])
            is_unknown.append(r["label"] == UNKNOWN_ID)
    prob = np.asarray(p, dtype=float)
    keep = np.asarray(fixed, dtype=bool)
    keep_unknown = np.asarray(fixed_unknown, dtype=bool)
    right = np.asarray(answer_right, dtype=bool)
    oot = np.asarray(is_unknown, dtype=bool)
    return [_replayed(float(t), keep_unknown | (~keep & (prob >= t)), right, oot) for t in thresholds]
