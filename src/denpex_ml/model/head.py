"""The classifier head over job feature vectors (fitted with scikit-learn).

Two stages, both logistic regressions (weights are plain arrays, saved without pickle):

1. **Job classifier** over the base vector (per-entry fingerprint evidence, cross-rank
   structure, pooled line embedding) -> a probability per failure class.
2. **Evidence ranker**: for every (job, class) pair a small vector of class-specific
   evidence - the stage-1 probability, the fingerprint rule score and its margin,
   root-cause/symptom/context strength, retrieval similarity and votes from the nearest
   labelled incidents, zero-shot similarity to the taxonomy entry - scored by one shared
   linear function and normalised with a softmax over classes. Its dozen weights are
   learned from out-of-fold stage-1 outputs on all training data, real incidents weighted
   as much as all synthetic ones together, so the head learns how far synthetic-trained
   scores can be trusted on real logs.

A temperature fitted on the same out-of-fold scores calibrates the probabilities.

Fitting uses scikit-learn and SciPy, imported by the methods that fit; inference is numpy on
the saved arrays (:func:`_logreg_proba`: the arithmetic of scikit-learn's ``predict_proba``),
so loading and applying a model imports neither (a batch worker starts about a second sooner).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from denpex_ml.errors import InvalidInputError, ModelError
from denpex_ml.hang.analysis import HANG_FEATURE_NAMES
from denpex_ml.model.retrieval import RetrievalIndex

if TYPE_CHECKING:
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

__all__ = ["PAIR_FEATURES", "DenpexHead", "FeatureLayout", "stage1_for_layout"]

PAIR_FEATURES = (
    "root_cause",
    "root_cause_n",
    "symptom",
    "context",
    "rule_score",
    "rule_margin",
    "rule_top",
    "retrieval_best",
    "retrieval_votes",
    "zero_shot",
    "log_stage1",
    "hang_affinity",
    "hang_family",
    "line_sim",
    "line_sim_margin",
)


@dataclass(frozen=True)
class FeatureLayout:
    """Where the parts of a base vector lie: ``n_classes`` x ``fp_per_class`` fingerprint columns first,
    then ``n_structure`` structure columns (the last ``n_hang`` of them hang-analysis
    features), then a ``2 * embed_dim`` pooled embedding."""

    n_classes: int
    n_structure: int
    embed_dim: int
    n_hang: int = 0
    fp_per_class: int = 4  #: 4 fingerprint role columns, + 1 line-bank similarity when 5

    @classmethod
    def from_manifest(cls, lay: dict[str, Any]) -> FeatureLayout:
        """The layout a model directory's manifest records (its ``layout`` object)."""
        return cls(
            int(lay["n_classes"]),
            int(lay["n_structure"]),
            int(lay["embed_dim"]),
            int(lay.get("n_hang", 0)),
            int(lay.get("fp_per_class", 4)),
        )

    @property
    def n_fingerprint(self) -> int:
        return self.fp_per_class * self.n_classes

    @property
    def width(self) -> int:
        return self.n_fingerprint + self.n_structure + 2 * self.embed_dim

    def fingerprints(self, X: np.ndarray) -> np.ndarray:
        return X[:, : self.n_fingerprint].reshape(len(X), self.n_classes, self.fp_per_class)

    def embedding(self, X: np.ndarray) -> np.ndarray:
        return X[:, self.n_fingerprint + self.n_structure :]

    def hang(self, X: np.ndarray) -> np.ndarray:
        end = self.n_fingerprint + self.n_structure
        return X[:, end - self.n_hang : end]


#: Column (within the hang block) of the "the job hangs" signal.
_HANG_FLAG = HANG_FEATURE_NAMES.index("signal:hang")

#: Stage 1's gradient tolerance in the inner folds, which only give stage 2 its out-of-fold
#: probabilities (the model's own stage 1 keeps scikit-learn's 1e-4); see ``_fit_stage1``.
_INNER_FOLD_TOL = 1e-3


