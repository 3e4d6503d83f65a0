"""denpex_ml: diagnose failed distributed deep-learning jobs from their logs.

>>> from denpex_ml import classify
>>> d = classify(text="[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
>>> d.label
'cuda-oom'

The public surface is :data:`__all__`; everything else is importable from its module
but not promised to stay.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from denpex_ml.errors import (
    ArchiveError,
    DatasetError,
    DenpexError,
    InputTooLargeError,
    InvalidInputError,
    LogNotFoundError,
    ModelError,
    NotALogError,
    TaxonomyError,
    UnknownLabelError,
    UnsafeArchiveMemberError,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

    from denpex_ml.batch.results import JobResult
    from denpex_ml.logs import IngestLimits, LogSource
    from denpex_ml.model.core import DenpexModel
    from denpex_ml.model.diagnosis import Diagnosis, Evidence

from denpex_ml._version import __version__

__all__ = [
    "ArchiveError",
    "DatasetError",
    "DenpexError",
    "DenpexModel",
    "Diagnosis",
    "Evidence",
    "InputTooLargeError",
    "InvalidInputError",
    "JobResult",
    "LogNotFoundError",
    "ModelError",
    "NotALogError",
    "TaxonomyError",
    "UnknownLabelError",
    "UnsafeArchiveMemberError",
    "__version__",
    "classify",
    "load_model",
    "read_logs",
    "score_archive",
]


def classify(
    source: LogSource | None = None,
    *,
    text: str | None = None,
    model: DenpexModel | None = None,
    limits: IngestLimits | None = None,
) -> Diagnosis:
    """Diagnose one failed job with the shipped model (loaded once per process, lazily).

    Parameters
    ----------
    source:
        A log file (plain or .gz), a directory of per-rank logs, an archive
        (.tar/.tar.gz/.zip), or a mapping rank -> text.
    text:
        Raw log text instead of ``source``.
    model:
        Another model (see :func:`load_model`); the shipped default otherwise.

    Returns
    -------
    Diagnosis
        ``label`` (a taxonomy id or ``"unknown"``), ``confidence``, ``alternatives``,
        ``initiating_rank``, ``evidence``, ``entry`` (root cause, fix, confirm steps).
    """
    from denpex_ml.model.core import default_model

    return (model or default_model()).classify(source, text=text, limits=limits)


def load_model(path: str | os.PathLike[str] | None = None, **kwargs: object) -> DenpexModel:
    """Load a model directory (default: the shipped model); see :meth:`DenpexModel.load`."""
    from denpex_ml.model.core import load_model as _load

    return _load(path, **kwargs)  # type: ignore[arg-type]


def score_archive(path: str | os.PathLike[str], **kwargs: object) -> Iterator[JobResult]:
    """Score every job of a directory or archive of failed jobs, one :class:`JobResult` per job
    (error rows included); see :func:`denpex_ml.batch.score.score_archive` for the options
    (``workers``, ``engine="ray"``, ``job_pattern``, ``skip`` ...)."""
    from denpex_ml.batch.score import score_archive as _score

    return _score(path, **kwargs)  # type: ignore[arg-type]


def __getattr__(name: str) -> object:
    # Lazy re-exports: importing denpex_ml stays cheap (no numpy/sklearn/model at import).
    if name in ("Diagnosis", "Evidence"):
        from denpex_ml.model import diagnosis

        return getattr(diagnosis, name)
    if name == "DenpexModel":
        from denpex_ml.model.core import DenpexModel

        return DenpexModel
    if name == "JobResult":
        from denpex_ml.batch.results import JobResult

        return JobResult
    if name == "read_logs":
        from denpex_ml.logs import read_logs

        return read_logs
    raise AttributeError(f"module 'denpex_ml' has no attribute {name!r}")
