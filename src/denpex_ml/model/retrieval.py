"""Nearest labelled incidents in embedding space (exact cosine search with numpy).

At a few thousand incidents an exact matrix product takes well under a millisecond per
query, so no approximate index is used.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["QUERY_BLOCK", "RetrievalIndex"]

#: Queries scored at once by :meth:`RetrievalIndex.features`.
QUERY_BLOCK = 128


@dataclass
class RetrievalIndex:
    """Labelled job embeddings; ``features`` gives per-class similarity evidence."""

    vectors: np.ndarray  #: (n, d) float32, rows L2-normalised per half
    labels: np.ndarray  #: (n,) int class indices
    n_classes: int
    k: int = 10

    def __post_init__(self) -> None:
        self.vectors = np.asarray(self.vectors, dtype=np.float32)
        self.labels = np.asarray(self.labels, dtype=np.int64)
        # the bank's columns grouped by class, once per bank (each query reduces over the groups)
        self._order = np.argsort(self.labels, kind="stable")
        self._present, self._starts = np.unique(self.labels[self._order], return_index=True)

    @property
    def n_features(self) -> int:
        return 2 * self.n_classes

    def similarities(self, queries: np.ndarray) -> np.ndarray:
        q = np.atleast_2d(np.asarray(queries, dtype=np.float32))
        # each half of the vector is unit length, so the dot product / 2 is a cosine in [-1, 1]
        return np.asarray((q @ self.vectors.T) / 2.0, dtype=np.float32)

    def features(self, queries: np.ndarray, *, exclude: np.ndarray | None = None) -> np.ndarray:
        """Per class: the best similarity, and the similarity-weighted share of the top-k votes.

        ``exclude`` (n_queries, n) masks bank rows per query (out-of-fold features for training).
        Vectorised over the queries: the per-class best by one reduction over the bank sorted by
        class, the k nearest by :func:`_top_k`, the votes by one scatter-add; in blocks of
        :data:`QUERY_BLOCK` queries, so that no temporary outgrows what the allocator keeps for
        reuse (a fold's whole similarity matrix and its top-k indices are 30 and 60 MB: fresh
        pages each time, which cost more here than the arithmetic).
        """
        q = np.atleast_2d(np.asarray(queries, dtype=np.float32))
        if len(q) > QUERY_BLOCK:
            return np.concatenate(
                [
                    self.features(
                        q[i : i + QUERY_BLOCK], exclude=None if exclude is None else exclude[i : i + QUERY_BLOCK]
                    )
                    for i in range(0, len(q), QUERY_BLOCK)
                ]
            )
        sims = self.similarities(q)
        if exclude is not None:
            sims = np.where(exclude, -np.inf, sims)
        n_q = sims.shape[0]
        best = np.full((n_q, self.n_classes), -1.0, dtype=np.float32)
        if sims.shape[1]:
            best[:, self._present] = np.maximum.reduceat(sims[:, self._order], self._starts, axis=1)
        best[~np.isfinite(best)] = -1.0
        votes = np.zeros((n_q, self.n_classes), dtype=np.float32)
        k = min(self.k, sims.shape[1])
        if k:
            top = _top_k(sims, k)
            s = np.take_along_axis(sims, top, axis=1)
            weight = np.where(np.isfinite(s), np.maximum(s, 0.0), 0.0).astype(np.float32)
            np.add.at(votes, (np.repeat(np.arange(n_q), k), self.labels[top].ravel()), weight.ravel())
            totals = votes.sum(axis=1, keepdims=True)
            totals[totals == 0] = 1.0
            votes /= totals
        return np.concatenate([best, votes], axis=1)

    def nearest(self, query: np.ndarray, n: int = 3) -> list[tuple[int, float]]:
        sims = self.similarities(query)[0]
        idx = np.argsort(-sims)[:n]
        return [(int(i), float(sims[i])) for i in idx]


def _top_k(sims: np.ndarray, k: int) -> np.ndarray:
    """Column indices of the ``k`` largest similarities of each row (in no particular order).
    (torch's top-k is about ten times faster on a fold's matrix, but importing torch costs a
    warm retrain more than it saves: measured, no gain.)"""
    return np.argpartition(sims, sims.shape[1] - k, axis=1)[:, -k:]
