"""The model users call: logs in, :class:`~denpex_ml.model.diagnosis.Diagnosis` out."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from denpex_ml.embedding import CachedEncoder, Encoder, make_encoder
from denpex_ml.errors import ModelError
from denpex_ml.features.fingerprints import FingerprintMatcher
from denpex_ml.features.structure import FEATURE_NAMES
from denpex_ml.logs import IngestLimits, LogBundle, LogSource, read_logs
from denpex_ml.model.diagnosis import Diagnosis, Evidence
from denpex_ml.model.featurize import Featurizer, JobAnalysis
from denpex_ml.model.head import DenpexHead, FeatureLayout
from denpex_ml.model.initiator import find_initiator
from denpex_ml.model.persistence import models_root, read_model_dir, write_model_dir
from denpex_ml.taxonomy import UNKNOWN_ID, FingerprintRole, Taxonomy, load_taxonomy

__all__ = ["DenpexModel", "default_model", "load_model"]


class DenpexModel:
    """Taxonomy + encoder + head + abstention threshold.

    Use :func:`load_model` (or :func:`denpex_ml.classify` for the shipped default).
    """

    def __init__(
        self,
        *,
        taxonomy: Taxonomy,
        encoder: Encoder,
        head: DenpexHead,
        labels: list[str],
        abstain_threshold: float,
        manifest: dict[str, Any] | None = None,
        max_lines: int = 96,
    ) -> None:
        self.taxonomy = taxonomy
        self.labels = labels
        self.head = head
        self.abstain_threshold = abstain_threshold
        self.manifest = manifest or {}
        self.encoder = encoder if isinstance(encoder, CachedEncoder) else CachedEncoder(encoder)
        self.matcher = FingerprintMatcher(taxonomy)
        if self.matcher.labels != labels:
            raise ModelError("model labels do not match the taxonomy's entries (retrain the model for this taxonomy)")
        self.featurizer = Featurizer(self.matcher, self.encoder, max_lines=max_lines)
        #: The directory the model was loaded from (None for a model built in memory).
        self.path: Path | None = None

    @property
    def model_id(self) -> str:
        """``<directory name>@<first 12 hex of head.npz's SHA-256>``: names the exact model in results."""
        digest = str(self.manifest.get("files", {}).get("head.npz", ""))
        return f"{self.path.name if self.path else 'in-memory'}@{digest[:12] or 'unsaved'}"

    # -- inference ---------------------------------------------------------------------------
    def analyse(self, bundle: LogBundle) -> JobAnalysis:
        return self.featurizer.analyse(bundle)

    def predict_proba(self, analyses: Iterable[JobAnalysis]) -> np.ndarray:
        X = np.stack([self.featurizer.base_vector(a) for a in analyses])
        return self.head.predict_proba(X)

    def diagnose(self, bundle: LogBundle, *, started: float | None = None) -> Diagnosis:
        """Classify an already-ingested bundle."""
        t0 = started if started is not None else time.perf_counter()
        a = self.analyse(bundle)
        proba = self.predict_proba([a])[0]
        return self._diagnosis(a, proba, t0)

    def classify(
        self, source: LogSource | None = None, *, text: str | None = None, limits: IngestLimits | None = None
    ) -> Diagnosis:
        """Diagnose one job: a log file, a directory of per-rank logs, an archive, a mapping
        rank -> text, or raw ``text``. See :func:`denpex_ml.classify`."""
        t0 = time.perf_counter()
        bundle = read_logs(source, text=text, limits=limits)
        return self.diagnose(bundle, started=t0)

    def _diagnosis(self, a: JobAnalysis, proba: np.ndarray, t0: float) -> Diagnosis:
        order = np.argsort(-proba)
        best = self.labels[int(order[0])]
        p_best = float(proba[order[0]])
        alternatives = [(self.labels[int(i)], float(proba[i])) for i in order[:5]]
        no_evidence = a.bundle.is_empty or (not a.hits and not any(s.priority >= 2.0 for s in a.selected))
        abstain = no_evidence or p_best < self.abstain_threshold
        label = UNKNOWN_ID if abstain else best
        confidence = (1.0 - p_best) if abstain else p_best
        verdict = find_initiator(a.bundle, a.hits, a.structure, None if abstain else best)
        evidence = self._evidence(a, best)
        stats = {
            "lines": a.bundle.n_lines,
            "ranks": len(a.bundle.ranks),
            "streams": len(a.bundle.streams),
            "selected_templates": len(a.selected),
            "seconds": round(time.perf_counter() - t0, 4),
            "warnings": list(a.bundle.warnings),
        }
        return Diagnosis(
            label=label,
            confidence=confidence,
            alternatives=alternatives,
            initiating_rank=verdict.rank,
            initiating_reason=verdict.reason if verdict.rank is not None else "",
            entry=self.taxonomy.get(label),
            evidence=evidence,
            best_guess=best,
            stats=stats,
        )

    def _evidence(self, a: JobAnalysis, label: str, limit: int = 8) -> list[Evidence]:
        out: list[Evidence] = []
        seen: set[tuple[str, int]] = set()

        def add(line: Any, why: str) -> None:
            key = (line.source, line.lineno)
            if key in seen or len(out) >= limit:
                return
            seen.add(key)
            out.append(Evidence(line.rank, str(line.stream), line.source, line.lineno, line.text, why))

        for role in (FingerprintRole.ROOT_CAUSE, FingerprintRole.CONTEXT, FingerprintRole.SYMPTOM):
            for h in a.hits:
                if h.entry_id == label and h.role is role:
                    add(h.line, f"{role.value} fingerprint of {label}: {h.fingerprint.pattern[:80]}")
        for s in a.selected:
            if s.priority >= 2.0:
                add(s.line, s.reasons[0] + (f" (x{s.count})" if s.count > 1 else ""))
        return out

    # -- persistence -------------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str], *, extra: dict[str, Any] | None = None) -> Path:
        lay = self.head.layout
        manifest = dict(self.manifest)
        manifest.update(extra or {})
        manifest.update(
            {
                "labels": self.labels,
                "encoder": self.encoder.name,
                "taxonomy_hash": self.taxonomy.fingerprint_hash(),
                "layout": {"n_classes": lay.n_classes, "n_structure": lay.n_structure, "embed_dim": lay.embed_dim},
                "structure_features": list(FEATURE_NAMES),
                "head_params": {
                    "C": self.head.C,
                    "n_folds": self.head.n_folds,
                    "k": self.head.k,
                    "random_state": self.head.random_state,
                },
                "abstain_threshold": self.abstain_threshold,
                "max_lines": self.featurizer.max_lines,
            }
        )
        self.manifest = manifest
        return write_model_dir(path, manifest, self.head.to_arrays())

    @classmethod
    def load(
        cls, path: str | os.PathLike[str], *, taxonomy_dirs: Iterable[str | os.PathLike[str]] | None = None
    ) -> DenpexModel:
        manifest, arrays = read_model_dir(path)
        taxonomy = load_taxonomy(taxonomy_dirs)
        if manifest["taxonomy_hash"] != taxonomy.fingerprint_hash():
            raise ModelError(
                f"{path}: trained on taxonomy {manifest['taxonomy_hash']}, but the loaded taxonomy is "
                f"{taxonomy.fingerprint_hash()} (entries or fingerprints changed): retrain, or pass the taxonomy it was trained with"
            )
        lay = manifest["layout"]
        layout = FeatureLayout(int(lay["n_classes"]), int(lay["n_structure"]), int(lay["embed_dim"]))
        if list(manifest.get("structure_features", [])) != list(FEATURE_NAMES):
            raise ModelError(f"{path}: structure features differ from this library version's; retrain the model")
        encoder = make_encoder(str(manifest["encoder"]), models_root())
        if encoder.dim != layout.embed_dim:
            raise ModelError(
                f"{path}: encoder {encoder.name} has {encoder.dim} dims, the model expects {layout.embed_dim}"
            )
        hp = manifest["head_params"]
        try:
            head = DenpexHead.from_arrays(
                arrays,
                layout,
                C=float(hp["C"]),
                n_folds=int(hp["n_folds"]),
                k=int(hp["k"]),
                random_state=int(hp["random_state"]),
            )
        except KeyError as exc:
            raise ModelError(f"{path}: head array {exc} missing") from None
        model = cls(
            taxonomy=taxonomy,
            encoder=encoder,
            head=head,
            labels=list(manifest["labels"]),
            abstain_threshold=float(manifest["abstain_threshold"]),
            manifest=manifest,
            max_lines=int(manifest.get("max_lines", 96)),
        )
        model.path = Path(path).resolve()
        return model


def load_model(
    path: str | os.PathLike[str] | None = None, *, taxonomy_dirs: Iterable[str | os.PathLike[str]] | None = None
) -> DenpexModel:
    """Load a model directory (default: the shipped ``models/default``), verifying checksums
    and taxonomy compatibility."""
    return DenpexModel.load(path if path is not None else models_root() / "default", taxonomy_dirs=taxonomy_dirs)


_DEFAULT: DenpexModel | None = None
_LOCK = threading.Lock()


def default_model() -> DenpexModel:
    """The shipped model, loaded once per process on first use."""
    global _DEFAULT
    if _DEFAULT is None:
        with _LOCK:
            if _DEFAULT is None:
                _DEFAULT = load_model()
    return _DEFAULT
