"""Baselines the model is compared with on the same data in the same run.

* :class:`RuleBaseline` - taxonomy fingerprints only: the entry with the strongest
  root-cause evidence wins (symptoms and context break ties); no evidence -> ``unknown``.
* :class:`TfidfBaseline` - TF-IDF over the whole (masked) log + logistic regression.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline

from denpex_ml.features.fingerprints import FingerprintMatcher
from denpex_ml.logs import LogBundle

__all__ = ["RuleBaseline", "TfidfBaseline", "bundle_text"]


def bundle_text(bundle: LogBundle, max_chars: int = 200_000) -> str:
    """The retained lines of a job as one text (bounded)."""
    return "\n".join(ln.text for ln in bundle.iter_lines())[:max_chars]


class RuleBaseline:
    """Fingerprint rules only. ``scores`` rows are per-label rule scores."""

    def __init__(self, matcher: FingerprintMatcher) -> None:
        self.matcher = matcher
        self.labels = matcher.labels

    def scores(self, bundles: Sequence[LogBundle]) -> np.ndarray:
        return np.stack([self.matcher.rule_scores(self.matcher.scan(b.iter_lines())) for b in bundles])

    def predict_proba(self, bundles: Sequence[LogBundle]) -> np.ndarray:
        """Scores normalised to sum to one (all-zero rows stay zero: no evidence)."""
        s = self.scores(bundles)
        totals = s.sum(axis=1, keepdims=True)
        totals[totals == 0] = 1.0
        return np.asarray(s / totals)


class TfidfBaseline:
    """TF-IDF (word 1-2 grams) + logistic regression over the retained log text."""

    def __init__(self, labels: Sequence[str], *, C: float = 10.0) -> None:
        self.labels = list(labels)
        self.pipeline = Pipeline(
            [
                (
                    "tfidf",
                    TfidfVectorizer(
                        ngram_range=(1, 2),
                        min_df=2,
                        max_features=100_000,
                        sublinear_tf=True,
                        token_pattern=r"(?u)\b[A-Za-z_][\w.]+\b",
                    ),
                ),
                ("lr", LogisticRegression(C=C, max_iter=2000)),
            ]
        )

    def fit(self, texts: Sequence[str], y: np.ndarray, sample_weight: np.ndarray | None = None) -> TfidfBaseline:
        self.pipeline.fit(list(texts), y, lr__sample_weight=sample_weight)
        return self

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        P = np.zeros((len(texts), len(self.labels)))
        P[:, self.pipeline.classes_] = self.pipeline.predict_proba(list(texts))
        return P
