"""training/fitting.py: jobs featurised and cross-validation folds fitted in worker processes give
the same arrays as in one process."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from denpex_ml.errors import InvalidInputError
from denpex_ml.model.head import FeatureLayout
from denpex_ml.training.config import TrainConfig
from denpex_ml.training.data import Example
from denpex_ml.training.fitting import (
    FeatureSet,
    concat_features,
    cv_jobs,
    fit_final_and_fold_heads,
    fit_fold_heads,
    fit_head,
    real_folds,
)

LAYOUT = FeatureLayout(n_classes=3, n_structure=2, embed_dim=4)
CFG = TrainConfig.from_dict({"head_folds": 3, "C": 0.5, "cv_folds": 3})


def _set(n: int, kind: str, seed: int) -> FeatureSet:
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 3
    X = rng.normal(0, 0.3, (n, LAYOUT.width)).astype(np.float32)
    for i, c in enumerate(y):
        X[i, 4 * c] = 0.9
        X[i, LAYOUT.n_fingerprint + LAYOUT.n_structure + c] = 1.0
    ex = [Example(f"{kind}-{i}", str(c), f"{kind}-thread-{i // 2}", kind, None, "") for i, c in enumerate(y)]
    return FeatureSet(ex, X, y.astype(np.int64), [""] * n)


def test_fold_heads_fitted_in_workers_equal_those_fitted_here() -> None:
    base, real = _set(60, "synthetic", 0), _set(30, "real", 1)
    folds = list(real_folds(base, real, 3))
    args = (LAYOUT, np.eye(3, 4, dtype=np.float32), CFG)
    here = list(fit_fold_heads(folds, *args, n_jobs=1))
    workers = list(fit_fold_heads(folds, *args, n_jobs=2))
    assert len(here) == len(workers) == 3
    for (te_a, a), (te_b, b) in zip(here, workers, strict=True):
        np.testing.assert_array_equal(te_a, te_b)
        np.testing.assert_allclose(a.predict_proba(real.X[te_a]), b.predict_proba(real.X[te_b]), rtol=1e-6, atol=1e-7)


def test_the_final_and_fold_heads_fitted_side_by_side_from_a_given_start() -> None:
    """A retrain's path: every head starts from the base's stage 1; the heads are the ones fitted
    one by one from that start, in this process or in workers."""
    base, real = _set(60, "synthetic", 0), _set(30, "real", 1)
    folds = list(real_folds(base, real, 3))
    final_fs = concat_features(base, real)
    args = (LAYOUT, np.eye(3, 4, dtype=np.float32), CFG)
    prior = fit_head(_set(45, "synthetic", 9), *args)
    start = prior.stage1_
    final_here, here = fit_final_and_fold_heads(final_fs, folds, *args, None, start, n_jobs=1)
    final_workers, workers = fit_final_and_fold_heads(final_fs, folds, *args, None, start, n_jobs=2)
    alone = fit_head(final_fs, *args, init_from=start)
    np.testing.assert_allclose(final_here.predict_proba(real.X), alone.predict_proba(real.X), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(final_workers.predict_proba(real.X), alone.predict_proba(real.X), rtol=1e-6, atol=1e-7)
    assert [te.tolist() for te, _ in here] == [te.tolist() for te, _ in folds]
    for (te, a), (_, b), (_, fold_fs) in zip(here, workers, folds, strict=True):
        one = fit_head(fold_fs, *args, init_from=start)
        np.testing.assert_allclose(a.predict_proba(real.X[te]), one.predict_proba(real.X[te]), rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(b.predict_proba(real.X[te]), one.predict_proba(real.X[te]), rtol=1e-6, atol=1e-7)
    assert isinstance(start, dict) and set(start) == {"mean", "scale", "coef", "intercept", "classes"}


def test_the_number_of_workers_is_capped_by_folds_and_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DENPEX_TRAIN_JOBS", raising=False)
    assert 1 <= cv_jobs(5) <= 5
    assert cv_jobs(1) == 1
    monkeypatch.setenv("DENPEX_TRAIN_JOBS", "1")
    assert cv_jobs(5) == 1
    monkeypatch.setenv("DENPEX_TRAIN_JOBS", "many")
    with pytest.raises(InvalidInputError, match="DENPEX_TRAIN_JOBS"):
        cv_jobs(5)


def test_jobs_featurised_in_workers_equal_those_featurised_here(monkeypatch: pytest.MonkeyPatch) -> None:
    from denpex_ml.dataset import load_incidents
    from denpex_ml.synthetic import generate
    from denpex_ml.training import fitting
    from denpex_ml.training.data import example_from_incident, example_from_synthetic

    # long synthetic jobs (many selected lines: the line-bank products where BLAS threads would
    # round differently) and short real excerpts
    examples = [example_from_synthetic(r) for r in generate(1, 3, include_unknown=False)[:36]]
    real = sorted(Path(__file__).resolve().parents[2].joinpath("data", "real").glob("collected-2026-12-*.jsonl"))
    examples += [example_from_incident(inc, "real") for inc in load_incidents(real[0])[:12]]
    spec = fitting.FeaturizerSpec.of(TrainConfig.from_dict({}))
    featurizer = spec.build()
    labels = {lab: i for i, lab in enumerate(featurizer.matcher.labels)}
    here = fitting.featurize(featurizer, examples, labels, keep=False, spec=spec, n_jobs=1)
    monkeypatch.setattr(fitting, "FEATURIZE_MIN_PARALLEL", 2)
    monkeypatch.setattr(fitting, "FEATURIZE_CHUNK", 5)
    fresh = spec.build()  # its encoder has embedded nothing yet
    workers = fitting.featurize(fresh, examples, labels, keep=False, spec=spec, n_jobs=2)
    np.testing.assert_array_equal(here.X, workers.X)
    assert here.texts == workers.texts and list(here.y) == list(workers.y)
    # the workers' template embeddings come back, to be saved with the cache
    assert {t for t, _ in featurizer.encoder.items()} <= {t for t, _ in fresh.encoder.items()}


def test_build_data_groups_cross_posted_threads_over_real_and_user_incidents(tmp_path: Path) -> None:
    """One paste held under two threads, and a user's incident repeating it from a third: one split
    group, so no fold puts the paste on one side and its twin on the other."""
    import json

    from denpex_ml.taxonomy import load_taxonomy
    from denpex_ml.training.data import build_data

    paste = "\n".join(f"[rank{n}]: torch.OutOfMemoryError: CUDA out of memory at step {n}" for n in range(6))

    def record(rid: str, thread: int, log: str = paste) -> str:
        return json.dumps(
            {"id": rid, "label": "cuda-oom", "log": log, "source": f"https://github.com/o/r/issues/{thread}"}
        )

    real = tmp_path / "real.jsonl"
    real.write_text(record("b", 2) + "\n" + record("a", 1) + "\n" + record("c", 3, paste + "\nanother run") + "\n")
    user = tmp_path / "user.jsonl"
    user.write_text(record("u", 9) + "\n")
    data = build_data(
        taxonomy=load_taxonomy(), seed=0, per_class=(1, 1, 1), real_data=str(real), extra_data=[str(user)]
    )
    group = {e.id: e.group for e in data["real"] + data["user"]}
    assert group["a"] == group["b"] == group["u"] == "github.com/o/r/1"
    assert group["c"] == "github.com/o/r/3"