def _logreg_proba(arrays: dict[str, np.ndarray], X: np.ndarray) -> np.ndarray:
    """Class probabilities (n, len(classes)) of a scaler + logistic regression saved by
    :func:`_logreg_arrays`, with the arithmetic of scikit-learn's ``StandardScaler.transform``
    and ``LogisticRegression.predict_proba`` (``tests/model/test_head.py`` holds them equal):
    standardised in ``X``'s float dtype, scores in float64, a softmax (the sigmoid of the
    score in the two-class case, as scikit-learn's ``expit``, written in numpy so that applying
    a binary model imports no SciPy)."""
    X = np.array(X, dtype=X.dtype if X.dtype in (np.float32, np.float64) else np.float64)
    X -= np.asarray(arrays["mean"]).astype(X.dtype)
    X /= np.asarray(arrays["scale"]).astype(X.dtype)
    coef = np.asarray(arrays["coef"], dtype=np.float64)
    scores = X @ coef.T + np.asarray(arrays["intercept"], dtype=np.float64)
    if len(arrays["classes"]) <= 2:
        p = np.exp(-np.logaddexp(0.0, -scores.reshape(-1)))
        return np.stack([1 - p, p], axis=1)
    scores -= scores.max(axis=1).reshape(-1, 1)
    np.exp(scores, out=scores)
    scores /= scores.sum(axis=1).reshape(-1, 1)
    return np.asarray(scores)


def _logreg_arrays(scaler: StandardScaler, clf: LogisticRegression) -> dict[str, np.ndarray]:
    return {
        "mean": scaler.mean_.astype(np.float64),
        "scale": scaler.scale_.astype(np.float64),
        "coef": clf.coef_.astype(np.float64),
        "intercept": clf.intercept_.astype(np.float64),
        "classes": clf.classes_.astype(np.int64),
    }


def stage1_for_layout(
    arrays: dict[str, np.ndarray],
    labels: list[str],
    layout: FeatureLayout,
    to_labels: list[str],
    to_layout: FeatureLayout,
) -> dict[str, np.ndarray] | None:
    """A fitted stage 1 (:func:`_logreg_arrays` of a head over ``labels`` / ``layout``) carried over
    to another label set and layout, as a solver start for :meth:`DenpexHead.fit` (``init_from``):
    a retrain's candidate starts where the base model stands. A class's fingerprint columns follow
    its id; columns and classes the base does not have start at zero weight (unit scale, zero
    mean; a new class is filled in by the fit). ``None`` when the layouts differ beyond the
    fingerprint block (another encoder or feature set: nothing carries over)."""
    if (layout.fp_per_class, layout.n_structure, layout.embed_dim) != (
        to_layout.fp_per_class,
        to_layout.n_structure,
        to_layout.embed_dim,
    ) or np.asarray(arrays["coef"]).shape[1:] != (layout.width,):
        return None
    fp = layout.fp_per_class
    where = {lab: i for i, lab in enumerate(labels)}
    cols = np.full(to_layout.width, -1, dtype=np.int64)  # base column of each new column, -1: none
    for c, lab in enumerate(to_labels):
        b = where.get(lab)
        if b is not None:
            cols[c * fp : (c + 1) * fp] = np.arange(b * fp, (b + 1) * fp)
    cols[to_layout.n_fingerprint :] = np.arange(layout.n_fingerprint, layout.width)
    have = cols >= 0
    coef = np.asarray(arrays["coef"], dtype=np.float64)
    out_coef = np.zeros((len(coef), to_layout.width))
    out_coef[:, have] = coef[:, cols[have]]
    mean = np.zeros(to_layout.width)
    scale = np.ones(to_layout.width)
    mean[have] = np.asarray(arrays["mean"], dtype=np.float64)[cols[have]]
    scale[have] = np.asarray(arrays["scale"], dtype=np.float64)[cols[have]]
    new_index = {lab: i for i, lab in enumerate(to_labels)}
    rows = [(r, new_index.get(labels[int(c)])) for r, c in enumerate(arrays["classes"])]
    keep = [(r, c) for r, c in rows if c is not None]
    if len(keep) < 3:
        return None
    order = sorted(keep, key=lambda rc: rc[1])
    take = [r for r, _ in order]
    return {
        "mean": mean,
        "scale": scale,
        "coef": out_coef[take],
        "intercept": np.asarray(arrays["intercept"], dtype=np.float64)[take],
        "classes": np.asarray([c for _, c in order], dtype=np.int64),
    }


def _softmax(s: np.ndarray) -> np.ndarray:
    s = s - s.max(axis=1, keepdims=True)
    e = np.exp(s)
    return np.asarray(e / e.sum(axis=1, keepdims=True))


