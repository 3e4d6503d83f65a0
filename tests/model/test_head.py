from __future__ import annotations

import numpy as np
import pytest

from denpex_ml.errors import InvalidInputError
from denpex_ml.hang.analysis import HANG_FEATURE_NAMES
from denpex_ml.model.head import DenpexHead, FeatureLayout, _logreg_arrays, stage1_for_layout

LAYOUT = FeatureLayout(n_classes=3, n_structure=2, embed_dim=4)


def data(n: int = 60, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 3
    X = rng.normal(0, 0.1, (n, LAYOUT.width)).astype(np.float32)
    for i, c in enumerate(y):
        X[i, 4 * c] = 0.9  # root-cause fingerprint of the true class
        X[i, LAYOUT.n_fingerprint + LAYOUT.n_structure + c] = 1.0  # embedding direction
    return X, y


def head() -> DenpexHead:
    return DenpexHead(layout=LAYOUT, entry_embeddings=np.eye(3, 4, dtype=np.float32), n_folds=3)


def test_fit_predict_and_probabilities() -> None:
    X, y = data()
    h = head().fit(X, y)
    P = h.predict_proba(X)
    assert P.shape == (60, 3)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=1e-6)
    assert (h.predict(X) == y).mean() > 0.95
    assert h.temperature_ > 0


def test_array_round_trip_gives_identical_predictions() -> None:
    X, y = data()
    h = head().fit(X, y)
    h2 = DenpexHead.from_arrays(h.to_arrays(), LAYOUT, C=h.C, n_folds=h.n_folds, k=h.k, random_state=0)
    np.testing.assert_allclose(h.predict_proba(X), h2.predict_proba(X), rtol=1e-5, atol=1e-6)


def test_deterministic_fit() -> None:
    X, y = data()
    np.testing.assert_array_equal(head().fit(X, y).predict_proba(X), head().fit(X, y).predict_proba(X))


def test_validation_names_the_parameter() -> None:
    X, y = data()
    with pytest.raises(InvalidInputError, match="C must be"):
        DenpexHead(layout=LAYOUT, entry_embeddings=np.eye(3, 4), C=-1).fit(X, y)
    with pytest.raises(InvalidInputError, match="columns"):
        head().fit(X[:, :5], y)
    with pytest.raises(InvalidInputError, match="entry_embeddings"):
        DenpexHead(layout=LAYOUT, entry_embeddings=np.eye(2, 4)).fit(X, y)


def test_hang_temperature_softens_only_rows_whose_best_class_is_a_hang_entry() -> None:
    nh = len(HANG_FEATURE_NAMES)
    LAY = FeatureLayout(n_classes=3, n_structure=nh, embed_dim=4, n_hang=nh)
    affinity = np.zeros((3, nh), dtype=np.float32)
    affinity[0, 0] = 1.0  # class 0 declares a hang signal
    h = DenpexHead(layout=LAY, entry_embeddings=np.eye(3, 4, dtype=np.float32), n_folds=3, hang_affinity=affinity)
    rng = np.random.default_rng(0)
    y = np.arange(60) % 3
    X = rng.normal(0, 0.1, (60, LAY.width)).astype(np.float32)
    for i, c in enumerate(y):
        X[i, 4 * c] = 0.9
    h.fit(X, y)
    assert h.temperature_hang_ is None  # not fitted by fit(): it needs held-out real scores
    # held-out scores: confident hang answers (class 0) that are right only half the time
    scores = np.tile([6.0, 0.0, 0.0], (40, 1))
    y_held = np.where(np.arange(40) % 2 == 0, 0, 1)
    t_hang = h.fit_hang_temperature(scores, y_held)
    assert t_hang is not None and t_hang > h.temperature_
    p = h.calibrate(np.asarray([[6.0, 0.0, 0.0], [0.0, 6.0, 0.0]]))
    assert p[0, 0] == pytest.approx(0.5, abs=0.05)  # hang answer: calibrated to its held-out accuracy
    assert p[1, 1] > 0.9  # a non-hang answer keeps the ordinary temperature
    h2 = DenpexHead.from_arrays(h.to_arrays(), LAY, C=h.C, n_folds=h.n_folds, k=h.k, random_state=0)
    assert h2.temperature_hang_ == pytest.approx(t_hang)
    assert h.fit_hang_temperature(scores[:5], y_held[:5]) is None  # too few rows to fit


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_stage1_inference_from_saved_arrays_is_scikit_learns_predict_proba(n_classes: int, dtype: type) -> None:
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    from denpex_ml.model.head import _logreg_arrays, _logreg_proba

    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 5)).astype(dtype)
    y = rng.integers(0, n_classes, size=80)
    scaler = StandardScaler().fit(X)
    clf = LogisticRegression(max_iter=500).fit(scaler.transform(X), y)
    arrays = _logreg_arrays(scaler, clf)
    P = _logreg_proba(arrays, X)
    # scikit-learn's own estimators rebuilt from the saved (float64) arrays
    sc2, clf2 = StandardScaler(), LogisticRegression()
    sc2.mean_, sc2.scale_ = arrays["mean"], arrays["scale"]
    sc2.var_, sc2.n_features_in_ = arrays["scale"] ** 2, X.shape[1]
    clf2.coef_, clf2.intercept_, clf2.classes_ = arrays["coef"], arrays["intercept"], arrays["classes"]
    clf2.n_features_in_ = X.shape[1]
    # the same arithmetic as scikit-learn's, so the same floats (at most a last-bit difference
    # should a scikit-learn release reorder its operations)
    np.testing.assert_allclose(P, clf2.predict_proba(sc2.transform(X)), rtol=1e-12, atol=1e-15)
    assert np.all((P >= 0) & (P <= 1))  # the two-class case is a sigmoid, not raw logits
    assert X.dtype == dtype  # the input is not scaled in place


