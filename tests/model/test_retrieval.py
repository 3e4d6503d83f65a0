"""model/retrieval.py: per-class nearest-incident evidence, vectorised, against a plain loop."""

from __future__ import annotations

import numpy as np
import pytest

from denpex_ml.model import retrieval
from denpex_ml.model.retrieval import RetrievalIndex


def _unit_halves(rng: np.random.Generator, n: int, d: int = 8) -> np.ndarray:
    v = rng.standard_normal((n, 2 * d)).astype(np.float32)
    for half in (slice(0, d), slice(d, 2 * d)):
        v[:, half] /= np.linalg.norm(v[:, half], axis=1, keepdims=True)
    return v


def _reference(index: RetrievalIndex, queries: np.ndarray, exclude: np.ndarray | None) -> np.ndarray:
    """The evidence by a loop per query and class: best similarity, similarity-weighted top-k votes."""
    sims = index.similarities(queries).astype(np.float64)
    if exclude is not None:
        sims = np.where(exclude, -np.inf, sims)
    out = np.zeros((len(sims), 2 * index.n_classes))
    for i, row in enumerate(sims):
        for c in range(index.n_classes):
            cols = row[index.labels == c]
            out[i, c] = cols.max() if len(cols) and np.isfinite(cols.max()) else -1.0
        votes = np.zeros(index.n_classes)
        for j in np.argsort(-row, kind="stable")[: index.k]:
            if np.isfinite(row[j]):
                votes[index.labels[j]] += max(row[j], 0.0)
        out[i, index.n_classes :] = votes / (votes.sum() or 1.0)
    return out


def test_features_equal_a_loop_per_query() -> None:
    """Classes absent from the bank keep -1 and no votes; excluded rows never count."""
    rng = np.random.default_rng(7)
    bank = _unit_halves(rng, 300)
    labels = rng.choice([0, 1, 2, 4, 6], size=300)  # classes 3 and 5 absent
    index = RetrievalIndex(bank, labels, n_classes=7, k=10)
    queries = _unit_halves(rng, 40)
    exclude = rng.random((40, 300)) < 0.3
    for ex in (None, exclude):
        got = index.features(queries, exclude=ex)
        assert got.shape == (40, 14)
        np.testing.assert_allclose(got, _reference(index, queries, ex), rtol=1e-5, atol=1e-6)
    assert (index.features(queries)[:, [3, 5]] == -1.0).all()
    assert (index.features(queries)[:, [7 + 3, 7 + 5]] == 0.0).all()


def test_a_bank_smaller_than_k_votes_with_every_row() -> None:
    rng = np.random.default_rng(3)
    index = RetrievalIndex(_unit_halves(rng, 4), np.array([0, 0, 1, 1]), n_classes=2, k=10)
    q = _unit_halves(rng, 3)
    np.testing.assert_allclose(index.features(q), _reference(index, q, None), rtol=1e-5, atol=1e-6)


def test_features_in_query_blocks_equal_one_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """Queries are scored in blocks (small temporaries); the evidence is the same to float32
    rounding: BLAS may sum a block of another shape in another order (OpenBLAS 0.3.31 does), so
    the bits can differ in the last place, never more."""
    rng = np.random.default_rng(3)
    bank = _unit_halves(rng, 400)
    index = RetrievalIndex(bank, rng.integers(0, 5, 400), n_classes=5, k=10)
    queries = _unit_halves(rng, 70)
    exclude = rng.random((70, 400)) < 0.3
    monkeypatch.setattr(retrieval, "QUERY_BLOCK", 1000)
    whole = index.features(queries, exclude=exclude)
    monkeypatch.setattr(retrieval, "QUERY_BLOCK", 16)
    np.testing.assert_allclose(index.features(queries, exclude=exclude), whole, rtol=2e-6, atol=1e-7)
