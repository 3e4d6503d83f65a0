"""Is this failure outside the taxonomy? A learned detector for the ``unknown`` answer.

A low top probability is a poor sign of a failure the taxonomy cannot name: on unseen logs a
known failure in unfamiliar words is just as unsure, and only about a quarter of the jobs the
old threshold rule answered ``unknown`` were truly outside the taxonomy. The detector is a
logistic regression trained on the real logs labelled ``unknown`` against the real logs of
known entries. It reads

* how the head's calibrated probabilities are spread (the sorted top five, the margin, the
  entropy),
* the fingerprint evidence (per role, the strongest hit and the sum over the entries),
* the job's structure and hang features, and
* its pooled line embedding: what out-of-taxonomy failures are about (a compiler, a
  framework's argument check, a cloud's refusal) is in the words, not only in the doubt.

Its probabilities that train it are out of fold (the head's cross-validated scores), and its
threshold is chosen on its own grouped out-of-fold scores, so neither is fitted on the rows it
is judged on. A model trained with too few ``unknown`` logs has no detector and abstains by
the top-probability threshold as before. As for the head, fitting uses scikit-learn (imported
by the functions that fit) and applying the detector is numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from denpex_ml.model.head import FeatureLayout, _logreg_arrays, _logreg_proba

#: The detector's regularisation (scikit-learn's ``C``): strong, it sees ~900 features and a
#: few hundred positive rows (grouped out-of-fold AUC 0.859 at 0.01 against 0.846 at 0.1 on the
#: 6,566 real logs held when it was chosen).
OUTSIDE_C = 0.01

#: Fewer real ``unknown`` logs than this: no detector (the threshold rule decides).
MIN_UNKNOWN = 30

#: Folds of the detector's own grouped cross-validation (its out-of-fold scores choose its threshold).
OUTSIDE_FOLDS = 5

#: Thresholds the detector's probability is tried at.
_THRESHOLDS = np.round(np.arange(0.2, 0.91, 0.025), 3)

#: Below this top probability the job is answered ``unknown`` whatever the detector says (unless its
#: hang or transport family together is likely, see :func:`abstains`): an answer the head gives
#: less than one chance in five is no answer. On the out-of-fold real scores the detector was
#: chosen on, the floor changes accuracy with abstention by +0.001 (0.812 -> 0.813); sparing the
#: likely hang and transport families changes it by less than 0.001 (precision 0.589 -> 0.601).
ANSWER_FLOOR = 0.2

#: Columns summarising the probabilities (top five, margin, entropy, log of the top).
_N_PROBA = 8


class _Widths(Protocol):
    fp_per_class: int
    n_structure: int
    embed_dim: int


def n_outside_features(layout: _Widths) -> int:
    """The detector's input width for a head layout (a :class:`FeatureLayout` or a manifest's)."""
    return _N_PROBA + 2 * layout.fp_per_class + layout.n_structure + 2 * layout.embed_dim


def outside_features(X: np.ndarray, proba: np.ndarray, layout: FeatureLayout) -> np.ndarray:
    """The detector's inputs: base vectors ``X`` (n, layout.width) and the head's calibrated,
    hang-shifted probabilities ``proba`` (n, n_classes) -> (n, :func:`n_outside_features`)."""
    X = np.asarray(X, dtype=np.float64)
    P = np.asarray(proba, dtype=np.float64)
    top = -np.sort(-P, axis=1)
    k = min(5, P.shape[1])
    top5 = np.zeros((len(P), 5))
    top5[:, :k] = top[:, :k]
    entropy = -(P * np.log(np.clip(P, 1e-12, 1.0))).sum(axis=1)
    summary = np.c_[top5, top5[:, 0] - top5[:, 1], entropy, np.log(top5[:, 0] + 1e-9)]
    fp = layout.fingerprints(X)
    rest = X[:, layout.n_fingerprint :]  # structure (with the hang block) and the pooled embedding
    return np.asarray(np.c_[summary, fp.max(axis=1), fp.sum(axis=1), rest])


@dataclass
class OutsideDetector:
    """A fitted detector: scaler + logistic regression arrays and the threshold it fires at."""

    arrays: dict[str, np.ndarray]
    threshold: float

    #: prefix of its arrays in ``head.npz``
    PREFIX = "outside_"

    def proba(self, X: np.ndarray, proba: np.ndarray, layout: FeatureLayout) -> np.ndarray:
        """P(outside the taxonomy) per row."""
        return _logreg_proba(self.arrays, outside_features(X, proba, layout))[:, 1]

    def to_arrays(self) -> dict[str, np.ndarray]:
        return {self.PREFIX + k: v for k, v in self.arrays.items()}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], threshold: float | None) -> OutsideDetector | None:
        """The detector stored among a model's arrays, or ``None`` when it has none."""
        own = {k[len(cls.PREFIX) :]: v for k, v in arrays.items() if k.startswith(cls.PREFIX)}
        if not own or threshold is None:
            return None
        return cls(own, float(threshold))


