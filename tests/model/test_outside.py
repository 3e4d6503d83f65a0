"""The learned out-of-taxonomy detector (:mod:`denpex_ml.model.outside`): what it reads, how it
is fitted and judged out of fold, and how a model carries it (``head.npz`` + manifest)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from denpex_ml.errors import ModelError
from denpex_ml.model.core import DenpexModel, load_model
from denpex_ml.model.head import FeatureLayout
from denpex_ml.model.outside import (
    MIN_UNKNOWN,
    OutsideDetector,
    choose_outside_threshold,
    fit_outside_detector,
    n_outside_features,
    outside_features,
)

LAYOUT = FeatureLayout(n_classes=4, n_structure=3, embed_dim=5, n_hang=1, fp_per_class=5)


def _data(n_known: int, n_unknown: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Base vectors, probabilities, labels (-1 = unknown) and groups: the known rows carry a
    root-cause fingerprint of their class and a sure head; the unknown ones neither, and their
    embedding leans one way."""
    rng = np.random.default_rng(seed)
    n = n_known + n_unknown
    y = np.r_[rng.integers(0, 4, n_known), -np.ones(n_unknown, dtype=int)]
    X = rng.normal(0, 0.3, (n, LAYOUT.width)).astype(np.float32)
    X[:, : LAYOUT.n_fingerprint] = 0
    P = np.full((n, 4), 0.1)
    for i, c in enumerate(y):
        if c >= 0:
            X[i, c * LAYOUT.fp_per_class] = 1.0  # role 0: root cause
            P[i, c] = 0.7
        else:
            X[i, -2 * LAYOUT.embed_dim] += 1.5
            P[i, rng.integers(0, 4)] = 0.4
    P /= P.sum(axis=1, keepdims=True)
    return X, P, y, np.arange(n) // 2  # two rows per source thread


def test_features_have_the_width_the_model_format_declares() -> None:
    X, P, _, _ = _data(10, 2)
    F = outside_features(X, P, LAYOUT)
    assert F.shape == (12, n_outside_features(LAYOUT))
    # the sorted top probability and the root-cause fingerprint of a known row are read
    assert F[0, 0] == pytest.approx(P[0].max())
    assert F[0, 8] == 1.0  # strongest root-cause hit over the entries


def test_the_detector_separates_failures_outside_the_taxonomy_out_of_fold() -> None:
    X, P, y, g = _data(200, 60)
    det, oof = fit_outside_detector(X, P, y, g, LAYOUT)
    assert det is not None and oof is not None
    fires = oof >= det.threshold
    assert (fires & (y == -1)).sum() >= 50  # recall out of fold
    assert (fires & (y == -1)).sum() / max(fires.sum(), 1) >= 0.9  # precision out of fold
    # the fitted detector agrees with its own verdicts on new rows of the same kinds
    X2, P2, y2, _ = _data(50, 20, seed=1)
    p = det.proba(X2, P2, LAYOUT)
    assert (p[y2 == -1] >= det.threshold).mean() >= 0.9 and (p[y2 >= 0] < det.threshold).mean() >= 0.9


def test_too_few_unknown_logs_give_no_detector() -> None:
    X, P, y, g = _data(200, MIN_UNKNOWN - 1)
    assert fit_outside_detector(X, P, y, g, LAYOUT) == (None, None)


def test_the_threshold_maximises_accuracy_with_abstention() -> None:
    P = np.array([[0.9, 0.1], [0.6, 0.4], [0.55, 0.45], [0.2, 0.8]])
    y = np.array([0, -1, -1, 1])
    p_out = np.array([0.1, 0.7, 0.45, 0.3])
    t = choose_outside_threshold(p_out, P, y)
    assert 0.3 < t <= 0.45  # catches both unknown rows, keeps both known ones answered


def _attach(model: DenpexModel) -> OutsideDetector:
    w = n_outside_features(model.head.layout)
    rng = np.random.default_rng(0)
    det = OutsideDetector(
        {
            "mean": rng.normal(size=w),
            "scale": np.abs(rng.normal(size=w)) + 0.5,
            "coef": rng.normal(size=(1, w)) * 0.01,
            "intercept": np.array([-0.5]),
            "classes": np.array([0, 1]),
        },
        threshold=0.625,
    )
    model.outside = det
    return det


def test_a_model_saves_and_loads_its_detector(tiny_model: DenpexModel, tmp_path: Path) -> None:
    det = _attach(tiny_model)
    out = tiny_model.save(tmp_path / "m")
    back = load_model(out)
    assert back.outside is not None and back.outside.threshold == det.threshold
    for k, v in det.arrays.items():
        np.testing.assert_array_equal(back.outside.arrays[k], v)
    text = "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    a = back.analyse(__import__("denpex_ml.logs", fromlist=["read_logs"]).read_logs(text=text))
    p = back.predict_proba([a])[0]
    assert back.outside_proba(a, p) == pytest.approx(tiny_model.outside_proba(a, p))


def test_an_incomplete_detector_is_refused(tiny_model: DenpexModel, tmp_path: Path) -> None:
    _attach(tiny_model)
    out = tiny_model.save(tmp_path / "m")
    with np.load(out / "head.npz") as npz:
        arrays = {k: npz[k] for k in npz.files if k != "outside_coef"}
    np.savez(out / "head.npz", **arrays)
    manifest = json.loads((out / "manifest.json").read_text())
    import hashlib

    manifest["files"]["head.npz"] = hashlib.sha256((out / "head.npz").read_bytes()).hexdigest()
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ModelError, match="outside_coef missing"):
        load_model(out)


def test_a_model_without_a_detector_loads_as_before(tiny_model_dir: Path, tmp_path: Path) -> None:
    shutil.copytree(tiny_model_dir, tmp_path / "m")
    m = load_model(tmp_path / "m")
    assert m.outside is None or isinstance(m.outside, OutsideDetector)


def test_applying_the_detector_is_scikit_learns_arithmetic_in_numpy() -> None:
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    from denpex_ml.model.head import _logreg_arrays, _logreg_proba

    rng = np.random.default_rng(0)
    F = rng.normal(size=(300, 9)) * rng.uniform(0.1, 10, size=9)
    y = (F[:, 0] / 3 + rng.normal(size=300) > 0).astype(int)
    scaler = StandardScaler().fit(F)
    clf = LogisticRegression().fit(scaler.transform(F), y)
    expected = clf.predict_proba(scaler.transform(F))[:, 1]
    np.testing.assert_allclose(_logreg_proba(_logreg_arrays(scaler, clf), F)[:, 1], expected, rtol=0, atol=1e-12)


def test_classifying_with_the_detector_imports_neither_scikit_learn_nor_scipy() -> None:
    import subprocess
    import sys

    code = (
        "import sys; from denpex_ml.model.core import load_model; m = load_model(); "
        "assert m.outside is not None; m.classify(text='torch.OutOfMemoryError: CUDA out of memory.\\n'); "
        "print(sorted({'sklearn', 'scipy'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