class DenpexHead:
    """Two-stage head (see module docs). ``X`` rows are base vectors laid out as ``layout``.

    Parameters
    ----------
    layout:
        Column layout of ``X``.
    entry_embeddings:
        ``(n_classes, embed_dim)`` embeddings of the taxonomy entries (zero-shot evidence).
    C:
        Inverse regularisation of the stage-1 logistic regression.
    n_folds:
        Folds (grouped) for the out-of-fold scores the ranker and temperature learn from.
    k:
        Neighbours voting in retrieval.
    random_state:
        Seed of everything random in fitting.
    hang_affinity:
        ``(n_classes, layout.n_hang)`` 0/1 matrix: the hang features each taxonomy entry
        declares (``hang_signals``); the share a job shows is a pair feature. ``None``: zeros.
    pair_features:
        The subset of :data:`PAIR_FEATURES` the ranker uses (``None``: all); for ablations.
    """

    def __init__(
        self,
        *,
        layout: FeatureLayout,
        entry_embeddings: np.ndarray,
        C: float = 0.1,
        n_folds: int = 5,
        k: int = 10,
        random_state: int = 0,
        hang_affinity: np.ndarray | None = None,
        pair_features: tuple[str, ...] | None = None,
    ) -> None:
        self.layout = layout
        self.entry_embeddings = entry_embeddings
        self.C = C
        self.n_folds = n_folds
        self.k = k
        self.random_state = random_state
        self.hang_affinity = hang_affinity
        self.pair_features = pair_features
        #: ``bank_vectors_`` and its float32 retrieval index, built on first use
        self._bank: tuple[np.ndarray, RetrievalIndex] | None = None

    # -- fitting ----------------------------------------------------------------------------
    def _validate(self) -> None:
        if not (isinstance(self.C, (int, float)) and self.C > 0):
            raise InvalidInputError(f"DenpexHead: C must be a positive number, got {self.C!r}")
        if not (isinstance(self.n_folds, int) and self.n_folds >= 2):
            raise InvalidInputError(f"DenpexHead: n_folds must be an int >= 2, got {self.n_folds!r}")
        emb = np.asarray(self.entry_embeddings)
        if emb.shape != (self.layout.n_classes, self.layout.embed_dim):
            raise InvalidInputError(
                f"DenpexHead: entry_embeddings must have shape {(self.layout.n_classes, self.layout.embed_dim)}, got {emb.shape}"
            )
        unknown = [n for n in (self.pair_features or ()) if n not in PAIR_FEATURES]
        if unknown:
            raise InvalidInputError(f"DenpexHead: pair_features must be among {PAIR_FEATURES}, got {unknown}")
        if self.hang_affinity is not None:
            shape = np.asarray(self.hang_affinity).shape
            if shape != (self.layout.n_classes, self.layout.n_hang):
                raise InvalidInputError(
                    f"DenpexHead: hang_affinity must have shape {(self.layout.n_classes, self.layout.n_hang)}, got {shape}"
                )

    def _fit_stage1(
        self,
        X: np.ndarray,
        y: np.ndarray,
        w: np.ndarray,
        init: dict[str, np.ndarray] | None = None,
        tol: float = 1e-4,
    ) -> tuple[StandardScaler, LogisticRegression]:
        """Stage 1 on ``X``: a standard scaler and an L2 logistic regression. ``init`` (the arrays of
        another stage 1 on overlapping data, :func:`_logreg_arrays`) starts the solver there: the
        problem is strictly convex, so the solution is the same up to the solver's tolerance and
        it takes a fraction of the iterations (the inner folds start from the full fit, a
        cross-validation fold from the final model). ``tol`` is the solver's gradient tolerance:
        the inner folds, which only give stage 2 its out-of-fold probabilities, stop at
        :data:`_INNER_FOLD_TOL` (1e-3: a third fewer steps, a warm retrain 33 s -> 23.5 s here,
        grouped CV the same to a tenth of a point), the model's own stage 1 at scikit-learn's 1e-4."""
        from sklearn.linear_model import LogisticRegression
        from sklearn.preprocessing import StandardScaler

        scaler = StandardScaler().fit(X)
        clf = LogisticRegression(C=self.C, max_iter=3000, tol=tol)
        classes = np.unique(y)
        if init is not None and len(classes) > 2:
            rows = {int(c): i for i, c in enumerate(init["classes"])}
            known = [int(c) in rows for c in classes]
            if any(known):
                idx = [rows[int(c)] for c, k in zip(classes, known, strict=True) if k]
                # the same decision function in this scaler's space: raw weights A = W / s,
                # bias b - m . A, then back through this fit's mean and scale
                given = init["coef"][idx] / init["scale"]
                given_bias = init["intercept"][idx] - given @ init["mean"]
                # a class the start does not know (a retrain's new class) starts at zero weights
                # and the mean bias: a starting point, the solution is the solver's
                raw = np.zeros((len(classes), X.shape[1]))
                bias = np.full(len(classes), float(given_bias.mean()))
                raw[np.flatnonzero(known)] = given
                bias[np.flatnonzero(known)] = given_bias
                clf.set_params(warm_start=True)
                clf.coef_ = raw * scaler.scale_
                clf.intercept_ = bias + raw @ scaler.mean_
        clf.fit(scaler.transform(X), y, sample_weight=w)
        clf.set_params(warm_start=False)
        return scaler, clf

    def _stage1_proba(self, X: np.ndarray, scaler: StandardScaler, clf: LogisticRegression) -> np.ndarray:
        P = np.full((len(X), self.layout.n_classes), 1e-6)
        P[:, clf.classes_] = clf.predict_proba(scaler.transform(X))
        return P

    def fit(
        self,
        X: np.ndarray,
        y: np.ndarray,
        sample_weight: np.ndarray | None = None,
        groups: np.ndarray | None = None,
        ranker_weight: np.ndarray | None = None,
        init_from: DenpexHead | dict[str, np.ndarray] | None = None,
    ) -> DenpexHead:
        """Fit on base vectors ``X`` (n, layout.width) and class indices ``y``.

        ``groups`` (e.g. source threads) keep related incidents in one fold; ``sample_weight``
        weights incidents in stage 1, ``ranker_weight`` in the ranker and the temperature
        (default: ``sample_weight``). ``init_from``, a fitted head on overlapping data (the final
        model when this is a cross-validation fold's) or stage-1 arrays carried over from one
        (:func:`stage1_for_layout`), starts stage 1's solver at its solution.
        """
        from sklearn.linear_model import LogisticRegression
        from sklearn.model_selection import GroupKFold
        from sklearn.preprocessing import StandardScaler

        self._validate()
        X = np.asarray(X, dtype=np.float32)
        y = np.asarray(y, dtype=np.int64)
        if X.ndim != 2 or X.shape[1] != self.layout.width:
            raise InvalidInputError(f"DenpexHead.fit: X must have {self.layout.width} columns, got shape {X.shape}")
        if len(y) != len(X):
            raise InvalidInputError(f"DenpexHead.fit: X has {len(X)} rows but y has {len(y)}")
        w = np.ones(len(X)) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        g = np.arange(len(X)) if groups is None else np.asarray(groups)
        n = len(X)
        # out-of-fold stage-1 probabilities and retrieval evidence
        oof = np.zeros((n, self.layout.n_classes))
        ret = np.zeros((n, 2 * self.layout.n_classes), dtype=np.float32)
        emb = self.layout.embedding(X)
        start = init_from.stage1_ if isinstance(init_from, DenpexHead) else init_from
        scaler, clf = self._fit_stage1(X, y, w, start)
        full = _logreg_arrays(scaler, clf)
        self.stage1_: dict[str, np.ndarray] = full
        for tr, te in GroupKFold(self.n_folds).split(X, y, g):
            sc, fold_clf = self._fit_stage1(X[tr], y[tr], w[tr], full, tol=_INNER_FOLD_TOL)
            oof[te] = self._stage1_proba(X[te], sc, fold_clf)
            ret[te] = RetrievalIndex(emb[tr], y[tr], self.layout.n_classes, self.k).features(emb[te])
        self.bank_vectors_ = emb.astype(np.float16)
        self.bank_labels_ = y.copy()
        # stage 2: the shared evidence ranker
        F = self._pair_features(X, oof, ret)
        k = F.shape[2]
        target = np.zeros((n, self.layout.n_classes))
        target[np.arange(n), y] = 1.0
        w2 = w if ranker_weight is None else np.asarray(ranker_weight, dtype=np.float64)
        pair_w = np.repeat(w2[:, None], self.layout.n_classes, axis=1)
        sc2 = StandardScaler().fit(F.reshape(-1, k))
        ranker = LogisticRegression(C=1.0, max_iter=2000)
        ranker.fit(sc2.transform(F.reshape(-1, k)), target.reshape(-1), sample_weight=pair_w.reshape(-1))
        self.stage2_ = _logreg_arrays(sc2, ranker)
        # temperature on the out-of-fold ranker scores
        scores = self._rank_scores(F)
        self.temperature_ = float(self._fit_temperature(scores, y, w2))
        self.temperature_hang_: float | None = None
        self.classes_ = np.arange(self.layout.n_classes)
        return self

    @staticmethod
    def _fit_temperature(scores: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
        from scipy.optimize import minimize_scalar

        def nll(t: float) -> float:
            p = _softmax(scores / t)
            return float(-(w * np.log(p[np.arange(len(y)), y] + 1e-12)).sum() / w.sum())

        res = minimize_scalar(nll, bounds=(0.05, 20.0), method="bounded")
        return float(res.x)

    # -- features ---------------------------------------------------------------------------
    def _pair_features(self, X: np.ndarray, stage1: np.ndarray, retrieval: np.ndarray) -> np.ndarray:
        lay = self.layout
        fp = lay.fingerprints(X)
        rule = fp[:, :, 0] + 0.1 * fp[:, :, 1] + 0.3 * (fp[:, :, 2] + fp[:, :, 3])
        order = np.sort(rule, axis=1)
        best, second = order[:, -1:], order[:, -2:-1]
        margin = rule - np.where(rule >= best, second, best)
        top = ((rule >= best) & (best > 0)).astype(np.float32)
        zero_shot = lay.embedding(X)[:, : lay.embed_dim] @ np.asarray(self.entry_embeddings, dtype=np.float32).T
        line = fp[:, :, 4] if lay.fp_per_class > 4 else np.zeros_like(rule)
        c = lay.n_classes
        parts = [
            fp[:, :, 0], fp[:, :, 1], fp[:, :, 2], fp[:, :, 3], rule, margin, top,
            retrieval[:, :c], retrieval[:, c:], zero_shot, np.log(stage1 + 1e-6), self._affinity(X),
            self._hang_family(X, fp[:, :, 0]),
            line, line - line.max(axis=1, keepdims=True),
        ]  # fmt: skip
        F = np.stack(parts, axis=2).astype(np.float64)
        if self.pair_features is not None:
            F = F[:, :, [PAIR_FEATURES.index(n) for n in self.pair_features]]
        return F

    def _affinity(self, X: np.ndarray) -> np.ndarray:
        """Per (job, class): the share of the class's declared hang features the job shows."""
        A = self.hang_affinity
        if A is None or self.layout.n_hang == 0:
            return np.zeros((len(X), self.layout.n_classes))
        A = np.asarray(A, dtype=np.float64)
        H = self.layout.hang(X).astype(np.float64)
        n = A.sum(axis=1)
        return np.asarray(np.where(n > 0, (H @ A.T) / np.maximum(n, 1.0), 0.0))

    def _hang_family(self, X: np.ndarray, root_cause: np.ndarray) -> np.ndarray:
        """Per (job, class): 1 when the job hangs with no root-cause evidence of a class outside
        the hang family and the class belongs to it (declares hang signals); else 0.

        A log of waiting ranks and nothing else is almost always one of the hang entries; the
        ranker learns how far to trust that from the data."""
        A = self.hang_affinity
        if A is None or self.layout.n_hang == 0:
            return np.zeros((len(X), self.layout.n_classes))
        member = np.asarray(A).sum(axis=1) > 0
        hangs = self.layout.hang(X)[:, _HANG_FLAG] > 0
        other_rc = (np.asarray(root_cause)[:, ~member] > 0).any(axis=1)
        return np.asarray((hangs & ~other_rc)[:, None] & member[None, :], dtype=np.float64)

    def _rank_scores(self, F: np.ndarray) -> np.ndarray:
        s2 = self.stage2_
        k = F.shape[2]
        Z = (F.reshape(-1, k) - s2["mean"]) / s2["scale"]
        return np.asarray((Z @ s2["coef"][0] + s2["intercept"][0]).reshape(F.shape[0], F.shape[1]))

    def _stage1_from_arrays(self, X: np.ndarray) -> np.ndarray:
        P = np.full((len(X), self.layout.n_classes), 1e-6)
        P[:, np.asarray(self.stage1_["classes"], dtype=np.int64)] = _logreg_proba(self.stage1_, X)
        return P

    def _check_fitted(self) -> None:
        if not hasattr(self, "stage2_"):
            raise ModelError("DenpexHead is not fitted: call fit() or build it with from_arrays()")

    def _retrieval(self) -> RetrievalIndex:
        """The retrieval index of ``bank_vectors_`` (float32), built once per bank."""
        if self._bank is None or self._bank[0] is not self.bank_vectors_:
            index = RetrievalIndex(
                self.bank_vectors_.astype(np.float32), self.bank_labels_, self.layout.n_classes, self.k
            )
            self._bank = (self.bank_vectors_, index)
        return self._bank[1]

    def evidence(self, X: np.ndarray) -> dict[str, np.ndarray]:
        """Intermediate per-class evidence (stage-1 probabilities, retrieval, pair features)."""
        self._check_fitted()
        X = np.asarray(X, dtype=np.float32)
        stage1 = self._stage1_from_arrays(X)
        ret = self._retrieval().features(self.layout.embedding(X))
        return {"stage1": stage1, "retrieval": ret, "pairs": self._pair_features(X, stage1, ret)}

    def decision_function(self, X: np.ndarray) -> np.ndarray:
        return self._rank_scores(self.evidence(X)["pairs"])

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        """Calibrated class probabilities (n, n_classes).

        Rows whose best class is a hang entry are scaled by ``temperature_hang_`` when it is set
        (fitted on grouped out-of-fold real logs: hang logs are where the in-sample temperature
        over-states confidence most)."""
        return self.calibrate(self.decision_function(X))

    def calibrate(self, scores: np.ndarray) -> np.ndarray:
        """Probabilities from ranker scores: the temperature, or the hang-family one for rows
        whose best class declares hang signals."""
        t = np.full((len(scores), 1), self.temperature_)
        t_hang = getattr(self, "temperature_hang_", None)
        if t_hang is not None and self.hang_affinity is not None and len(scores):
            member = np.asarray(self.hang_affinity).sum(axis=1) > 0
            t[member[np.asarray(scores).argmax(axis=1)]] = t_hang
        return _softmax(np.asarray(scores) / t)

    def fit_hang_temperature(self, scores: np.ndarray, y: np.ndarray, w: np.ndarray | None = None) -> float | None:
        """Fit ``temperature_hang_`` on held-out ranker ``scores`` of labelled jobs ``y`` (e.g.
        grouped out-of-fold real logs), over the rows whose best class is a hang entry; ``None``
        (and unset) with fewer than 10 such rows or no hang affinity."""
        if self.hang_affinity is None:
            return None
        member = np.asarray(self.hang_affinity).sum(axis=1) > 0
        rows = member[np.asarray(scores).argmax(axis=1)] & (np.asarray(y) >= 0)
        if rows.sum() < 10:
            self.temperature_hang_ = None
            return None
        weights = np.ones(int(rows.sum())) if w is None else np.asarray(w, dtype=np.float64)[rows]
        self.temperature_hang_ = float(self._fit_temperature(np.asarray(scores)[rows], np.asarray(y)[rows], weights))
        return self.temperature_hang_

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(self.predict_proba(X).argmax(axis=1))

    # -- persistence (plain arrays) ------------------------------------------------------
    def to_arrays(self) -> dict[str, np.ndarray]:
        self._check_fitted()
        out = {f"stage1_{k}": v for k, v in self.stage1_.items()}
        out.update({f"stage2_{k}": v for k, v in self.stage2_.items()})
        out["bank_vectors"] = self.bank_vectors_
        out["bank_labels"] = self.bank_labels_
        out["entry_embeddings"] = np.asarray(self.entry_embeddings, dtype=np.float32)
        if self.hang_affinity is not None:
            out["hang_affinity"] = np.asarray(self.hang_affinity, dtype=np.float32)
        out["temperature"] = np.asarray([self.temperature_])
        if getattr(self, "temperature_hang_", None) is not None:
            out["temperature_hang"] = np.asarray([self.temperature_hang_])
        return out

    @classmethod
    def from_arrays(
        cls, arrays: dict[str, np.ndarray], layout: FeatureLayout, *, C: float, n_folds: int, k: int, random_state: int
    ) -> DenpexHead:
        head = cls(
            layout=layout,
            entry_embeddings=arrays["entry_embeddings"],
            C=C,
            n_folds=n_folds,
            k=k,
            random_state=random_state,
            hang_affinity=arrays.get("hang_affinity"),
        )
        head.stage1_ = {k2[len("stage1_") :]: v for k2, v in arrays.items() if k2.startswith("stage1_")}
        head.stage2_ = {k2[len("stage2_") :]: v for k2, v in arrays.items() if k2.startswith("stage2_")}
        head.bank_vectors_ = arrays["bank_vectors"]
        head.bank_labels_ = arrays["bank_labels"].astype(np.int64)
        head.temperature_ = float(arrays["temperature"][0])
        head.temperature_hang_ = float(arrays["temperature_hang"][0]) if "temperature_hang" in arrays else None
        head.classes_ = np.arange(layout.n_classes)
        return head
