"""Batch scoring: one result row per job of a directory or archive of failed jobs.

>>> from denpex_ml import score_archive
>>> for row in score_archive("data/examples/jobs", workers=2):  # doctest: +SKIP
...     print(row.job_id, row.label, row.confidence)
"""

from __future__ import annotations

from denpex_ml.batch.jobs import Batch, BatchLimits, Job, JobPattern, discover_jobs
from denpex_ml.batch.results import FORMATS, JobResult, ResultSink, read_results
from denpex_ml.batch.score import ENGINES, ModelSpec, score_archive, score_job, score_jobs

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
