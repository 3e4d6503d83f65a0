"""Labelled lines: each taxonomy entry's own wordings, matched to a job's error lines by meaning.

Most evidence in a real log is one to five lines, and a new log often words a known failure
differently from every fingerprint (another PyTorch version, another framework, a short form
such as ``CUDA capability sm_90 is not compatible with this build``). The line bank holds, per
entry, its literal root-cause and symptom fingerprints, its title and its symptom sentences,
embedded once with the model's encoder. For a job, the similarity of its error lines (the
selected templates with error priority) to each entry's lines is one more per-class feature:
the nearest labelled line, by cosine, wherever its class.

The bank comes from the taxonomy alone (no training incident), so it cannot leak a label into
its own features and it grows with every entry a user adds.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from denpex_ml.embedding import Encoder
from denpex_ml.taxonomy import FingerprintKind, FingerprintRole, Taxonomy

__all__ = ["LineBank"]


class LineBank:
    """Unit vectors of the labelled lines of ``labels`` (see the module docs)."""

    def __init__(self, taxonomy: Taxonomy, labels: Sequence[str], encoder: Encoder) -> None:
        texts: list[str] = []
        owner: list[int] = []
        for i, lab in enumerate(labels):
            entry = taxonomy.get(lab)
            lines = [entry.title, *entry.symptoms]
            lines += [
                fp.pattern
                for fp in entry.fingerprints
                if fp.kind is FingerprintKind.LITERAL and fp.role is not FingerprintRole.CONTEXT
            ]
            for text in dict.fromkeys(t.strip() for t in lines if t.strip()):
                texts.append(text)
                owner.append(i)
        self.n_classes = len(labels)
        self.texts = texts
        self.owner = np.asarray(owner, dtype=np.int64)
        vecs = np.asarray(encoder.encode(texts), dtype=np.float32) if texts else np.zeros((0, encoder.dim), np.float32)
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        self.vectors = vecs / np.maximum(norms, 1e-12)

    def similarity(self, line_vectors: np.ndarray) -> np.ndarray:
        """Per class, the best cosine between any of the job's lines and the class's lines (0 with no line)."""
        out = np.zeros(self.n_classes, dtype=np.float32)
        if len(line_vectors) == 0 or len(self.vectors) == 0:
            return out
        L = np.asarray(line_vectors, dtype=np.float32)
        L = L / np.maximum(np.linalg.norm(L, axis=1, keepdims=True), 1e-12)
        best = (L @ self.vectors.T).max(axis=0)
        np.maximum.at(out, self.owner, best)
        return np.clip(out, 0.0, 1.0)
