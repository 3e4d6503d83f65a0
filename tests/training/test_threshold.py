"""The abstention threshold is chosen with the decision's family rule in view."""

from __future__ import annotations

import numpy as np

from denpex_ml.model.core import DenpexModel, family_supported, shift_for_hangs
from denpex_ml.training.trainer import choose_hang_prior, choose_threshold


def test_family_rule_rows_do_not_pull_the_threshold_down() -> None:
    labels = ["collective-mismatch", "subset-rank-collective-hang", "host-work-timeout", "cuda-oom"]
    # 6 hang logs: right, but their mass is spread over the hang classes (best p = 0.35)
    hang = np.tile([0.35, 0.33, 0.30, 0.02], (6, 1))
    # 4 out-of-taxonomy logs with a weak crash guess, 4 confident right crash answers
    oot = np.tile([0.10, 0.10, 0.10, 0.70], (4, 1))
    crash = np.tile([0.01, 0.01, 0.01, 0.97], (4, 1))
    proba = np.vstack([hang, oot, crash])
    y = np.asarray([0] * 6 + [-1] * 4 + [3] * 4)
    kept = family_supported(proba, labels, DenpexModel.family_threshold)
    assert kept[:6].all() and not kept[6:].any()
    blind = choose_threshold(proba, y)
    aware = choose_threshold(proba, y, kept)
    # without the family rule the threshold must stay under 0.35 to keep the hang answers,
    # and so cannot abstain on the weak guesses; with it, it abstains on them
    assert blind <= 0.35
    assert aware > float(oot.max(axis=1).max())


def test_each_source_weighs_equally_so_a_large_synthetic_set_cannot_set_the_rule_alone() -> None:
    # synthetic validation: 90 rows where abstaining below 0.6 pays (many weak out-of-taxonomy rows)
    syn_oot = np.tile([0.55, 0.45], (45, 1))
    syn_ok = np.tile([0.95, 0.05], (45, 1))
    # real logs: 10 rows right at p = 0.55 that a threshold of 0.6 would throw away
    real_ok = np.tile([0.55, 0.45], (10, 1))
    proba = np.vstack([syn_oot, syn_ok, real_ok])
    y = np.asarray([-1] * 45 + [0] * 45 + [0] * 10)
    sources = np.asarray([0] * 90 + [1] * 10)
    pooled = choose_threshold(proba, y)
    balanced = choose_threshold(proba, y, sources=sources)
    assert pooled > 0.55  # the synthetic rows decide alone
    assert balanced <= 0.55  # the real rows count as much as the synthetic ones


def test_the_hang_prior_is_fitted_where_the_head_underrates_hangs() -> None:
    labels = ["subset-rank-collective-hang", "host-work-timeout", "nccl-network-error", "no-failure"]
    # 12 real hang logs the head, trained mostly on generated text, calls transport or healthy
    proba = np.tile([0.25, 0.10, 0.40, 0.25], (12, 1))
    y = np.zeros(12, dtype=int)
    prior = choose_hang_prior(proba, y, np.ones(12, dtype=bool), labels)
    assert prior > 2.0
    shifted = shift_for_hangs(proba, np.ones(12, dtype=bool), labels, prior)
    assert (shifted.argmax(axis=1) == 0).all() and (shifted[:, 3] == 0).all()
    assert np.allclose(shifted.sum(axis=1), 1.0)


def test_no_shift_where_the_head_is_already_right_or_the_rows_are_few() -> None:
    labels = ["subset-rank-collective-hang", "host-work-timeout", "nccl-network-error", "no-failure"]
    # hang-looking logs that were in truth transport failures: shifting would only hurt
    proba = np.tile([0.20, 0.05, 0.70, 0.05], (12, 1))
    y = np.full(12, 2)
    assert choose_hang_prior(proba, y, np.ones(12, dtype=bool), labels) == 1.0
    few = np.tile([0.25, 0.10, 0.40, 0.25], (5, 1))
    assert choose_hang_prior(few, np.zeros(5, dtype=int), np.ones(5, dtype=bool), labels) == 1.0
    # rows without a hang are never touched
    assert np.array_equal(shift_for_hangs(few, np.zeros(5, dtype=bool), labels, 4.0), few)