def test_a_warm_start_reaches_the_same_stage1_in_fewer_iterations() -> None:
    # a convex problem: started at a related fit's solution (another scaler, other rows), the solver
    # ends where a cold start ends, up to its tolerance, in fewer iterations
    X, y = data(n=240, seed=3)
    rng = np.random.default_rng(4)
    X[:, :12] += rng.normal(0, 0.6, (len(X), 12)).astype(np.float32)  # make the classes overlap
    h = head()
    w = np.ones(len(X))
    full_scaler, full = h._fit_stage1(X, y, w)
    init = _logreg_arrays(full_scaler, full)
    part = np.arange(len(X)) % 5 != 0
    cold_sc, cold = h._fit_stage1(X[part], y[part], w[part])
    warm_sc, warm = h._fit_stage1(X[part], y[part], w[part], init)
    assert int(warm.n_iter_[0]) < int(cold.n_iter_[0])
    np.testing.assert_allclose(h._stage1_proba(X, warm_sc, warm), h._stage1_proba(X, cold_sc, cold), rtol=0, atol=2e-3)
    assert not warm.warm_start  # the estimator is left as a plain one


def test_a_fold_head_started_from_the_final_head_predicts_as_a_cold_one() -> None:
    X, y = data(n=120, seed=5)
    final = head().fit(X, y)
    part = np.arange(len(X)) % 4 != 0
    cold = head().fit(X[part], y[part])
    warm = head().fit(X[part], y[part], init_from=final)
    np.testing.assert_allclose(warm.predict_proba(X), cold.predict_proba(X), rtol=0, atol=5e-3)


def _scores(arrays: dict[str, np.ndarray], X: np.ndarray) -> np.ndarray:
    return ((X - arrays["mean"]) / arrays["scale"]) @ arrays["coef"].T + arrays["intercept"]


def test_a_base_stage1_carried_to_a_layout_with_a_new_class_starts_the_solver_at_its_solution() -> None:
    # a retrain's candidate: the base's classes a, b, c plus a new one sorted between them
    layout4 = FeatureLayout(n_classes=4, n_structure=2, embed_dim=4)
    rng = np.random.default_rng(11)
    y4 = np.arange(240) % 4
    X4 = rng.normal(0, 0.3, (240, layout4.width)).astype(np.float32)
    for i, c in enumerate(y4):
        X4[i, 4 * c] += 0.9
        X4[i, layout4.n_fingerprint + layout4.n_structure + c] += 1.0
    old = y4 != 1  # the base never saw class 1 ("new")
    keep_cols = [j for j in range(layout4.width) if not 4 <= j < 8]  # nor its fingerprint columns
    X3 = X4[old][:, keep_cols]
    y3 = np.searchsorted([0, 2, 3], y4[old])
    base = DenpexHead(layout=LAYOUT, entry_embeddings=np.eye(3, 4, dtype=np.float32), n_folds=3)
    sc, clf = base._fit_stage1(X3, y3, np.ones(len(X3)))
    arrays = _logreg_arrays(sc, clf)
    carried = stage1_for_layout(arrays, ["a", "c", "d"], LAYOUT, ["a", "new", "c", "d"], layout4)
    assert carried is not None
    np.testing.assert_array_equal(carried["classes"], [0, 2, 3])
    # the base's decision function, unchanged, on the rows it knows (the new columns weigh nothing)
    np.testing.assert_allclose(_scores(carried, X4[old]), _scores(arrays, X3), rtol=1e-10, atol=1e-10)
    cand = DenpexHead(layout=layout4, entry_embeddings=np.eye(4, 4, dtype=np.float32), n_folds=3)
    w = np.ones(len(X4))
    cold_sc, cold = cand._fit_stage1(X4, y4, w)
    warm_sc, warm = cand._fit_stage1(X4, y4, w, carried)
    assert int(warm.n_iter_[0]) < int(cold.n_iter_[0])
    np.testing.assert_allclose(
        cand._stage1_proba(X4, warm_sc, warm), cand._stage1_proba(X4, cold_sc, cold), rtol=0, atol=2e-3
    )


def test_a_stage1_does_not_carry_over_to_another_encoder_or_feature_set() -> None:
    X, y = data()
    sc, clf = head()._fit_stage1(X, y, np.ones(len(X)))
    arrays = _logreg_arrays(sc, clf)
    labels = ["a", "b", "c"]
    assert stage1_for_layout(arrays, labels, LAYOUT, labels, FeatureLayout(3, 2, 8)) is None
    assert stage1_for_layout(arrays, labels, LAYOUT, labels, FeatureLayout(3, 3, 4)) is None
    assert stage1_for_layout(arrays, labels, LAYOUT, ["x", "y", "z"], LAYOUT) is None  # no class in common
    same = stage1_for_layout(arrays, labels, LAYOUT, labels, LAYOUT)
    assert same is not None
    np.testing.assert_allclose(_scores(same, X), _scores(arrays, X))
