"""The exception family of denpex_ml.

Every error the library raises on purpose is a :class:`DenpexError`. Each subclass
also derives from the built-in exception a caller would naturally catch, so
``except FileNotFoundError`` keeps working for code that does not know this library.
Messages name the path, record or field, what was expected and what was found.
"""

from __future__ import annotations

__all__ = [
    "ArchiveError",
    "DatasetError",
    "DatasetLabelError",
    "DenpexError",
    "DependencyMissingError",
    "DuplicateIncidentError",
    "FlightRecorderError",
    "InputTooLargeError",
    "InvalidInputError",
    "JobTimeoutError",
    "LogNotFoundError",
    "ModelError",
    "NotALogError",
    "OutputPathError",
    "OutputWriteError",
    "TaxonomyError",
    "UnknownIncidentError",
    "UnknownLabelError",
    "UnsafeArchiveMemberError",
    "WorkerCrashedError",
]


class DenpexError(Exception):
    """Base class of every error raised deliberately by denpex_ml."""


class LogNotFoundError(DenpexError, FileNotFoundError):
    """A log path given by the user does not exist or cannot be read.

    Like any ``OSError`` it carries ``errno`` (e.g. ``errno.ENOENT``, ``errno.EACCES``) and
    ``filename`` (the path as given) when they are known; ``str()`` is the message alone.
    """

    def __init__(self, message: str, *, filename: str | None = None, errno: int | None = None) -> None:
        super().__init__(message)
        self.errno = errno
        self.filename = filename

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class InvalidInputError(DenpexError, TypeError):
    """An argument has the wrong type or shape (e.g. neither a path, text nor a mapping)."""


class NotALogError(DenpexError, ValueError):
    """The input is not a text log (binary content, wrong type, unreadable encoding)."""


class ArchiveError(DenpexError, ValueError):
    """An archive is corrupt, truncated or of an unsupported kind."""


class UnsafeArchiveMemberError(ArchiveError):
    """An archive member is unsafe: absolute path, ``..``, link or device."""


class InputTooLargeError(DenpexError, ValueError):
    """An input exceeds a configured size or decompression-ratio limit (e.g. a zip bomb)."""


class FlightRecorderError(DenpexError, ValueError):
    """A PyTorch Flight Recorder dump is unreadable, malformed, too large or unsafe (a pickle naming code)."""


class TaxonomyError(DenpexError, ValueError):
    """A taxonomy file is malformed or inconsistent (names file, field, expectation)."""


class UnknownLabelError(TaxonomyError, KeyError):
    """A failure id is not in the taxonomy."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class DatasetError(DenpexError, ValueError):
    """A labelled-incident record or dataset is invalid (names record and field)."""


class DatasetLabelError(DatasetError, UnknownLabelError):
    """A labelled incident carries a label that is not a taxonomy id.

    Both ``except DatasetError`` (any bad record) and ``except UnknownLabelError``
    (any unknown failure id) catch it.
    """


class DuplicateIncidentError(DatasetError):
    """An incident is already stored: same content, or its id is taken.

    ``existing_id`` is the id of the stored incident it collides with.
    """

    def __init__(self, message: str, existing_id: str | None = None) -> None:
        super().__init__(message)
        self.existing_id = existing_id


class UnknownIncidentError(DatasetError, KeyError):
    """No incident with the given id is stored (the message lists close ids)."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class ModelError(DenpexError, ValueError):
    """A model directory is missing, corrupt, incompatible or fails its checksums."""


class DependencyMissingError(DenpexError, ImportError):
    """An optional feature needs a package that is not installed (the message names the extra)."""


class WorkerCrashedError(DenpexError, RuntimeError):
    """A worker process died while scoring a job (killed for memory, a crash in native code)."""


class JobTimeoutError(DenpexError, TimeoutError):
    """Scoring one job took longer than its time budget (``--job-timeout``); its worker was replaced."""


class OutputPathError(DenpexError, ValueError):
    """An output path cannot be used: it is a directory, its parent is a file or not writable,
    or it is (or lies inside) the input, which writing it would destroy or read back as a job."""


class OutputWriteError(DenpexError, OSError):
    """Writing an output failed part-way (disk full, I/O error); every row written before is intact."""