def _fit(F: np.ndarray, is_unknown: np.ndarray) -> dict[str, np.ndarray]:
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    scaler = StandardScaler().fit(F)
    clf = LogisticRegression(C=OUTSIDE_C, max_iter=3000).fit(scaler.transform(F), is_unknown.astype(int))
    return _logreg_arrays(scaler, clf)


def enough_to_fit(is_unknown: np.ndarray) -> bool:
    """Whether rows hold at least :data:`MIN_UNKNOWN` ``unknown`` and as many known ones."""
    return bool(is_unknown.sum() >= MIN_UNKNOWN and (~is_unknown).sum() >= MIN_UNKNOWN)


def out_of_fold(F: np.ndarray, is_unknown: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """The detector's grouped out-of-fold probabilities (no source thread in both sides)."""
    from sklearn.model_selection import GroupKFold

    oof = np.zeros(len(F))
    folds = min(OUTSIDE_FOLDS, len(set(groups.tolist())))
    for tr, te in GroupKFold(n_splits=folds).split(F, is_unknown, groups):
        if is_unknown[tr].all() or not is_unknown[tr].any():
            oof[te] = float(is_unknown[tr].mean())
            continue
        oof[te] = _logreg_proba(_fit(F[tr], is_unknown[tr]), F[te])[:, 1]
    return oof


def abstains(p_out: np.ndarray, proba: np.ndarray, threshold: float, kept: np.ndarray | None = None) -> np.ndarray:
    """Which rows are answered ``unknown``: the detector fires or the top probability is below
    :data:`ANSWER_FLOOR`, and the row is not ``kept`` (a hang or transport answer whose family
    together is likely: a known hang worded unfamiliarly is not a failure outside the taxonomy)."""
    fire = (np.asarray(p_out) >= threshold) | (np.asarray(proba).max(axis=1) < ANSWER_FLOOR)
    if kept is not None:
        fire &= ~np.asarray(kept, dtype=bool)
    return np.asarray(fire)


def choose_outside_threshold(
    p_out: np.ndarray, proba: np.ndarray, y: np.ndarray, kept: np.ndarray | None = None
) -> float:
    """The threshold on P(outside) that maximises accuracy when answering ``unknown``
    (:func:`abstains`) counts as right exactly for ``unknown`` rows (``y == -1``) and any other
    answer is the top entry."""
    pred = np.asarray(proba).argmax(axis=1)
    best_t, best_acc = float(_THRESHOLDS[-1]), -1.0
    for t in _THRESHOLDS:
        right = np.where(abstains(p_out, proba, float(t), kept), y == -1, pred == y)
        acc = float(right.mean())
        if acc > best_acc + 1e-9:
            best_t, best_acc = float(t), acc
    return best_t


def fit_outside_detector(
    X: np.ndarray,
    proba: np.ndarray,
    y: np.ndarray,
    groups: np.ndarray,
    layout: FeatureLayout,
    kept: np.ndarray | None = None,
) -> tuple[OutsideDetector | None, np.ndarray | None]:
    """Fit the detector on real logs (``X`` base vectors, ``proba`` the head's out-of-fold
    calibrated probabilities, ``y`` class indices with -1 for ``unknown``, ``groups`` their
    source threads; ``kept``, rows the floor spares, see :func:`abstains`). Returns the detector (``None`` with fewer than :data:`MIN_UNKNOWN`
    ``unknown`` rows) and its own out-of-fold probabilities, on which its threshold was chosen."""
    is_unknown = np.asarray(y) == -1
    if not enough_to_fit(is_unknown):
        return None, None
    F = outside_features(X, proba, layout)
    groups = np.asarray(groups)
    oof = out_of_fold(F, is_unknown, groups)
    threshold = choose_outside_threshold(oof, proba, np.asarray(y), kept)
    return OutsideDetector(_fit(F, is_unknown), threshold), oof
