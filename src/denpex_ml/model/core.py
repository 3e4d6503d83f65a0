"""The model users call: logs in, :class:`~denpex_ml.model.diagnosis.Diagnosis` out."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from denpex_ml.embedding import CachedEncoder, Encoder, make_encoder
from denpex_ml.errors import InvalidInputError, ModelError, NotALogError, TaxonomyError
from denpex_ml.features.fingerprints import FingerprintHit, FingerprintMatcher, outside_taxonomy
from denpex_ml.features.select import PROGRESS_BAR
from denpex_ml.hang.advice import advise
from denpex_ml.hang.analysis import HANG_FEATURE_NAMES
from denpex_ml.hang.frames import is_traceback_frame
from denpex_ml.logs import IngestLimits, LogBundle, LogSource, Masker, read_logs
from denpex_ml.logs.job_layout import several_jobs_warning
from denpex_ml.model.alternatives import alternatives_order
from denpex_ml.model.diagnosis import Alternative, Diagnosis, Evidence
from denpex_ml.model.featurize import STRUCTURE_NAMES, Featurizer, JobAnalysis
from denpex_ml.model.head import DenpexHead, FeatureLayout
from denpex_ml.model.initiator import initiating_rank
from denpex_ml.model.outside import OutsideDetector, abstains
from denpex_ml.model.persistence import (
    MAX_TAXONOMY_BYTES,
    TAXONOMY_FILE,
    model_id,
    models_root,
    read_model_dir,
    read_model_file,
    write_model_dir,
)
from denpex_ml.taxonomy import UNKNOWN_ID, FingerprintRole, Taxonomy, load_taxonomy
from denpex_ml.taxonomy.groups import HANG_IDS, NO_FAILURE_ID, group_of
from denpex_ml.topology.suspects import attribute

__all__ = ["DenpexModel", "default_model", "family_supported", "load_model", "shift_for_hangs"]


def _traceback_frame(a: JobAnalysis) -> Any | None:
    """The innermost Python traceback frame among the job's selected lines (the last one
    printed), or ``None``: a log that shows one shows a failure, even where the paste stops before
    the exception's own line (:func:`~denpex_ml.hang.frames.is_traceback_frame`)."""
    frames = [s.line for s in a.selected if is_traceback_frame(s.line.text)]
    return max(frames, key=lambda ln: (str(ln.source), ln.lineno)) if frames else None


def family_supported(proba: np.ndarray, labels: list[str], threshold: float) -> np.ndarray:
    """Per row of ``proba`` (n, classes): whether the best entry is a hang or transport entry
    whose family together holds at least ``threshold``. The decision answers such a row even
    below the abstention threshold: a known hang worded unfamiliarly spreads its probability
    over the hang classes, it is not "unknown". The trainer chooses the threshold with it."""
    fam = np.asarray([group_of(lab) for lab in labels])
    best = np.asarray(proba).argmax(axis=1)
    kept = np.zeros(len(proba), dtype=bool)
    for name in ("hang", "transport"):
        cols = fam == name
        kept |= (fam[best] == name) & (np.asarray(proba)[:, cols].sum(axis=1) >= threshold)
    return kept


