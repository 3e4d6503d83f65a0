"""Batch scoring: one result row per job of a directory or archive of failed jobs.

>>> from denpex_ml import score_archive
>>> for row in score_archive("data/examples/jobs", workers=2):  # doctest: +SKIP
...     print(row.job_id, row.label, row.confidence)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from denpex_ml.batch.jobs import Batch, BatchLimits, Job, JobPattern, discover_jobs
from denpex_ml.batch.output import ResultSink
from denpex_ml.batch.results import FORMATS, JobResult, read_results

if TYPE_CHECKING:
    from denpex_ml.batch.score import ENGINES, score_archive, score_jobs
    from denpex_ml.batch.worker import ModelSpec, score_job

#: names served lazily from :mod:`denpex_ml.batch.score` and :mod:`denpex_ml.batch.worker` (they
#: import the model and scikit-learn; reading or reporting results must not pay for that)
_FROM_SCORE = ("ENGINES", "score_archive", "score_jobs")
_FROM_WORKER = ("ModelSpec", "score_job")


def __getattr__(name: str) -> Any:
    if name in _FROM_SCORE:
        from denpex_ml.batch import score

        return getattr(score, name)
    if name in _FROM_WORKER:
        from denpex_ml.batch import worker

        return getattr(worker, name)
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
