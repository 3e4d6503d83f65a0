"""One job -> evidence and a fixed-length feature vector.

Pipeline: fingerprint hits over the retained lines -> bounded selection of distinct line
templates -> template embeddings (cached) -> pooled job embedding, plus cross-rank
structure. Embedding calls per job are bounded by ``max_lines`` (default 96 templates).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from denpex_ml.embedding import Encoder
from denpex_ml.features.fingerprints import FingerprintHit, FingerprintMatcher
from denpex_ml.features.recovery import drop_recovered
from denpex_ml.features.same_gpu import same_gpu_hits
from denpex_ml.features.select import SelectedLine, is_error_line, select_lines
from denpex_ml.features.structure import FEATURE_NAMES, StructureFeatures, analyse_structure
from denpex_ml.hang.analysis import HANG_FEATURE_NAMES, HangReport, analyse_hang
from denpex_ml.logs.bundle import LogBundle
from denpex_ml.model.line_bank import LineBank
from denpex_ml.taxonomy import Taxonomy

__all__ = ["STRUCTURE_NAMES", "Featurizer", "JobAnalysis"]

#: Names of the structure block of a base vector: cross-rank structure, then the hang features.
STRUCTURE_NAMES: tuple[str, ...] = (*FEATURE_NAMES, *HANG_FEATURE_NAMES)


@dataclass
class JobAnalysis:
    """Everything the model derived from one job's logs."""

    bundle: LogBundle
    hits: list[FingerprintHit]
    selected: list[SelectedLine]
    structure: StructureFeatures
    hang: HangReport
    fingerprint_features: np.ndarray  #: per class: 4 fingerprint role columns + line-bank similarity
    embedding: np.ndarray  #: pooled job embedding (all lines ++ error lines), L2-normalised halves


def _flight_recorder(bundle: LogBundle) -> object | None:
    """Cross-rank findings of the job's Flight Recorder dumps, when it had any."""
    if not bundle.flight_recorder:
        return None
    from denpex_ml.hang.flight_recorder import analyse_flight_recorder

    return analyse_flight_recorder(bundle.flight_recorder)


class Featurizer:
    """Turns bundles into :class:`JobAnalysis` objects with a shared template cache."""

    def __init__(
        self,
        matcher: FingerprintMatcher,
        encoder: Encoder,
        *,
        max_lines: int = 96,
        taxonomy: Taxonomy | None = None,
    ) -> None:
        self.matcher = matcher
        self.encoder = encoder
        self.max_lines = max_lines
        #: labelled lines of each entry (None: no line-similarity columns, a version-1 model)
        self.line_bank = LineBank(taxonomy, matcher.labels, encoder) if taxonomy is not None else None

    @property
    def fp_per_class(self) -> int:
        """Columns per class in the fingerprint block: 4 roles, plus the line-bank similarity."""
        return 5 if self.line_bank is not None else 4

    @property
    def embedding_dim(self) -> int:
        return 2 * self.encoder.dim

    @property
    def n_base_features(self) -> int:
        return self.fp_per_class * len(self.matcher.labels) + len(STRUCTURE_NAMES) + self.embedding_dim

    def analyse(self, bundle: LogBundle) -> JobAnalysis:
        lines = list(bundle.iter_lines())
        hits = drop_recovered(self.matcher.scan(lines), lines)  # a flap that came back is not the cause
        hits += same_gpu_hits(lines)  # two processes on one GPU: NCCL's communicator lines side by side
        selected = select_lines(bundle, hits, max_lines=self.max_lines, benign=self.matcher.is_benign)
        structure = analyse_structure(bundle)
        hang = analyse_hang(bundle, structure, flight_recorder=_flight_recorder(bundle))
        fp = self.matcher.features(hits)
        emb, err_vecs = self._pool(selected)
        if self.line_bank is not None:
            sim = self.line_bank.similarity(err_vecs)
            fp = np.concatenate([fp.reshape(len(sim), -1), sim[:, None]], axis=1).reshape(-1)
        return JobAnalysis(bundle, hits, selected, structure, hang, fp, emb)

    def _pool(self, selected: list[SelectedLine]) -> tuple[np.ndarray, np.ndarray]:
        """The pooled job embedding and the vectors of its error lines."""
        d = self.encoder.dim
        out = np.zeros(2 * d, dtype=np.float32)
        if not selected:
            return out, np.zeros((0, d), dtype=np.float32)
        vecs = self.encoder.encode([s.template for s in selected])
        w = np.asarray([s.priority for s in selected], dtype=np.float32)
        allv = (w[:, None] * vecs).sum(axis=0)
        n = np.linalg.norm(allv)
        out[:d] = allv / n if n > 0 else allv
        err = np.asarray([is_error_line(s.line.text) or s.priority >= 3.0 for s in selected])
        if err.any():
            e = (w[err, None] * vecs[err]).sum(axis=0)
            n = np.linalg.norm(e)
            out[d:] = e / n if n > 0 else e
        return out, np.asarray(vecs[err], dtype=np.float32)

    def base_vector(self, a: JobAnalysis) -> np.ndarray:
        """Fingerprint features ++ structure ++ pooled embedding (retrieval features are added by the model)."""
        return np.concatenate([a.fingerprint_features, a.structure.vector, a.hang.vector, a.embedding]).astype(
            np.float32
        )
