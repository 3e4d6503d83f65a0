"""Batch scoring: one result row per job of a directory or archive of failed jobs.

>>> from denpex_ml import score_archive
>>> for row in score_archive("data/examples/jobs", workers=2):  # doctest: +SKIP
...     print(row.job_id, row.label, row.confidence)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from denpex_ml.batch.jobs import Batch, BatchLimits, Job, JobPattern, discover_jobs
from denpex_ml.batch.results import FORMATS, JobResult, ResultSink, read_results

if TYPE_CHECKING:
    from denpex_ml.batch.score import ENGINES, ModelSpec, score_archive, score_job, score_jobs

#: names served lazily from :mod:`denpex_ml.batch.score` (it imports the model and scikit-learn;
#: reading or reporting results must not pay for that)
_FROM_SCORE = ("ENGINES", "ModelSpec", "score_archive", "score_job", "score_jobs")


def __getattr__(name: str) -> Any:
    if name in _FROM_SCORE:
        from denpex_ml.batch import score

        return getattr(score, name)
    raise AttributeError(f"module 'denpex_ml.batch' has no attribute {name!r}")


__all__ = [
    "ENGINES",
    "FORMATS",
    "Batch",
    "BatchLimits",
    "Job",
    "JobPattern",
    "JobResult",
    "ModelSpec",
    "ResultSink",
    "discover_jobs",
    "read_results",
    "score_archive",
    "score_job",
    "score_jobs",
]
