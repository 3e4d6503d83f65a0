"""denpex_ml: diagnose failed distributed deep-learning jobs from their logs.

>>> from denpex_ml import classify
>>> d = classify(text="[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
>>> d.label
'cuda-oom'

The public surface is :data:`__all__`; everything else is importable from its module
but not promised to stay.
"""

from __future__ import annotations

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
    from denpex_ml.batch.results import JobResult
    from denpex_ml.batch.score import score_archive
    from denpex_ml.logs import IngestLimits, LogSource
    from denpex_ml.model.core import DenpexModel, load_model
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


def __getattr__(name: str) -> object:
    # Lazy re-exports: importing denpex_ml stays cheap (no numpy/sklearn/model at import).
    # load_model and score_archive are the functions themselves (full signatures for editors
    # and type checkers; see the TYPE_CHECKING imports above).
    if name == "load_model":
        from denpex_ml.model.core import load_model

        return load_model
    if name == "score_archive":
        from denpex_ml.batch.score import score_archive

        return score_archive
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
