from __future__ import annotations

import numpy as np

from denpex_ml.model.alternatives import FOREIGN_FLOOR, alternatives_order

LABELS = [
    "host-work-timeout",
    "segfault-native-crash",
    "subset-rank-collective-hang",
    "cuda-oom",
    "collective-mismatch",
    "nccl-network-error",
]
P = np.array([0.62, 0.12, 0.08, 0.07, 0.06, 0.05])


def names(order: np.ndarray) -> list[str]:
    return [LABELS[int(i)] for i in order]


def test_without_a_hang_the_order_is_by_probability() -> None:
    assert all(np.diff(P) < 0)  # P lists LABELS in descending probability
    assert names(alternatives_order(P, LABELS, False)) == LABELS


def test_in_a_hang_the_competing_hang_and_transport_classes_come_before_unlikely_crashes() -> None:
    got = names(alternatives_order(P, LABELS, True))
    assert got[0] == "host-work-timeout"  # the answer never moves
    assert got[1:4] == ["subset-rank-collective-hang", "collective-mismatch", "nccl-network-error"]
    assert got[4:] == ["segfault-native-crash", "cuda-oom"]


def test_a_likely_crash_keeps_its_place_in_a_hang() -> None:
    p = P.copy()
    p[1] = FOREIGN_FLOOR + 0.01
    assert names(alternatives_order(p, LABELS, True))[1] == "segfault-native-crash"


def test_rows_are_ordered_each_by_its_own_hang_flag() -> None:
    rows = alternatives_order(np.stack([P, P]), LABELS, np.array([False, True]))
    assert rows.shape == (2, len(LABELS))
    assert names(rows[0])[1] == "segfault-native-crash"
    assert names(rows[1])[1] == "subset-rank-collective-hang"
