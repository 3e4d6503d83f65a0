"""Baselines the model is compared with, on the same rows in the same run (training and evaluation).

* ``rule`` - taxonomy fingerprint regexes only (:class:`denpex_ml.baselines.RuleBaseline`);
* ``tfidf`` - TF-IDF + logistic regression over the whole masked log
  (:class:`denpex_ml.baselines.TfidfBaseline`), fitted on the model's training data (out of
  fold on real incidents);
* ``zeroshot`` - nearest taxonomy entry by cosine similarity of the job's pooled line
  embedding to the entry's text embedding (same encoder as the model, no training);
* ``gpualert`` - the open peer tool GPUAlert (PyPI ``gpualert``, MIT): ordered regexes over a
  process's output, ``gpualert.parse_errors.parse_errors(stdout, stderr)``, first match wins.
  Its classes map onto taxonomy ids by :data:`GPUALERT_MAP`; no match, or the generic
  "exited with code" message, counts as abstaining (``unknown``). Optional: when the package
  is not importable the report says "not installed".

GPUAlert class -> taxonomy id (:data:`GPUALERT_MAP`):

=================================  ==============================  =====================================
GPUAlert class                     taxonomy id                     note
=================================  ==============================  =====================================
GPU out-of-memory (CUDA OOM)       cuda-oom
NCCL communication error           nccl-network-error              also fires on hangs/init failures
CUDA runtime error                 cuda-illegal-memory-access      also asserts, driver mismatches
System out-of-memory (RAM)         host-oom
Segmentation fault                 segfault-native-crash
File not found                     file-not-found
Permission denied                  permission-denied
Missing Python module              missing-module
Division by zero                   uncaught-exception-crash
Tensor device mismatch             tensor-device-mismatch
NaN detected in loss               loss-nan-divergence
Process killed by OS (OOM)         host-oom
Assertion failed                   uncaught-exception-crash
Python RuntimeError                uncaught-exception-crash        generic catch-all
Python exception (traceback)       uncaught-exception-crash        generic catch-all
=================================  ==============================  =====================================
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline

from denpex_ml.features.fingerprints import FingerprintHit, FingerprintMatcher
from denpex_ml.features.same_gpu import same_gpu_hits
from denpex_ml.logs import LogBundle

__all__ = [
    "BASELINES",
    "GPUALERT_MAP",
    "GPUAlertBaseline",
    "RuleBaseline",
    "TfidfBaseline",
    "ZeroShotBaseline",
    "bundle_text",
    "gpualert_version",
]


def bundle_text(bundle: LogBundle, max_chars: int = 200_000) -> str:
    """The retained lines of a job as one text (bounded)."""
    return "\n".join(ln.text for ln in bundle.iter_lines())[:max_chars]


class RuleBaseline:
    """Fingerprint rules only. ``scores`` rows are per-label rule scores."""

    def __init__(self, matcher: FingerprintMatcher) -> None:
        self.matcher = matcher
        self.labels = matcher.labels

    def scores(self, bundles: Sequence[LogBundle]) -> np.ndarray:
        return np.stack([self.matcher.rule_scores(self._hits(b)) for b in bundles])

    def _hits(self, bundle: LogBundle) -> list[FingerprintHit]:
        lines = list(bundle.iter_lines())
        return [*self.matcher.scan(lines), *same_gpu_hits(lines)]  # the line rules and the cross-line one

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


log = logging.getLogger(__name__)

#: Baseline names, in report order.
BASELINES = ("rule", "tfidf", "zeroshot", "gpualert")

#: GPUAlert's class (first line of its summary) -> taxonomy id. See the module docstring.
GPUALERT_MAP: dict[str, str] = {
    "GPU out-of-memory (CUDA OOM)": "cuda-oom",
    "NCCL communication error": "nccl-network-error",
    "CUDA runtime error": "cuda-illegal-memory-access",
    "System out-of-memory (RAM)": "host-oom",
    "Segmentation fault": "segfault-native-crash",
    "File not found": "file-not-found",
    "Permission denied": "permission-denied",
    "Missing Python module": "missing-module",
    "Division by zero": "uncaught-exception-crash",
    "Tensor device mismatch": "tensor-device-mismatch",
    "NaN detected in loss": "loss-nan-divergence",
    "Process killed by OS (OOM)": "host-oom",
    "Assertion failed": "uncaught-exception-crash",
    "Python RuntimeError": "uncaught-exception-crash",
    "Python exception (traceback)": "uncaught-exception-crash",
}


def gpualert_version() -> str | None:
    """The installed GPUAlert version, or None when it is not importable."""
    if importlib.util.find_spec("gpualert") is None:
        return None
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gpualert")
    except PackageNotFoundError:
        return "unknown version"


def raw_text(source: Any) -> str:
    """A job's whole raw output as one text (per-rank files joined in name order)."""
    if isinstance(source, dict):
        return "\n".join(str(source[k]) for k in sorted(source))
    return str(source)


class GPUAlertBaseline:
    """GPUAlert's ``parse_errors`` over the raw output, mapped onto taxonomy ids."""

    def __init__(self, labels: Sequence[str]) -> None:
        from gpualert.parse_errors import ERROR_PATTERNS, parse_errors

        self.labels = list(labels)
        self._parse = parse_errors
        unmapped = [lab for _, lab, _ in ERROR_PATTERNS if lab not in GPUALERT_MAP]
        if unmapped:
            log.warning("GPUAlert classes without a taxonomy mapping (scored as unknown): %s", unmapped)
        self.classes = [GPUALERT_MAP.get(lab) for _, lab, _ in ERROR_PATTERNS]

    def predict_label(self, source: Any) -> str | None:
        """The mapped taxonomy id, or None when GPUAlert finds nothing it names."""
        summary = self._parse("", raw_text(source), 1)
        return GPUALERT_MAP.get(summary.split("\n", 1)[0]) if summary else None

    def predict_proba(self, sources: Sequence[Any]) -> np.ndarray:
        """One-hot rows on the mapped id; all-zero rows where it abstains."""
        index = {lab: i for i, lab in enumerate(self.labels)}
        P = np.zeros((len(sources), len(self.labels)))
        for row, src in enumerate(sources):
            lab = self.predict_label(src)
            if lab is not None and lab in index:
                P[row, index[lab]] = 1.0
        return P


class ZeroShotBaseline:
    """Nearest taxonomy entry by embedding similarity (no training).

    ``job_embeddings`` are the unit-norm pooled line embeddings the model's featuriser
    computes; ``entry_embeddings`` the encoder's embedding of each entry's search text.
    Probabilities are a softmax of cosine similarities over ``temperature``.
    """

    def __init__(self, entry_embeddings: np.ndarray, *, temperature: float = 0.05) -> None:
        E = np.asarray(entry_embeddings, dtype=np.float64)
        self.entries = E / np.maximum(np.linalg.norm(E, axis=1, keepdims=True), 1e-12)
        self.temperature = temperature

    def predict_proba(self, job_embeddings: np.ndarray) -> np.ndarray:
        J = np.asarray(job_embeddings, dtype=np.float64)
        J = J / np.maximum(np.linalg.norm(J, axis=1, keepdims=True), 1e-12)
        s = J @ self.entries.T / self.temperature
        s -= s.max(axis=1, keepdims=True)
        e = np.exp(s)
        return np.asarray(e / e.sum(axis=1, keepdims=True))