def shift_for_hangs(proba: np.ndarray, is_hang: np.ndarray, labels: list[str], factor: float) -> np.ndarray:
    """Rows of ``proba`` (n, classes) where the hang analysis found a hang (``is_hang``): the hang
    entries ``factor`` times likelier, ``no-failure`` ruled out, renormalised; other rows as
    they are. The model's decision and the trainer's fit of ``factor`` both use it."""
    p = np.asarray(proba, dtype=float)
    rows = np.asarray(is_hang, dtype=bool)
    if factor == 1.0 or not rows.any():
        return p
    q = p.copy()
    hang = np.asarray([lab in HANG_IDS for lab in labels])
    sub = q[rows]
    sub[:, hang] *= factor
    if NO_FAILURE_ID in labels:
        sub[:, labels.index(NO_FAILURE_ID)] = 0.0
    total = sub.sum(axis=1, keepdims=True)
    q[rows] = np.where(total > 0, sub / np.where(total > 0, total, 1.0), p[rows])
    return q


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
        hang_prior: float = 1.0,
        confidence_map: tuple[float, float] = (1.0, 0.0),
        outside: OutsideDetector | None = None,
    ) -> None:
        self.taxonomy = taxonomy
        self.labels = labels
        self.head = head
        self.abstain_threshold = abstain_threshold
        #: When the hang analysis finds a hang (a watchdog, store, gloo or Horovod stall timeout, a
        #: mismatch, desync or divergence report), the hang entries are this many times likelier
        #: than the head alone says and "no failure" is ruled out (:func:`shift_for_hangs`): a
        #: head trained mostly on generated logs spreads real hangs over transport and crash
        #: entries. The trainer fits it on out-of-fold real scores (saved in the manifest);
        #: 1.0 switches it off.
        self.hang_prior = hang_prior
        #: ``(a, b)``: an answer's stated confidence ``c`` becomes ``sigmoid(a * logit(c) + b)``
        #: (:meth:`recalibrated`), fitted by the trainer on the test-then-train scores of real logs
        #: the scoring models had not seen (:func:`~denpex_ml.dataset.prequential.fit_confidence_map`):
        #: out-of-fold scores of logs the fingerprints were written from are too sure of
        #: themselves. ``(1, 0)`` leaves confidences as the head gives them.
        self.confidence_map = (float(confidence_map[0]), float(confidence_map[1]))
        #: The learned out-of-taxonomy detector (:mod:`denpex_ml.model.outside`): with it, a job
        #: is answered ``unknown`` when the detector fires, not when the top probability is low
        #: (``abstain_threshold`` then only serves models without one).
        self.outside = outside
        self.manifest = manifest or {}
        self.encoder = encoder if isinstance(encoder, CachedEncoder) else CachedEncoder(encoder)
        self.matcher = FingerprintMatcher(taxonomy)
        if self.matcher.labels != labels:
            raise ModelError("model labels do not match the taxonomy's entries (retrain the model for this taxonomy)")
        self.featurizer = Featurizer(
            self.matcher,
            self.encoder,
            max_lines=max_lines,
            taxonomy=taxonomy if head.layout.fp_per_class > 4 else None,
        )
        #: The directory the model was loaded from (None for a model built in memory).
        self.path: Path | None = None

    @property
    def model_id(self) -> str:
        """``<directory name>@<first 12 hex of head.npz's SHA-256>``: names the exact model in results."""
        return model_id(self.path.name if self.path else None, self.manifest)

    # -- inference ---------------------------------------------------------------------------
    def analyse(self, bundle: LogBundle) -> JobAnalysis:
        return self.featurizer.analyse(bundle)

    def predict_proba(self, analyses: Iterable[JobAnalysis]) -> np.ndarray:
        X = np.stack([self.featurizer.base_vector(a) for a in analyses])
        return self.head.predict_proba(X)

    def outside_proba(self, a: JobAnalysis, proba: np.ndarray, x: np.ndarray | None = None) -> float | None:
        """P(the job's failure lies outside the taxonomy) by the learned detector, from its
        analysis ``a``, its head probabilities ``proba`` (as :meth:`decide` takes them) and,
        when already computed, its base vector ``x``; ``None`` for a model without a detector."""
        if self.outside is None:
            return None
        vec = self.featurizer.base_vector(a) if x is None else x
        return float(self.outside.proba(vec[None, :], self.job_proba(a, proba)[None, :], self.head.layout)[0])

    def diagnose(self, bundle: LogBundle, *, started: float | None = None) -> Diagnosis:
        """Classify an already-ingested bundle.

        Raises
        ------
        NotALogError
            The bundle holds no text line and no Flight Recorder dump (empty input, or every
            file was skipped).
        """
        t0 = started if started is not None else time.perf_counter()
        no_lines = bundle.is_empty or not any(ln.text.strip() for ln in bundle.iter_lines())
        if no_lines and not bundle.flight_recorder:
            skipped = f" ({'; '.join(bundle.warnings[:3])})" if bundle.warnings else ""
            raise NotALogError(f"the input holds no log lines to diagnose{skipped}")
        a = self.analyse(bundle)
        proba = self.predict_proba([a])[0]
        return self.decide(a, proba, t0)

    def classify(
        self,
        source: LogSource | None = None,
        *,
        text: str | None = None,
        limits: IngestLimits | None = None,
        reveal_hosts: bool = False,
    ) -> Diagnosis:
        """Diagnose one job: a log file, a directory of per-rank logs, an archive, a mapping
        rank -> text, or raw ``text``. See :func:`denpex_ml.classify`. With ``reveal_hosts``
        the diagnosis also holds the job's pseudonym -> real host map (``host_names``)."""
        t0 = time.perf_counter()
        if limits is not None and not isinstance(limits, IngestLimits):
            raise InvalidInputError(f"classify: limits must be an IngestLimits or None, got {type(limits).__name__}")
        masker = Masker()  # the job's pseudonyms, kept in memory for reveal_hosts
        bundle = read_logs(source, text=text, limits=limits, masker=masker)
        if isinstance(source, (str, os.PathLike)):
            warning = several_jobs_warning(bundle.sources, os.fspath(source))
            if warning is not None:  # in Diagnosis.stats["warnings"], and on stderr through logging
                bundle.warnings.append(warning)
                logging.getLogger(__name__).warning("%s", warning)
        d = self.diagnose(bundle, started=t0)
        return replace(d, host_names=masker.reveal_map()) if reveal_hosts else d

    #: Abstention on hang / transport answers looks at the whole family: a known hang worded
    #: unfamiliarly spreads its probability over the hang classes, it is not "unknown".
    family_threshold: float = 0.55

    #: A job with no error evidence (no fingerprint, no error line, no hang) is answered with the
    #: head's best failure when that is at least this likely (an error the line detectors do not
    #: know, e.g. a socket message without an exception name); else "no failure".
    no_evidence_answer: float = 0.6

    def job_proba(self, a: JobAnalysis, proba: np.ndarray) -> np.ndarray:
        """The head's probabilities with what the job's analysis rules in or out (see
        :attr:`hang_prior`); what :meth:`decide` answers from."""
        shifted = shift_for_hangs(
            np.asarray(proba)[None, :], np.asarray([a.hang.is_hang]), self.labels, self.hang_prior
        )
        return np.asarray(shifted[0])

    def _choose_label(
        self,
        a: JobAnalysis,
        proba: np.ndarray,
        outside: FingerprintHit | None = None,
        outside_p: float | None = None,
    ) -> tuple[str, float, str]:
        """``(label, confidence, best taxonomy guess)`` from the calibrated probabilities.

        * a Flight Recorder finding or a decisive hang signal -> the likeliest entry consistent
          with it (:meth:`_restricted_choice`);
        * ``outside``, a root-cause fingerprint of the ``unknown`` entry (a failure known to lie
          outside the taxonomy, e.g. a cloud refusing capacity) stronger than any entry's
          (:func:`~denpex_ml.features.fingerprints.outside_taxonomy`) -> ``unknown``;
        * no error evidence at all (no fingerprint, no error line, no hang signal, no Python
          traceback frame -- a paste cut before the exception's own line still shows its stack)
          -> the best failure when the model is sure of it (:attr:`no_evidence_answer`), else
          ``no-failure``: ``unknown`` names a failure the taxonomy cannot, and this log shows none;
        * with the learned detector (:attr:`outside`; ``outside_p``, its probability for this job):
          ``unknown`` when it fires (its confidence: that probability) or the best entry is below
          :data:`~denpex_ml.model.outside.ANSWER_FLOOR`, unless the best entry is a hang or
          transport entry whose family together is likely (:func:`~denpex_ml.model.outside.abstains`);
          ``unknown`` too when the best entry is ``no-failure`` below the abstention threshold
          although the log shows error evidence (over the 65 pooled unseen batches bb-do, 11 such
          answers: none of a healthy log); else the best entry;
        * without it: the best entry above the abstention threshold -> that entry; a hang or
          transport entry below it, while its family together is likely -> that entry;
          otherwise ``unknown`` (its confidence: the mass not on the best entry).
        """
        order = np.argsort(-proba)
        best = self.labels[int(order[0])]
        p_best = float(proba[order[0]])
        restricted = self._restricted_choice(a, proba)
        if restricted is not None:  # a dump's finding or a decisive signal restricts the answer
            return restricted
        if outside is not None:  # a failure the taxonomy knows to lie outside it, and nothing stronger
            return UNKNOWN_ID, max(outside.weight, 1.0 - p_best), best
        no_fail = self.labels.index(NO_FAILURE_ID) if NO_FAILURE_ID in self.labels else None
        no_evidence = (
            not a.hits
            and not any(s.priority >= 2.0 for s in a.selected)
            and not a.hang.is_hang
            and _traceback_frame(a) is None  # a traceback cut before its exception line is evidence too
        )
        if no_evidence:
            if no_fail is not None:
                p_nf = float(proba[no_fail])
                rival = max((float(p) for i, p in enumerate(proba) if i != no_fail), default=0.0)
                share = p_nf / max(p_nf + rival, 1e-12)
                if share >= 0.5:
                    return NO_FAILURE_ID, share, best
            if best != NO_FAILURE_ID and p_best >= self.no_evidence_answer:
                return best, p_best, best
            if no_fail is not None:  # nothing in the log shows a failure: none found
                return NO_FAILURE_ID, 1.0 - p_best if best != NO_FAILURE_ID else p_best, best
            return UNKNOWN_ID, 1.0 - p_best, best
        if self.outside is not None and outside_p is not None:
            kept = family_supported(proba[None, :], self.labels, self.family_threshold)
            if not abstains(np.asarray([outside_p]), proba[None, :], self.outside.threshold, kept)[0]:
                if best == NO_FAILURE_ID and p_best < self.abstain_threshold:
                    # the log shows a failure (error lines, a traceback) and the model leans,
                    # unsure, to none: that is not "no failure found"
                    return UNKNOWN_ID, 1.0 - p_best, best
                return best, p_best, best
            if outside_p >= self.outside.threshold:
                return UNKNOWN_ID, outside_p, best
            return UNKNOWN_ID, 1.0 - p_best, best
        if p_best >= self.abstain_threshold:
            return best, p_best, best
        if family_supported(proba[None, :], self.labels, self.family_threshold)[0]:
            return best, p_best, best
        return UNKNOWN_ID, 1.0 - p_best, best

    #: What a Flight Recorder finding reads as when the dumps are the job's only evidence (PyTorch's
    #: own analyser reports ranks that never called a collective, or ranks that called different ones).
    FLIGHT_RECORDER_READING: ClassVar[dict[str, str]] = {
        "signal:flight-recorder-mismatch": "collective-mismatch",
        "signal:flight-recorder-missing-rank": "subset-rank-collective-hang",
    }

    #: Signals that name the mechanism so precisely that only the entries declaring them (in
    #: ``hang_signals``) remain possible: a size mismatch inside FSDP's unshard or a ZeRO-3
    #: parameter fetch is a divergence of the sharded parameters, and one inside a send/recv a
    #: disagreement of pipeline stages on a tensor's shape, not a generic collective mismatch.
    DECISIVE_SIGNALS: ClassVar[tuple[str, ...]] = ("signal:mismatch-param-gather", "signal:mismatch-p2p")

    def _restricted_choice(self, a: JobAnalysis, proba: np.ndarray) -> tuple[str, float, str] | None:
        """When Flight Recorder dumps show a mismatch or a missing rank, the hang is one of the
        entries that declare that signal (``hang_signals``: each entry consistent with it); a
        :attr:`DECISIVE_SIGNALS` signal narrows that to the entries declaring it. The answer is the
        likeliest of them, with its probability renormalised over them; when the dumps are all the
        job shows (no fingerprint, no error line), the finding's own reading
        (:attr:`FLIGHT_RECORDER_READING`). ``None`` without such a finding or signal."""
        A = self.head.hang_affinity
        if A is None:
            return None
        A = np.asarray(A)
        fr_names = [
            n for n in ("signal:flight-recorder-mismatch", "signal:flight-recorder-missing-rank") if n in a.hang.signals
        ]
        decisive = [n for n in self.DECISIVE_SIGNALS if n in a.hang.signals]
        if not fr_names and not decisive:
            return None
        allowed = np.ones(len(self.labels), dtype=bool)
        if fr_names:
            allowed &= A[:, [HANG_FEATURE_NAMES.index(n) for n in fr_names]].sum(axis=1) > 0
        for n in decisive:
            narrower = allowed & (A[:, HANG_FEATURE_NAMES.index(n)] > 0)
            if narrower.any():
                allowed = narrower
        if not allowed.any():
            return None
        masked = np.where(allowed, proba, -1.0)
        i = int(masked.argmax())
        if fr_names and not decisive and not a.hits and not any(s.priority >= 2.0 for s in a.selected):
            reading = self.FLIGHT_RECORDER_READING.get(fr_names[0])
            if reading in self.labels and allowed[self.labels.index(reading)]:
                i = self.labels.index(reading)
        return self.labels[i], float(proba[i] / max(float(proba[allowed].sum()), 1e-12)), self.labels[i]

    def recalibrated(
        self, label: str, confidence: float, alternatives: list[Alternative]
    ) -> tuple[float, list[Alternative]]:
        """An answer's confidence through :attr:`confidence_map`; when the answer is the first
        alternative, the alternatives are rescaled with it, keeping the head's order and ratios:
        pulled down, every alternative shrinks by the answer's factor (the mass taken off is
        doubt, not another entry's); pushed up, the others share the rest in their old
        proportions. Either way they stay below the answer and sum to at most one."""
        a, b = self.confidence_map
        if (a, b) == (1.0, 0.0):
            return confidence, alternatives
        c = min(max(float(confidence), 1e-6), 1.0 - 1e-6)
        new = float(1.0 / (1.0 + np.exp(-(a * np.log(c / (1.0 - c)) + b))))
        if alternatives and alternatives[0].label == label:
            # the answer's own entry may hold less than its confidence (renormalised over the
            # entries a Flight Recorder finding allows): the rivals follow that entry
            p0 = float(alternatives[0].probability)
            scale = new / max(p0, 1e-12) if new <= p0 else (1.0 - new) / max(1.0 - p0, 1e-12)
            alternatives = [Alternative(label, new)] + [
                Alternative(x.label, x.probability * scale) for x in alternatives[1:]
            ]
        return new, alternatives

    def decide(self, a: JobAnalysis, proba: np.ndarray, t0: float, *, outside_p: float | None = None) -> Diagnosis:
        """The :class:`Diagnosis` of an analysed job from its calibrated class probabilities
        (``proba``, the head's output for ``a``): the label or abstention, the first failing
        rank, the evidence, the hang report and advice; ``t0`` is when the work on the job
        started (``time.perf_counter()``), for the timing in ``stats``. Evaluation uses it to
        score probabilities from a cross-validated head the same way ``classify`` would.
        ``outside_p``: the out-of-taxonomy detector's probability for the job
        (:meth:`outside_proba`; computed here when the model has a detector and it is not given)."""
        if outside_p is None and self.outside is not None:
            outside_p = self.outside_proba(a, proba)
        proba = self.job_proba(a, proba)
        order = alternatives_order(proba, self.labels, a.hang.is_hang)
        alternatives = [Alternative(self.labels[int(i)], float(proba[i])) for i in order[:5]]
        outside = outside_taxonomy(a.hits)
        label, confidence, best = self._choose_label(a, proba, outside, outside_p)
        if label != UNKNOWN_ID:  # Flight Recorder findings come first
            outside = None
            confidence, alternatives = self.recalibrated(label, confidence, alternatives)
        answered = label not in (UNKNOWN_ID, NO_FAILURE_ID)
        rank, reason = initiating_rank(a, best if answered else None, self.taxonomy)
        hang = a.hang
        if label == NO_FAILURE_ID:
            rank, reason = None, ""
        evidence = self._evidence(a, UNKNOWN_ID if outside is not None else best)
        topology, suspects = attribute(a.bundle, self.taxonomy, label, rank, evidence)
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
            initiating_rank=rank,
            initiating_reason=reason,
            entry=self.taxonomy.get(label),
            evidence=evidence,
            best_guess=best,
            stats=stats,
            hang=hang if hang.is_hang else None,
            advice=advise(alternatives, hang, self.taxonomy) if label != NO_FAILURE_ID else None,
            topology=topology,
            suspects=suspects,
            outside_taxonomy=outside.fingerprint.meaning if outside is not None else "",
            outside_probability=outside_p,
            unknown_reason=self._unknown_reason(label, outside, outside_p),
        )

    def _unknown_reason(self, label: str, outside: FingerprintHit | None, outside_p: float | None) -> str:
        """Why the answer is ``unknown`` (see :attr:`Diagnosis.unknown_reason`); empty otherwise."""
        if label != UNKNOWN_ID:
            return ""
        if outside is not None:
            return "outside-fingerprint"
        if self.outside is not None and outside_p is not None and outside_p >= self.outside.threshold:
            return "detector"
        return "unsure"

    def _evidence(self, a: JobAnalysis, label: str, limit: int = 8) -> list[Evidence]:
        out: list[Evidence] = []
        seen: set[tuple[str, int]] = set()

        def add(line: Any, why: str) -> None:
            key = (line.source, line.lineno)
            if key in seen or len(out) >= limit:
                return
            seen.add(key)
            out.append(Evidence(line.rank, str(line.stream), line.source, line.lineno, line.text, why))

        bars: list[tuple[Any, str]] = []  # progress bars prove little: at most one, last
        for role in (FingerprintRole.ROOT_CAUSE, FingerprintRole.CONTEXT, FingerprintRole.SYMPTOM):
            for h in a.hits:
                if h.entry_id == label and h.role is role:
                    why = f"{role.value} of {label}: {h.fingerprint.meaning}"
                    if PROGRESS_BAR.search(h.line.text):
                        bars.append((h.line, why))
                    else:
                        add(h.line, why)
        for s in a.selected:
            if s.priority >= 2.0 and not PROGRESS_BAR.search(s.line.text):
                add(s.line, s.reasons[0] + (f" (x{s.count})" if s.count > 1 else ""))
        for line, why in bars[:1]:
            add(line, why)
        if not out and (frame := _traceback_frame(a)) is not None:  # all the log shows of the failure
            add(frame, "innermost frame of a Python traceback whose exception line the log does not show")
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
                "layout": {
                    "n_classes": lay.n_classes,
                    "n_structure": lay.n_structure,
                    "embed_dim": lay.embed_dim,
                    "n_hang": lay.n_hang,
                    "fp_per_class": lay.fp_per_class,
                },
                "structure_features": list(STRUCTURE_NAMES),
                "head_params": {
                    "C": self.head.C,
                    "n_folds": self.head.n_folds,
                    "k": self.head.k,
                    "random_state": self.head.random_state,
                },
                "abstain_threshold": self.abstain_threshold,
                "outside_threshold": None if self.outside is None else self.outside.threshold,
                "hang_prior": self.hang_prior,
                "confidence_map": list(self.confidence_map),
                "max_lines": self.featurizer.max_lines,
            }
        )
        self.manifest = manifest
        files = {TAXONOMY_FILE: self.taxonomy.to_json().encode("utf-8")}
        arrays = self.head.to_arrays()
        if self.outside is not None:
            arrays.update(self.outside.to_arrays())
        return write_model_dir(path, manifest, arrays, files=files)

    @classmethod
    def load(
        cls, path: str | os.PathLike[str], *, taxonomy_dirs: Iterable[str | os.PathLike[str]] | None = None
    ) -> DenpexModel:
        manifest, arrays = read_model_dir(path)
        taxonomy = load_taxonomy(taxonomy_dirs)
        if taxonomy_dirs is None and manifest["taxonomy_hash"] != taxonomy.fingerprint_hash():
            # not the bundled taxonomy's model: the taxonomy the directory carries (the bundled
            # one wins when it matches, so edited texts of its entries show without retraining)
            carried = read_model_file(path, manifest, TAXONOMY_FILE, MAX_TAXONOMY_BYTES)
            if carried is not None:
                try:
                    taxonomy = Taxonomy.from_json(carried, where=f"{path}/{TAXONOMY_FILE}")
                except TaxonomyError as exc:
                    raise ModelError(str(exc)) from None
        if manifest["taxonomy_hash"] != taxonomy.fingerprint_hash():
            raise ModelError(
                f"{path}: trained on taxonomy {manifest['taxonomy_hash']}, but the loaded taxonomy is "
                f"{taxonomy.fingerprint_hash()} (entries or fingerprints changed): retrain, or pass the taxonomy it was trained with"
            )
        layout = FeatureLayout.from_manifest(manifest["layout"])
        if list(manifest.get("structure_features", [])) != list(STRUCTURE_NAMES):
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
            hang_prior=float(manifest.get("hang_prior", 1.0)),
            confidence_map=tuple(manifest.get("confidence_map", (1.0, 0.0))),
            outside=OutsideDetector.from_arrays(arrays, manifest.get("outside_threshold")),
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
