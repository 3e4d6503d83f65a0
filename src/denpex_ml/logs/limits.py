"""Limits that keep ingestion bounded in memory and safe against hostile input."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from denpex_ml.errors import InvalidInputError

__all__ = ["IngestLimits", "Retention"]


@dataclass(frozen=True)
class IngestLimits:
    """Safety limits of ingestion.

    Parameters
    ----------
    max_line_chars:
        Longer lines are cut to this length (the rest is skipped without being loaded).
    max_total_bytes:
        Most bytes read from one source, all members together: plain files as read, plus
        the output of every decompressor (gzip, bzip2, xz, zip members, at any depth).
    max_compression_ratio:
        Highest ratio of bytes produced to compressed bytes consumed, checked continuously
        for every decompressor and for every file with all that is decompressed from it
        (nested archives): a bomb is refused a few megabytes after it starts. Text logs
        compress 5-30x, repetitive ones up to about 200x; deflate's ceiling is about 1030x.
    ratio_min_bytes:
        Bytes a decompressor may produce before its ratio is checked (small files compress oddly).
    max_members:
        Most files read from one directory or archive.
    max_depth:
        Nesting depth of archives inside archives/directories (and of compression applied
        more than once, e.g. ``.gz.gz``).
    """

    max_line_chars: int = 64 * 1024
    max_total_bytes: int = 16 * 1024**3
    max_compression_ratio: float = 500.0
    ratio_min_bytes: int = 1024**2
    max_members: int = 100_000
    max_depth: int = 2

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                raise InvalidInputError(f"IngestLimits.{name} must be a positive number, got {value!r}")

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


@dataclass(frozen=True)
class Retention:
    """How many lines of each rank's stream are kept (memory does not grow with log size).

    Every line is read, masked and counted; a stream keeps its first ``head`` lines, its last
    ``tail`` lines and up to ``salient`` lines that look like errors, warnings, tracebacks or
    configuration (each distinct template at most ``per_template`` times).
    """

    head: int = 40
    tail: int = 120
    salient: int = 400
    per_template: int = 2
    max_streams: int = 8192

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise InvalidInputError(f"Retention.{name} must be a non-negative int, got {value!r}")

    def to_dict(self) -> dict[str, int]:
        return asdict(self)
