"""Train, evaluate and save a model (``denpex-ml train``).

Data: synthetic train/val/test splits from the generator, real incidents from
``data/real`` and optional user incidents. Evaluation never uses what a model trained on:

* real incidents are scored by grouped k-fold (a source thread is never on both sides);
* the synthetic test split (with held-out launcher formats and message version) is
  scored by the final model, which never saw it;
* the abstention threshold is chosen on the synthetic validation split and the
  out-of-fold real scores, not on the test split.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from denpex_ml.baselines import RuleBaseline
from denpex_ml.dataset.io import expand_data_path
from denpex_ml.dataset.prequential import fit_confidence_map
from denpex_ml.embedding import CachedEncoder, make_encoder
from denpex_ml.features.fingerprints import FingerprintMatcher
from denpex_ml.hang.analysis import HANG_FEATURE_NAMES, signal_affinity
from denpex_ml.metrics import classification_metrics, per_class_table
from denpex_ml.model.core import DenpexModel, family_supported, shift_for_hangs
from denpex_ml.model.featurize import STRUCTURE_NAMES, Featurizer, JobAnalysis
from denpex_ml.model.head import DenpexHead, FeatureLayout, stage1_for_layout
from denpex_ml.model.initiator import initiating_rank
from denpex_ml.model.outside import abstains, fit_outside_detector
from denpex_ml.model.persistence import models_root, read_model_dir
from denpex_ml.taxonomy import UNKNOWN_ID, Taxonomy, load_taxonomy
from denpex_ml.training.cache import EmbeddingStore, FeatureStore, featurizer_signature
from denpex_ml.training.config import TrainConfig
from denpex_ml.training.data import Example, build_data, data_hash
from denpex_ml.training.fitting import (
    FeatureSet,
    FeaturizerSpec,
    concat_features,
    featurize,
    fit_final_and_fold_heads,
    fit_fold_heads,
    fit_head,
    fit_tfidf,
    real_folds,
)
from denpex_ml.training.progress import Progress, no_progress

__all__ = [
    "TrainResult",
    "choose_hang_prior",
    "choose_threshold",
    "hang_rows",
    "train",
]

log = logging.getLogger(__name__)


@dataclass
class TrainResult:
    model: DenpexModel
    metrics: dict[str, float]
    per_class: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    model_dir: Path | None = None
    seconds: float = 0.0


def choose_threshold(
    proba: np.ndarray, y: np.ndarray, kept: np.ndarray | None = None, sources: np.ndarray | None = None
) -> float:
    """The threshold on the top probability that maximises accuracy when abstaining counts
    as correct exactly for ``unknown`` incidents; rows in ``kept`` are answered at any threshold
    (the family rule of the decision), so they do not pull the threshold down.

    ``sources`` (one id per row, e.g. synthetic validation vs. real out-of-fold) weighs each
    source equally: the rule must hold on real logs, not only on the larger synthetic set."""
    best_t, best_acc = 0.0, -1.0
    top = proba.max(axis=1)
    pred = proba.argmax(axis=1)
    keep = np.zeros(len(proba), dtype=bool) if kept is None else kept
    src = np.zeros(len(proba), dtype=int) if sources is None else np.asarray(sources)
    parts = [src == v for v in np.unique(src)]
    for t in np.round(np.arange(0.0, 0.91, 0.025), 3):
        right = np.where((top < t) & ~keep, y == -1, pred == y)
        acc = float(np.mean([right[m].mean() for m in parts])) if parts else 0.0
        if acc > best_acc + 1e-9:
            best_t, best_acc = float(t), acc
    return best_t


def hang_rows(X: np.ndarray, layout: FeatureLayout) -> np.ndarray:
    """Which base vectors show a hang (the hang analysis's ``signal:hang`` feature)."""
    if layout.n_hang == 0:
        return np.zeros(len(X), dtype=bool)
    return np.asarray(layout.hang(X)[:, HANG_FEATURE_NAMES.index("signal:hang")] > 0)


#: the hang priors the trainer chooses among (1.0: no shift)
HANG_PRIORS: tuple[float, ...] = (1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0)


def choose_hang_prior(proba: np.ndarray, y: np.ndarray, is_hang: np.ndarray, labels: list[str]) -> float:
    """The :func:`~denpex_ml.model.core.shift_for_hangs` factor that maximises the mean log
    probability of the true entry on the known-label rows that show a hang (out-of-fold real
    scores: the head's trust in generated hangs is exactly what it cannot judge itself); 1.0
    when there are fewer than 10 such rows."""
    rows = np.asarray(is_hang, dtype=bool) & (y >= 0)
    if rows.sum() < 10:
        return 1.0
    p, t = np.asarray(proba)[rows], y[rows]
    best, best_ll = 1.0, -np.inf
    for f in HANG_PRIORS:
        q = shift_for_hangs(p, np.ones(len(p), dtype=bool), labels, f)
        ll = float(np.mean(np.log(np.clip(q[np.arange(len(t)), t], 1e-9, 1.0))))
        if ll > best_ll + 1e-9:
            best, best_ll = f, ll
    return best


def _initiator_metrics(
    prefix: str,
    analyses: Sequence[JobAnalysis],
    examples: Sequence[Example],
    proba: np.ndarray,
    labels: list[str],
    taxonomy: Taxonomy,
) -> dict[str, float]:
    """First-failing-rank accuracy where the incident states it, and where the log also
    shows that rank at all (no method can name a rank the log never mentions)."""
    ok = n = ok_vis = n_vis = 0
    for a, e, p in zip(analyses, examples, proba, strict=True):
        if e.initiating_rank is None:
            continue
        rank, _reason = initiating_rank(a, labels[int(np.argmax(p))], taxonomy)
        hit = rank == e.initiating_rank
        n += 1
        ok += hit
        if e.initiating_rank in a.bundle.streams:
            n_vis += 1
            ok_vis += hit
    return {
        f"{prefix}/initiator_accuracy": ok / n if n else float("nan"),
        f"{prefix}/initiator_n": float(n),
        f"{prefix}/initiator_accuracy_visible": ok_vis / n_vis if n_vis else float("nan"),
        f"{prefix}/initiator_n_visible": float(n_vis),
    }


@dataclass
class _Setup:
    """What every step of :func:`train` shares: the taxonomy and the objects built from it."""

    taxonomy: Taxonomy
    encoder: CachedEncoder
    matcher: FingerprintMatcher
    featurizer: Featurizer
    layout: FeatureLayout
    entry_emb: np.ndarray
    affinity: np.ndarray
    store: FeatureStore | None = None
    emb_store: EmbeddingStore | None = None

    @property
    def labels(self) -> list[str]:
        return self.matcher.labels


def _setup(config: TrainConfig, cache_dir: str | Path | None) -> _Setup:
    taxonomy = load_taxonomy(config.taxonomy_dirs)
    encoder = CachedEncoder(make_encoder(config.encoder, models_root()))
    emb_store: EmbeddingStore | None = None
    if cache_dir is not None:  # before the featurizer embeds its line bank: those are in the file
        emb_store = EmbeddingStore(Path(cache_dir), encoder.name)
        emb_store.load_into(encoder)
    matcher = FingerprintMatcher(taxonomy)
    featurizer = Featurizer(matcher, encoder, max_lines=config.max_lines, taxonomy=taxonomy)
    store: FeatureStore | None = None
    if cache_dir is not None:
        store = FeatureStore(Path(cache_dir), featurizer_signature(featurizer, taxonomy), featurizer.n_base_features)
    labels = matcher.labels
    layout = FeatureLayout(
        len(labels), len(STRUCTURE_NAMES), encoder.dim, len(HANG_FEATURE_NAMES), featurizer.fp_per_class
    )
    entry_emb = encoder.encode([taxonomy.get(lab).text_for_search() for lab in labels])
    affinity = signal_affinity(labels, {e.id: e.hang_signals for e in taxonomy})
    return _Setup(taxonomy, encoder, matcher, featurizer, layout, entry_emb, affinity, store, emb_store)


def _featurise_all(st: _Setup, config: TrainConfig, *, baselines: bool, progress: Progress) -> dict[str, FeatureSet]:
    """Build the data (synthetic splits, real and user incidents) and featurise it, through the
    cache when there is one (analyses kept for the test split and real incidents when the
    baselines need them)."""
    data = build_data(
        taxonomy=st.taxonomy,
        seed=config.seed,
        per_class=(config.per_class_train, config.per_class_val, config.per_class_test),
        real_data=config.real_data,
        extra_data=config.extra_data,
        cache_dir=st.store.root if st.store is not None else None,
    )
    index = {lab: i for i, lab in enumerate(st.labels)}
    fs = {
        name: featurize(
            st.featurizer,
            data[name],
            index,
            keep=baselines and name in ("test", "real"),
            progress=progress,
            name=name,
            cache=st.store,
            spec=FeaturizerSpec.of(config, None if st.emb_store is None else st.emb_store.root),
        )
        for name in ("train", "val", "test", "real", "user")
    }
    if st.store is not None and st.emb_store is not None:
        st.store.save()
        st.emb_store.save_from(st.encoder)
        log.info("feature cache: %d hits, %d misses (%s)", st.store.hits, st.store.misses, st.store.dir)
    return fs


@dataclass
class _RealCV:
    """Out-of-fold scores of the real incidents: ranker scores, probabilities, TF-IDF's."""

    scores: np.ndarray
    proba: np.ndarray
    tfidf: np.ndarray


def _cross_validate_real(
    st: _Setup,
    fs: dict[str, FeatureSet],
    head: DenpexHead,
    config: TrainConfig,
    *,
    baselines: bool,
    progress: Progress,
    folds: list[tuple[np.ndarray, FeatureSet]] | None = None,
    fold_heads: list[tuple[np.ndarray, DenpexHead]] | None = None,
) -> _RealCV:
    """Real incidents, grouped k-fold by source thread; each fold's stage 1 starts from the
    final model's (``head``), unless the fold heads were fitted already (``folds`` and
    ``fold_heads``, see :func:`_fit_heads`)."""
    real, n = fs["real"], len(st.labels)
    cv = _RealCV(np.zeros((len(real), n)), np.zeros((len(real), n)), np.zeros((len(real), n)))
    if folds is None:
        folds = _real_folds(fs, config)
    tick = progress("cross-validating on real incidents", len(folds))
    heads = (
        fold_heads
        if fold_heads is not None
        else fit_fold_heads(folds, st.layout, st.entry_emb, config, st.affinity, init_from=head)
    )
    for (te, train_fs), (_, fold_head) in zip(folds, heads, strict=True):
        cv.scores[te] = fold_head.decision_function(real.X[te])
        cv.proba[te] = fold_head.predict_proba(real.X[te])
        if baselines:
            tf = fit_tfidf(train_fs, st.labels, config.real_weight)
            cv.tfidf[te] = tf.predict_proba([real.texts[i] for i in te])
        tick()
    return cv


def _real_folds(fs: dict[str, FeatureSet], config: TrainConfig) -> list[tuple[np.ndarray, FeatureSet]]:
    return list(real_folds(concat_features(fs["train"], fs["user"]), fs["real"], config.cv_folds))


def _base_start(st: _Setup, base: str | Path) -> dict[str, np.ndarray] | None:
    """The stage 1 of the model in ``base`` carried over to this training's labels and layout
    (a solver start: :func:`~denpex_ml.model.head.stage1_for_layout`)."""
    manifest, arrays = read_model_dir(base)
    layout = FeatureLayout.from_manifest(manifest["layout"])
    stage1 = {k[len("stage1_") :]: v for k, v in arrays.items() if k.startswith("stage1_")}
    return stage1_for_layout(stage1, list(manifest["labels"]), layout, st.labels, st.layout)


def _fit_heads(
    st: _Setup,
    fs: dict[str, FeatureSet],
    final_fs: FeatureSet,
    config: TrainConfig,
    start: dict[str, np.ndarray] | None,
    with_real: bool,
    progress: Progress,
) -> tuple[DenpexHead, list[tuple[np.ndarray, FeatureSet]] | None, list[tuple[np.ndarray, DenpexHead]] | None]:
    """The final head and, when a start is given and real incidents are cross-validated, the
    real folds and their heads fitted alongside it (else the folds are fitted later, each from
    the final head)."""
    if start is None or not with_real:
        return fit_head(final_fs, st.layout, st.entry_emb, config, st.affinity, init_from=start), None, None
    folds = _real_folds(fs, config)
    tick = progress("fitting the final head and the cross-validation folds", len(folds) + 1)
    head, fold_heads = fit_final_and_fold_heads(
        final_fs, folds, st.layout, st.entry_emb, config, st.affinity, start, tick=tick
    )
    return head, folds, fold_heads


def _calibrate_on_real(st: _Setup, head: DenpexHead, real: FeatureSet, cv: _RealCV, metrics: dict[str, float]) -> float:
    """Fit what only unseen real logs can tell: the temperature of hang answers (on the head)
    and the hang prior (returned); ``cv.proba`` becomes the calibrated, shifted out-of-fold
    probabilities the threshold and the real metrics are computed on."""
    t_hang = head.fit_hang_temperature(cv.scores, real.y)
    if t_hang is not None:
        cv.proba = head.calibrate(cv.scores)
        metrics["temperature_hang"] = t_hang
    real_hang = hang_rows(real.X, st.layout)
    hang_prior = choose_hang_prior(cv.proba, real.y, real_hang, st.labels)
    cv.proba = shift_for_hangs(cv.proba, real_hang, st.labels, hang_prior)
    metrics["hang_prior"] = hang_prior
    return hang_prior


def _head_proba(st: _Setup, head: DenpexHead, part: FeatureSet, hang_prior: float) -> np.ndarray:
    if not len(part):
        return np.zeros((0, len(st.labels)))
    return shift_for_hangs(head.predict_proba(part.X), hang_rows(part.X, st.layout), st.labels, hang_prior)


def _confidence_map(config: TrainConfig) -> tuple[tuple[float, float], dict[str, Any] | None]:
    """The answers' confidence recalibration, fitted on the test-then-train results in
    ``config.confidence_calibration`` of the batches this model trains on (a batch kept out to
    measure the model shapes nothing of it), the identity without them, and where it came from."""
    if config.confidence_calibration is None:
        return (1.0, 0.0), None
    reals = config.real_data if isinstance(config.real_data, tuple) else (config.real_data,)
    trained_on = {Path(f).name for p in reals if p is not None for f in expand_data_path(p)}
    fitted = fit_confidence_map(config.confidence_calibration, among=trained_on)
    if fitted is None:
        return (1.0, 0.0), None
    (a, b), info = fitted
    return (a, b), {"a": round(a, 6), "b": round(b, 6), "directory": config.confidence_calibration, **info}


def _abstain_threshold(
    st: _Setup, val: FeatureSet, val_p: np.ndarray, real_p: np.ndarray | None, real_y: np.ndarray
) -> float:
    """The abstention threshold on validation + out-of-fold real scores, weighed equally."""
    thr_p = np.concatenate([val_p, real_p]) if real_p is not None else val_p
    thr_y = np.concatenate([val.y, real_y]) if real_p is not None else val.y
    if not len(thr_y):
        return 0.0
    return choose_threshold(
        thr_p,
        thr_y,
        family_supported(thr_p, st.labels, DenpexModel.family_threshold),
        np.repeat([0, 1], [len(val_p), len(thr_y) - len(val_p)]),
    )


def _test_metrics(
    st: _Setup,
    test: FeatureSet,
    test_p: np.ndarray,
    final_fs: FeatureSet,
    config: TrainConfig,
    threshold: float,
    *,
    baselines: bool,
    metrics: dict[str, float],
    per_class: dict[str, list[dict[str, Any]]],
) -> None:
    """The synthetic test split: the model (all rows and the held-out variants) and the baselines."""
    held = np.asarray([e.held_out_variant for e in test.examples])
    for prefix, mask in (("synthetic_test", np.ones(len(test), bool)), ("synthetic_heldout", held)):
        if mask.any():
            m = classification_metrics(test_p[mask], test.y[mask], abstain_threshold=threshold)
            metrics.update({f"{prefix}/{k}": v for k, v in m.items()})
    if baselines:
        rule_p = RuleBaseline(st.matcher).predict_proba([a.bundle for a in test.analyses or []])
        metrics.update({f"synthetic_test/rule/{k}": v for k, v in classification_metrics(rule_p, test.y).items()})
        tf_p = fit_tfidf(final_fs, st.labels, config.real_weight).predict_proba(test.texts)
        metrics.update({f"synthetic_test/tfidf/{k}": v for k, v in classification_metrics(tf_p, test.y).items()})
        metrics.update(
            _initiator_metrics("synthetic_test", test.analyses or [], test.examples, test_p, st.labels, st.taxonomy)
        )
    per_class["synthetic_test"] = per_class_table(test_p, test.y, st.labels)


def _real_metrics(
    st: _Setup,
    real: FeatureSet,
    cv: _RealCV,
    threshold: float,
    *,
    baselines: bool,
    metrics: dict[str, float],
    per_class: dict[str, list[dict[str, Any]]],
    abstain: np.ndarray | None = None,
) -> None:
    """The real incidents out of fold (all, and those with a confident label), beside the
    baselines; ``abstain``, the out-of-taxonomy detector's out-of-fold verdicts where there is one."""
    confident = np.asarray([e.confident for e in real.examples])
    rule_p = RuleBaseline(st.matcher).predict_proba([a.bundle for a in real.analyses or []]) if baselines else None
    for prefix, mask in (("real", np.ones(len(real), bool)), ("real_confident", confident)):
        m = classification_metrics(
            cv.proba[mask],
            real.y[mask],
            abstain_threshold=threshold,
            abstain=None if abstain is None else abstain[mask],
        )
        metrics.update({f"{prefix}/{k}": v for k, v in m.items()})
        if rule_p is not None:
            for name, P in (("rule", rule_p), ("tfidf", cv.tfidf)):
                metrics.update(
                    {f"{prefix}/{name}/{k}": v for k, v in classification_metrics(P[mask], real.y[mask]).items()}
                )
    if baselines:
        metrics.update(_initiator_metrics("real", real.analyses or [], real.examples, cv.proba, st.labels, st.taxonomy))
    per_class["real"] = per_class_table(cv.proba, real.y, st.labels)


def train(
    config: TrainConfig,
    *,
    out: str | Path | None = None,
    progress: Progress = no_progress,
    evaluate_real: bool = True,
    baselines: bool = True,
    cache_dir: str | Path | None = None,
    start_from: str | Path | None = None,
) -> TrainResult:
    """Build data, featurise, evaluate honestly, fit the final model, save it to ``out``.

    ``baselines=False`` skips the rule and TF-IDF baselines and the first-failing-rank
    figures (they need every job re-analysed); with ``cache_dir`` features and template
    embeddings are read from and saved to an on-disk cache (what ``retrain`` uses).
    ``start_from``, a model directory (a retrain's base), starts every head's solver at that
    model's stage 1, so the final head and the cross-validation folds are fitted side by side.
    """
    t0 = time.perf_counter()
    st = _setup(config, cache_dir)
    start = _base_start(st, start_from) if start_from is not None else None
    fs = _featurise_all(st, config, baselines=baselines, progress=progress)
    metrics: dict[str, float] = {}
    per_class: dict[str, list[dict[str, Any]]] = {}
    real = fs["real"]
    with_real = evaluate_real and len(real) > 0

    # 1. the final model: synthetic train + all real + user incidents
    final_fs = concat_features(fs["train"], fs["user"], real)
    head, folds, fold_heads = _fit_heads(st, fs, final_fs, config, start, with_real, progress)
    # 2. real incidents out of fold; the hang temperature and hang prior fitted on them
    cv = (
        _cross_validate_real(
            st, fs, head, config, baselines=baselines, progress=progress, folds=folds, fold_heads=fold_heads
        )
        if with_real
        else None
    )
    hang_prior = _calibrate_on_real(st, head, real, cv, metrics) if cv is not None else 1.0
    val_p = _head_proba(st, head, fs["val"], hang_prior)
    test_p = _head_proba(st, head, fs["test"], hang_prior)
    # 3. abstention threshold on validation + out-of-fold real scores
    threshold = _abstain_threshold(st, fs["val"], val_p, cv.proba if cv is not None else None, real.y)
    # 4. the out-of-taxonomy detector, on the real incidents' out-of-fold scores
    kept = family_supported(cv.proba, st.labels, DenpexModel.family_threshold) if cv is not None else None
    outside, outside_oof = (
        fit_outside_detector(real.X, cv.proba, real.y, real.groups, st.layout, kept) if cv is not None else (None, None)
    )
    if outside is not None:
        metrics["outside_threshold"] = outside.threshold
    # 5. metrics (model and baselines on the same data)
    if len(fs["test"]):
        _test_metrics(
            st,
            fs["test"],
            test_p,
            final_fs,
            config,
            threshold,
            baselines=baselines,
            metrics=metrics,
            per_class=per_class,
        )
    if cv is not None:
        abstain = (
            None if outside is None or outside_oof is None else abstains(outside_oof, cv.proba, outside.threshold, kept)
        )
        _real_metrics(
            st, real, cv, threshold, baselines=baselines, metrics=metrics, per_class=per_class, abstain=abstain
        )
    metrics["abstain_threshold"] = threshold
    conf_map, conf_info = _confidence_map(config)

    model = DenpexModel(
        taxonomy=st.taxonomy,
        encoder=st.encoder,
        head=head,
        labels=st.labels,
        abstain_threshold=threshold,
        max_lines=config.max_lines,
        hang_prior=hang_prior,
        confidence_map=conf_map,
        outside=outside,
        manifest={
            "config": config.to_dict(),
            "confidence_calibration": conf_info,
            "training_data_hash": data_hash(final_fs.examples),
            "training_counts": {
                "synthetic": int(sum(e.kind == "synthetic" for e in final_fs.examples)),
                "real": int(sum(e.kind == "real" and e.label != UNKNOWN_ID for e in final_fs.examples)),
                "user": int(sum(e.kind == "user" for e in final_fs.examples)),
            },
            "metrics": {
                k: (None if isinstance(v, float) and np.isnan(v) else round(float(v), 6)) for k, v in metrics.items()
            },
        },
    )
    model_dir = model.save(out) if out is not None else None
    if model_dir is not None:
        (model_dir / "per_class.json").write_text(json.dumps(per_class, indent=1) + "\n", encoding="utf-8")
    return TrainResult(model, metrics, per_class, model_dir, time.perf_counter() - t0)
