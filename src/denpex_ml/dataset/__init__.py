"""Labelled incidents: the record format, loading, writing and grouped splits.

The format is documented in ``docs/dataset-format.md``.

Example
-------
>>> from denpex_ml.dataset import Incident, group_kfold
>>> incidents = [
...     Incident(id=f"i{n}", label="cuda-oom", log="CUDA out of memory",
...              source=f"https://github.com/org/repo/issues/{n % 3}")
...     for n in range(6)
... ]
>>> [len(test) for _, test in group_kfold(incidents, k=3, seed=0)]
[2, 2, 2]
"""

from __future__ import annotations

from denpex_ml.dataset.incident import FIELDS, SYNTHETIC_PREFIX, Incident, check_log_key, source_group
from denpex_ml.dataset.io import from_hf_dataset, load_incidents, to_hf_dataset, write_jsonl
from denpex_ml.dataset.split import (
    check_grouped_split,
    check_new_threads,
    group_kfold,
    source_groups,
    train_test_split_grouped,
)

__all__ = [
    "FIELDS",
    "SYNTHETIC_PREFIX",
    "Incident",
    "check_grouped_split",
    "check_log_key",
    "check_new_threads",
    "from_hf_dataset",
    "group_kfold",
    "load_incidents",
    "source_group",
    "source_groups",
    "to_hf_dataset",
    "train_test_split_grouped",
    "write_jsonl",
]
