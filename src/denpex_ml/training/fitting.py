"""Feature sets and the heads fitted on them: featurising labelled jobs (through the on-disk
cache, in worker processes when there are many), and fitting a head - the final one, or one per
grouped cross-validation fold, the folds in worker processes.

Everything here gives the same arrays whatever the number of workers: each job is featurised
alone and each head fitted alone, with BLAS on one thread. ``DENPEX_TRAIN_JOBS`` caps the
workers (1: none). :mod:`~denpex_ml.training.trainer` (train, evaluate, save) and
:mod:`~denpex_ml.evaluation.run` use it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.model_selection import GroupKFold
from threadpoolctl import threadpool_limits

from denpex_ml.baselines import TfidfBaseline, bundle_text
from denpex_ml.embedding import CachedEncoder, make_encoder
from denpex_ml.errors import InvalidInputError
from denpex_ml.features.fingerprints import FingerprintMatcher
from denpex_ml.model.featurize import Featurizer, JobAnalysis
from denpex_ml.model.head import DenpexHead, FeatureLayout
from denpex_ml.model.persistence import models_root
from denpex_ml.taxonomy import load_taxonomy
from denpex_ml.training.cache import EmbeddingStore, FeatureStore, example_key
from denpex_ml.training.config import TrainConfig
from denpex_ml.training.data import Example, incident_bundle
from denpex_ml.training.progress import Progress, no_progress

__all__ = [
    "FEATURIZE_CHUNK",
    "FEATURIZE_MIN_PARALLEL",
    "FeatureSet",
    "FeaturizerSpec",
    "concat_features",
    "cv_jobs",
    "featurize",
    "fit_final_and_fold_heads",
    "fit_fold_heads",
    "fit_head",
    "fit_tfidf",
    "real_folds",
    "sample_weights",
]


@dataclass
class FeatureSet:
    """Featurised examples: base vectors, class indices (-1 = unknown), groups, kinds."""

    examples: list[Example]
    X: np.ndarray
    y: np.ndarray
    texts: list[str]
    analyses: list[JobAnalysis] | None = None

    def subset(self, mask: np.ndarray) -> FeatureSet:
        idx = np.flatnonzero(mask)
        return FeatureSet(
            [self.examples[i] for i in idx],
            self.X[idx],
            self.y[idx],
            [self.texts[i] for i in idx],
            None if self.analyses is None else [self.analyses[i] for i in idx],
        )

    @property
    def groups(self) -> np.ndarray:
        return np.asarray([e.group for e in self.examples])

    def __len__(self) -> int:
        return len(self.examples)


@dataclass(frozen=True)
class FeaturizerSpec:
    """What a worker process needs to build the same :class:`Featurizer` as the trainer's (the
    featurizer itself holds compiled RE2 sets, which do not pickle)."""

    taxonomy_dirs: tuple[str, ...]
    encoder: str
    max_lines: int
    cache_dir: str | None = None  #: the on-disk cache whose template embeddings a worker reads

    @classmethod
    def of(cls, config: TrainConfig, cache_dir: str | Path | None = None) -> FeaturizerSpec:
        return cls(
            tuple(str(d) for d in config.taxonomy_dirs),
            config.encoder,
            config.max_lines,
            None if cache_dir is None else str(cache_dir),
        )

    def build(self) -> Featurizer:
        taxonomy = load_taxonomy(list(self.taxonomy_dirs))
        encoder = CachedEncoder(make_encoder(self.encoder, models_root()))
        if self.cache_dir is not None:
            EmbeddingStore(Path(self.cache_dir), encoder.name).load_into(encoder)
        return Featurizer(FingerprintMatcher(taxonomy), encoder, max_lines=self.max_lines, taxonomy=taxonomy)


_WORKER_FEATURIZERS: dict[FeaturizerSpec, Featurizer] = {}

#: jobs per task sent to a featurising worker, and the fewest jobs worth starting workers for
FEATURIZE_CHUNK = 64
FEATURIZE_MIN_PARALLEL = 256


def _featurise_chunk(
    spec: FeaturizerSpec, sources: list[Any]
) -> tuple[list[tuple[np.ndarray, str]], list[tuple[str, np.ndarray]]]:
    """In a worker: base vectors and texts of ``sources`` (the worker's featurizer is built
    once), and the template embeddings it computed for them (for the caller's on-disk cache)."""
    featurizer = _WORKER_FEATURIZERS.get(spec)
    if featurizer is None:
        featurizer = _WORKER_FEATURIZERS[spec] = spec.build()
    encoder = featurizer.encoder
    if isinstance(encoder, CachedEncoder):
        encoder.take_new()  # what the line bank and earlier chunks embedded is not this chunk's
    out = []
    with threadpool_limits(limits=1, user_api="blas"):  # as featurize does here: same arithmetic
        for source in sources:
            a = featurizer.analyse(incident_bundle(source))
            out.append((featurizer.base_vector(a), bundle_text(a.bundle)))
    return out, (encoder.take_new() if isinstance(encoder, CachedEncoder) else [])


def featurize(
    featurizer: Featurizer,
    examples: Sequence[Example],
    labels: dict[str, int],
    *,
    keep: bool,
    progress: Progress = no_progress,
    name: str = "",
    cache: FeatureStore | None = None,
    spec: FeaturizerSpec | None = None,
    n_jobs: int | None = None,
) -> FeatureSet:
    """Ingest and featurise examples (keeping analyses only when ``keep``).

    With a ``cache`` (and ``keep`` False) examples featurised before are read from it. With a
    ``spec`` (how to build this featurizer) and more than one job (:func:`cv_jobs`), the
    examples to featurise are shared among worker processes when there are at least
    :data:`FEATURIZE_MIN_PARALLEL` of them and ``keep`` is False. Each job is featurised alone,
    with BLAS on one thread, so the vectors are the same to the last bit either way."""
    rows: list[np.ndarray | None] = [None] * len(examples)
    texts: list[str] = [""] * len(examples)
    analyses = []
    tick = progress(f"featurising {name}", len(examples))
    keys = [example_key(ex.source) if cache is not None else "" for ex in examples]
    todo: list[int] = []
    for i in range(len(examples)):
        hit = cache.get(keys[i]) if cache is not None and not keep else None
        if hit is not None:
            rows[i], texts[i] = hit
            tick()
        else:
            todo.append(i)
    jobs = 1 if keep or spec is None or len(todo) < FEATURIZE_MIN_PARALLEL else (n_jobs or cv_jobs(len(todo)))
    if jobs > 1 and spec is not None:
        from joblib import Parallel, delayed

        chunks = [todo[j : j + FEATURIZE_CHUNK] for j in range(0, len(todo), FEATURIZE_CHUNK)]
        done = Parallel(n_jobs=jobs, backend="loky", return_as="generator")(
            delayed(_featurise_chunk)(spec, [examples[i].source for i in chunk]) for chunk in chunks
        )
        for chunk, (results, embedded) in zip(chunks, done, strict=True):
            if isinstance(featurizer.encoder, CachedEncoder):
                featurizer.encoder.preload(embedded)  # saved with the cache like its own
            for i, (row, text) in zip(chunk, results, strict=True):
                rows[i], texts[i] = row, text
                if cache is not None:
                    cache.put(keys[i], row, text)
                tick()
    else:
        # BLAS on one thread, as in the workers: the line-bank similarities then come out the same
        # to the last bit whoever computes them (two threads round differently)
        with threadpool_limits(limits=1, user_api="blas"):
            for i in todo:
                a = featurizer.analyse(incident_bundle(examples[i].source))
                row, text = featurizer.base_vector(a), bundle_text(a.bundle)
                rows[i], texts[i] = row, text
                if cache is not None:
                    cache.put(keys[i], row, text)
                if keep:
                    analyses.append(a)
                tick()
    width = featurizer.n_base_features
    X = np.stack([r for r in rows if r is not None]) if rows else np.zeros((0, width), dtype=np.float32)
    y = np.asarray([labels.get(e.label, -1) for e in examples], dtype=np.int64)
    return FeatureSet(list(examples), X, y, texts, analyses if keep else None)


def sample_weights(fs: FeatureSet, real_weight: float) -> tuple[np.ndarray, np.ndarray]:
    """Stage-1 weights (real/user incidents x real_weight) and ranker weights (all real
    together weigh as much as all synthetic together)."""
    real = np.asarray([e.kind != "synthetic" for e in fs.examples])
    w = np.where(real, real_weight, 1.0)
    rw = w.copy()
    if real.any() and (~real).any():
        rw[~real] *= w[real].sum() / w[~real].sum()
    return w, rw


@dataclass
class _HeadData:
    """What a head is fitted on: the known-label rows of a feature set with their weights and
    groups (arrays only, so a fold travels to a worker process without the logs' text)."""

    X: np.ndarray
    y: np.ndarray
    w: np.ndarray
    rw: np.ndarray
    groups: np.ndarray

    @classmethod
    def of(cls, fs: FeatureSet, real_weight: float) -> _HeadData:
        train = fs.subset(fs.y >= 0)
        w, rw = sample_weights(train, real_weight)
        return cls(train.X, train.y, w, rw, train.groups)


def _fit_head_on(
    data: _HeadData,
    layout: FeatureLayout,
    entry_emb: np.ndarray,
    cfg: TrainConfig,
    affinity: np.ndarray | None,
    pair_features: tuple[str, ...] | None,
    init_from: DenpexHead | dict[str, np.ndarray] | None,
) -> DenpexHead:
    """One head, its BLAS on one thread: the matrices are small enough that a second thread costs
    more than it brings, and one thread makes the solver's arithmetic - hence the head - the same
    here and in any worker process."""
    head = DenpexHead(
        layout=layout,
        entry_embeddings=entry_emb,
        C=cfg.C,
        n_folds=cfg.head_folds,
        k=cfg.k,
        random_state=cfg.seed,
        hang_affinity=affinity,
        pair_features=pair_features,
    )
    with threadpool_limits(limits=1, user_api="blas"):
        return head.fit(
            data.X, data.y, sample_weight=data.w, groups=data.groups, ranker_weight=data.rw, init_from=init_from
        )


def fit_head(
    fs: FeatureSet,
    layout: FeatureLayout,
    entry_emb: np.ndarray,
    cfg: TrainConfig,
    affinity: np.ndarray | None = None,
    pair_features: tuple[str, ...] | None = None,
    init_from: DenpexHead | dict[str, np.ndarray] | None = None,
) -> DenpexHead:
    """A :class:`DenpexHead` fitted on the known-label examples of ``fs`` with the config's
    hyper-parameters and weights (what training, cross-validation and evaluation's ablation
    share; ``pair_features`` restricts the ranker's features for the ablation)."""
    return _fit_head_on(_HeadData.of(fs, cfg.real_weight), layout, entry_emb, cfg, affinity, pair_features, init_from)


def cv_jobs(n_folds: int) -> int:
    """Worker processes for fitting cross-validation folds: one per CPU this process may use,
    at most one per fold; ``DENPEX_TRAIN_JOBS`` caps it (1: in this process, no workers)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    cap = os.environ.get("DENPEX_TRAIN_JOBS", "").strip()
    if cap:
        try:
            cpus = min(cpus, max(1, int(cap)))
        except ValueError:
            raise InvalidInputError(f"DENPEX_TRAIN_JOBS must be a positive integer, got {cap!r}") from None
    return max(1, min(cpus, n_folds))


def _heads_fitted(
    data: Sequence[_HeadData],
    layout: FeatureLayout,
    entry_emb: np.ndarray,
    cfg: TrainConfig,
    affinity: np.ndarray | None,
    pair_features: tuple[str, ...] | None,
    init_from: DenpexHead | dict[str, np.ndarray] | None,
    jobs: int,
) -> Iterator[DenpexHead]:
    """A head per ``data``, in order: with more than one job fitted in worker processes (joblib's
    loky), otherwise here, one after another."""
    if jobs == 1:
        for d in data:
            yield _fit_head_on(d, layout, entry_emb, cfg, affinity, pair_features, init_from)
        return
    from joblib import Parallel, delayed

    yield from Parallel(n_jobs=jobs, backend="loky", return_as="generator")(
        delayed(_fit_head_on)(d, layout, entry_emb, cfg, affinity, pair_features, init_from) for d in data
    )


def fit_fold_heads(
    folds: Sequence[tuple[np.ndarray, FeatureSet]],
    layout: FeatureLayout,
    entry_emb: np.ndarray,
    cfg: TrainConfig,
    affinity: np.ndarray | None = None,
    pair_features: tuple[str, ...] | None = None,
    init_from: DenpexHead | dict[str, np.ndarray] | None = None,
    n_jobs: int | None = None,
) -> Iterator[tuple[np.ndarray, DenpexHead]]:
    """``(held-out indices, head)`` per fold of :func:`real_folds`, in fold order. The folds are
    independent: with more than one job they are fitted in worker processes (joblib's loky),
    otherwise here, one after another. Each fit is deterministic and runs its BLAS on one thread,
    so the heads do not depend on ``n_jobs``."""
    jobs = cv_jobs(len(folds)) if n_jobs is None else max(1, min(n_jobs, len(folds)))
    data = [_HeadData.of(fs, cfg.real_weight) for _, fs in folds]
    heads = _heads_fitted(data, layout, entry_emb, cfg, affinity, pair_features, init_from, jobs)
    for (te, _), head in zip(folds, heads, strict=True):
        yield te, head


def fit_final_and_fold_heads(
    final_fs: FeatureSet,
    folds: Sequence[tuple[np.ndarray, FeatureSet]],
    layout: FeatureLayout,
    entry_emb: np.ndarray,
    cfg: TrainConfig,
    affinity: np.ndarray | None,
    init_from: dict[str, np.ndarray],
    n_jobs: int | None = None,
    tick: Callable[[], None] | None = None,
) -> tuple[DenpexHead, list[tuple[np.ndarray, DenpexHead]]]:
    """The final head (on ``final_fs``) and the fold heads of :func:`fit_fold_heads`, fitted
    together when every one starts from the same given stage 1 (a retrain's base model,
    :func:`~denpex_ml.model.head.stage1_for_layout`): no fold waits for the final head, so both
    CPUs stay busy until the last fit. ``tick`` is called as each head is done. Each fit is
    deterministic and on one BLAS thread: the heads do not depend on ``n_jobs``."""
    n = len(folds) + 1
    jobs = cv_jobs(n) if n_jobs is None else max(1, min(n_jobs, n))
    data = [_HeadData.of(final_fs, cfg.real_weight)] + [_HeadData.of(fs, cfg.real_weight) for _, fs in folds]
    heads: list[DenpexHead] = []
    for head in _heads_fitted(data, layout, entry_emb, cfg, affinity, None, init_from, jobs):
        heads.append(head)
        if tick is not None:
            tick()
    return heads[0], [(te, h) for (te, _), h in zip(folds, heads[1:], strict=True)]


def fit_tfidf(fs: FeatureSet, labels: list[str], real_weight: float) -> TfidfBaseline:
    """The TF-IDF + logistic regression baseline fitted on the known-label examples of ``fs``
    with the head's sample weights (training and evaluation compare the model with it)."""
    known = fs.y >= 0
    w, _ = sample_weights(fs.subset(known), real_weight)
    return TfidfBaseline(labels).fit([fs.texts[i] for i in np.flatnonzero(known)], fs.y[known], w)


def real_folds(base: FeatureSet, real: FeatureSet, k: int) -> Iterator[tuple[np.ndarray, FeatureSet]]:
    """Grouped k-fold over real incidents (a source thread is never on both sides): per fold,
    the held-out indices of ``real`` and the fold's training set (``base`` + the other folds).
    Training and evaluation both score real incidents out of fold with it."""
    folds = min(k, len(set(real.groups)))
    if folds < 2:
        return
    for tr, te in GroupKFold(folds).split(real.X, real.y, real.groups):
        yield te, concat_features(base, real.subset(np.isin(np.arange(len(real)), tr)))


def concat_features(*sets: FeatureSet) -> FeatureSet:
    """One feature set of the examples of ``sets`` in order (empty sets skipped)."""
    sets = tuple(s for s in sets if len(s))
    return FeatureSet(
        [e for s in sets for e in s.examples],
        np.concatenate([s.X for s in sets]),
        np.concatenate([s.y for s in sets]),
        [t for s in sets for t in s.texts],
    )
