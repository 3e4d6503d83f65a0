"""Train/test splits grouped by source, so no thread or synthetic seed is on both sides.

Logs from one GitHub thread (several users pasting the same crash) or from one synthetic
recipe and seed are near-duplicates: a split that puts some in training and others in
test measures memory, not diagnosis. Every split here is grouped by
:attr:`Incident.source_group <denpex_ml.dataset.incident.Incident.source_group>` and
checked with :func:`check_grouped_split` before it is returned.

scikit-learn is imported inside the functions that use it.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt

from denpex_ml.dataset.incident import Incident
from denpex_ml.errors import DatasetError

__all__ = [
    "CROSS_POST_MIN_LINES",
    "check_grouped_split",
    "check_new_threads",
    "group_kfold",
    "paste_key",
    "source_groups",
    "train_test_split_grouped",
]

IndexArray = npt.NDArray[np.intp]


def source_groups(incidents: Sequence[Incident]) -> list[str]:
    """The split group of each incident: its
    :attr:`~denpex_ml.dataset.incident.Incident.source_group` (its thread), except that threads
    holding one paste word for word (a cross-post: :func:`paste_key`) are one group, named after
    the first of them in sort order. A paste is one incident however many trackers it was posted
    to; splitting it would put its twin on the other side of every fold."""
    groups = [incident.source_group for incident in incidents]
    root = {group: group for group in groups}

    def find(group: str) -> str:
        while root[group] != group:
            root[group] = root[root[group]]
            group = root[group]
        return group

    first: dict[str, str] = {}
    for incident, group in zip(incidents, groups, strict=True):
        key = paste_key(incident)
        if key is None:
            continue
        a, b = find(group), find(first.setdefault(key, group))
        if a != b:  # the smaller name stays the root, so a group is named after its first thread
            root[max(a, b)] = min(a, b)
    return [find(group) for group in groups]


def check_grouped_split(
    incidents: Sequence[Incident],
    train_idx: Iterable[int] | IndexArray,
    test_idx: Iterable[int] | IndexArray,
    groups: Sequence[str] | None = None,
) -> None:
    """Raise :class:`DatasetError` if a source group (:func:`source_groups`, or ``groups`` when
    given: one per incident) has incidents on both sides.

    Also rejects an index on both sides. Use it as a guard wherever a split made
    elsewhere is about to be trusted.
    """
    train = [int(i) for i in train_idx]
    test = [int(i) for i in test_idx]
    both_idx = set(train) & set(test)
    if both_idx:
        raise DatasetError(f"split: index {min(both_idx)} is in both train and test")
    group_of = source_groups(incidents) if groups is None else groups
    train_groups = {group_of[i] for i in train}
    leaked = sorted(train_groups.intersection(group_of[i] for i in test))
    if leaked:
        shown = ", ".join(repr(g) for g in leaked[:5])
        raise DatasetError(f"split: {len(leaked)} source group(s) on both sides: {shown}")


#: A log of at least this many non-blank lines that another thread holds word for word is one
#: paste posted twice (a user cross-posting to a dependency's tracker, a pull request reopened
#: under a new number), not a second incident; shorter logs (one error line) legitimately repeat.
CROSS_POST_MIN_LINES = 5


def paste_key(incident: Incident) -> str | None:
    """A digest of ``incident``'s log text with whitespace runs collapsed and blank lines dropped,
    or ``None`` when it has fewer than :data:`CROSS_POST_MIN_LINES` lines (see
    :func:`check_new_threads`)."""
    texts = [incident.log] if incident.log is not None else [text for _, text in sorted((incident.logs or {}).items())]
    lines = [" ".join(line.split()) for text in texts for line in text.splitlines() if line.strip()]
    if len(lines) < CROSS_POST_MIN_LINES:
        return None
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()


def check_new_threads(new: Sequence[Incident], held: Sequence[Incident]) -> None:
    """Raise :class:`DatasetError` if an incident of ``new`` repeats what ``held`` already has: a
    batch scored as unseen must not repeat a thread the model may have trained on. Two ways:

    * its source group (a thread) is held: the address does not have to match — ``issues/N`` and
      ``pull/N`` of one repository, a comment anchor or another case are one thread
      (:func:`~denpex_ml.dataset.incident.source_group`);
    * its log is a held log of another thread word for word (at least
      :data:`CROSS_POST_MIN_LINES` lines, whitespace aside): one paste posted in two threads."""
    first = {incident.source_group: incident.id for incident in held}
    again = [(incident.id, first[incident.source_group]) for incident in new if incident.source_group in first]
    pasted: dict[str, str] = {}
    for incident in held:
        key = paste_key(incident)
        if key is not None:
            pasted.setdefault(key, incident.id)
    copied = [
        (incident.id, pasted[key])
        for incident in new
        if incident.source_group not in first and (key := paste_key(incident)) is not None and key in pasted
    ]
    problems = []
    if again:
        shown = ", ".join(f"{a!r} (held as {b!r})" for a, b in again[:5])
        problems.append(f"{len(again)} incident(s) from threads already held: {shown}")
    if copied:
        shown = ", ".join(f"{a!r} (the log of {b!r})" for a, b in copied[:5])
        problems.append(f"{len(copied)} incident(s) whose log another thread holds word for word: {shown}")
    if problems:
        raise DatasetError("; ".join(problems))


def _check_k(k: int, n_groups: int, name: str = "k") -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 2:
        raise DatasetError(f"{name}: expected an integer >= 2, found {k!r}")
    if k > n_groups:
        raise DatasetError(f"{name}: {k} folds need at least {k} source groups, found {n_groups}")


def _folds(
    incidents: Sequence[Incident], groups: Sequence[str], k: int, seed: int, stratify: bool
) -> list[tuple[IndexArray, IndexArray]]:
    from sklearn.model_selection import StratifiedGroupKFold

    # Without stratification every incident gets one class, which leaves scikit-learn's
    # shuffled, size-balancing group assignment (GroupKFold shuffles only from 1.6 on).
    labels = [incident.label if stratify else "" for incident in incidents]
    x = np.zeros((len(incidents), 1))
    splitter = StratifiedGroupKFold(n_splits=k, shuffle=True, random_state=seed)
    with warnings.catch_warnings():
        # Rare labels (fewer members than folds) are normal here; stratification is best effort.
        warnings.filterwarnings("ignore", message="The least populated class", category=UserWarning)
        folds = [
            (np.asarray(train, dtype=np.intp), np.asarray(test, dtype=np.intp))
            for train, test in splitter.split(x, labels, groups)
        ]
    for train, test in folds:
        check_grouped_split(incidents, train, test, groups)
    return folds


def group_kfold(
    incidents: Sequence[Incident],
    k: int = 5,
    seed: int = 0,
    *,
    stratify: bool = True,
) -> list[tuple[IndexArray, IndexArray]]:
    """``k`` folds of ``(train_idx, test_idx)`` with every source group in one test fold.

    Parameters
    ----------
    incidents:
        The dataset; indices refer to this sequence.
    k:
        Number of folds, 2 <= k <= number of source groups.
    seed:
        Shuffles the groups; the same inputs and seed give the same folds.
    stratify:
        Balance labels across folds as far as groups allow (scikit-learn's
        ``StratifiedGroupKFold``); ``False`` balances fold sizes only.

    Raises
    ------
    DatasetError
        ``k`` is out of range.
    """
    groups = source_groups(incidents)
    _check_k(k, len(set(groups)))
    return _folds(incidents, groups, k, seed, stratify)


def train_test_split_grouped(
    incidents: Sequence[Incident],
    test_size: float = 0.2,
    seed: int = 0,
    *,
    stratify: bool = True,
) -> tuple[IndexArray, IndexArray]:
    """One ``(train_idx, test_idx)`` split with no source group on both sides.

    Parameters
    ----------
    test_size:
        Fraction in (0, 0.5]. With ``stratify`` the test side is the first fold of
        ``round(1 / test_size)`` stratified group folds, so the fraction is met
        approximately (0.2 -> 1/5, 0.3 -> 1/3). Without it, scikit-learn's
        ``GroupShuffleSplit`` takes ``test_size`` of the *groups*.
    seed:
        Same inputs and seed give the same split.

    Raises
    ------
    DatasetError
        ``test_size`` out of range, or fewer than two source groups.
    """
    if isinstance(test_size, bool) or not isinstance(test_size, (int, float)) or not 0 < test_size <= 0.5:
        raise DatasetError(f"test_size: expected a fraction in (0, 0.5], found {test_size!r}")
    groups = source_groups(incidents)
    n_groups = len(set(groups))
    if n_groups < 2:
        raise DatasetError(f"test_size: a grouped split needs at least 2 source groups, found {n_groups}")
    if stratify:
        k = min(max(2, round(1 / test_size)), n_groups)
        return _folds(incidents, groups, k, seed, stratify=True)[0]

    from sklearn.model_selection import GroupShuffleSplit

    splitter = GroupShuffleSplit(n_splits=1, test_size=test_size, random_state=seed)
    train, test = next(splitter.split(np.zeros((len(incidents), 1)), groups=groups))
    train_idx, test_idx = np.asarray(train, dtype=np.intp), np.asarray(test, dtype=np.intp)
    check_grouped_split(incidents, train_idx, test_idx, groups)
    return train_idx, test_idx
