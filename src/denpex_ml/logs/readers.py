"""Reading one job: a path, an archive, a mapping, a stream or members -> one :class:`LogBundle`.

The readers decide what each member of a job is — a text log (ingested by
:func:`~denpex_ml.logs.ingest.ingest_stream`), a PyTorch Flight Recorder dump (read by the
restricted reader: no pickled code ever runs), Slurm job metadata, or binary content (skipped
with a warning) — and turn the lot into one bundle; every limit of
:class:`~denpex_ml.logs.limits.IngestLimits` holds for every source kind.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import BinaryIO

from denpex_ml.errors import FlightRecorderError, InvalidInputError, LogNotFoundError, NotALogError
from denpex_ml.logs.archives import is_archive_name
from denpex_ml.logs.bundle import LogBundle
from denpex_ml.logs.flight_recorder import looks_like_flight_recorder, read_flight_recorder
from denpex_ml.logs.ingest import Builder, ingest_stream
from denpex_ml.logs.limits import IngestLimits, Retention
from denpex_ml.logs.masking import Masker
from denpex_ml.logs.prefixes import rank_from_path
from denpex_ml.logs.sources import (
    Member,
    ReadBudget,
    display_name,
    iter_bytes_members,
    iter_members,
    iter_stream_members,
    opened,
    peek,
)
from denpex_ml.logs.system import JOB_METADATA_KINDS, MAX_METADATA_BYTES, metadata_hosts, system_kind

__all__ = ["LogSource", "read_logs", "read_members", "read_stream"]

LogSource = str | os.PathLike[str] | Mapping[int | str, str] | Mapping[int | str, bytes]

FR_MAX_BYTES = 64 * 1024 * 1024


def _read_job_metadata(builder: Builder, masker: Masker, stream: BinaryIO, name: str, kind: str) -> None:
    """Slurm metadata (``sacct -P`` output, a node list file): its hosts are learned in node order
    and kept as pseudonyms; the text itself is not ingested as log lines."""
    text = stream.read(MAX_METADATA_BYTES).decode("utf-8", "replace")
    hosts, meta = metadata_hosts(kind, text)
    bundle = builder.bundle
    bundle.sources.append(name)  # masked in finish(), like every source name
    for h in hosts:
        p = masker.host_pseudonym(h)
        if p not in bundle.job_hosts:
            bundle.job_hosts.append(p)
    for key, value in meta.items():
        bundle.job_meta.setdefault(key, masker.mask(value))
    bundle.formats[kind] += 1


def _mapping_items(source: Mapping[int | str, str | bytes]) -> Iterable[tuple[str, str | bytes]]:
    for key, value in source.items():
        if not isinstance(value, (str, bytes)):
            raise InvalidInputError(f"log mapping: value of {key!r} must be str or bytes, got {type(value).__name__}")
        if isinstance(key, bool) or not isinstance(key, (int, str)):
            raise InvalidInputError(f"log mapping: key {key!r} must be a rank (int) or a file name (str)")
        if isinstance(key, int):
            if key < 0:
                raise InvalidInputError(f"log mapping: rank {key} must be >= 0")
            yield f"rank{key}", value
        elif key.isdigit():
            yield f"rank{int(key)}", value
        else:
            yield display_name(key), value  # a name from the caller may hold surrogates or controls


def _mapping_members(
    source: Mapping[int | str, str | bytes], limits: IngestLimits, budget: ReadBudget
) -> Iterator[Member]:
    """The members of a mapping, lazily: an archive value is read while its members are used."""
    for name, value in _mapping_items(source):
        if isinstance(value, bytes):  # raw file content: plain, compressed or an archive
            yield from iter_bytes_members(name, value, limits, budget)
        else:
            yield Member(name, _text_opener(value))


def read_logs(
    source: LogSource | None = None,
    *,
    text: str | None = None,
    limits: IngestLimits | None = None,
    retention: Retention | None = None,
    masker: Masker | None = None,
) -> LogBundle:
    """Read one job's logs and split them per rank.

    Parameters
    ----------
    source:
        A log file (plain, .gz, .bz2, .xz), a directory of per-rank files (read
        recursively), an archive (.tar, .tar.gz, .tgz, .tar.bz2, .tar.xz, .zip, nested up
        to ``limits.max_depth``), or a mapping ``rank or file name -> text``. A ``bytes``
        value is a file's raw content: plain, compressed or an archive, read with the same
        checks as a file on disk. An empty path is refused (it is not the current directory).
    text:
        Raw log text, instead of ``source``.
    limits, retention:
        Safety limits and how many lines per rank are kept (see their docs).
    masker:
        Masking rules; a new :class:`Masker` (fresh pseudonyms) by default.

    Returns
    -------
    LogBundle
        Masked, retained lines per stream. An empty input gives an empty bundle.

    Raises
    ------
    LogNotFoundError, NotALogError, ArchiveError, UnsafeArchiveMemberError, InputTooLargeError, InvalidInputError

    Examples
    --------
    >>> b = read_logs(text="[rank1]: RuntimeError: boom\\n[rank0]: step 3 loss 1.2\\n")
    >>> b.ranks
    [0, 1]
    """
    if (source is None) == (text is None):
        raise InvalidInputError("read_logs: give exactly one of `source` or `text`")
    limits = limits or IngestLimits()
    masker = masker or Masker()
    builder = Builder(retention or Retention())
    if text is not None:
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="replace")
        if not isinstance(text, str):
            raise InvalidInputError(f"read_logs: text must be str, got {type(text).__name__}")
        ingest_stream(builder, masker, io.BytesIO(text.encode("utf-8", errors="replace")), "<text>", limits)
        return builder.finish(masker)
    if isinstance(source, Mapping):
        budget = ReadBudget(limits, "log mapping")
        members = _mapping_members(source, limits, budget)
        return _read_members(builder, masker, members, budget, strict=False, what="log mapping")
    if not isinstance(source, (str, os.PathLike)):
        raise InvalidInputError(
            f"read_logs: source must be a path, a mapping rank -> text, or text=...; got {type(source).__name__}"
        )
    if isinstance(source, str) and not source:
        raise LogNotFoundError(f"{source!r}: empty path (give a log file, a directory or an archive)")
    if isinstance(source, str) and ("\n" in source or "\r" in source):
        raise InvalidInputError(
            "read_logs: `source` holds several lines, so it looks like log text rather than a path; "
            "pass it as text=... (classify(text=log))"
        )
    path = Path(source)
    shown = display_name(str(path))
    budget = ReadBudget(limits, shown)
    try:
        strict = path.is_file() and not is_archive_name(path)
    except OSError as exc:  # a name too long for the file system, a path through a non-directory
        raise LogNotFoundError(
            f"{shown}: cannot be read as a path ({exc.strerror or exc})", filename=str(source), errno=exc.errno
        ) from None
    return _read_members(builder, masker, iter_members(path, limits, budget), budget, strict=strict, what=shown)


def read_stream(
    stream: BinaryIO,
    *,
    name: str = "<stdin>",
    limits: IngestLimits | None = None,
    retention: Retention | None = None,
    masker: Masker | None = None,
) -> LogBundle:
    """Read one job's logs from a binary stream, front to back, in bounded memory.

    The stream (standard input, a pipe, a socket) may hold a plain log, a compressed one
    (gzip, bzip2, xz) or an archive; it is read once and not closed. Over-long lines are cut
    while streaming (``limits.max_line_chars``), so a stream without newlines never sits in
    memory.

    Examples
    --------
    >>> import io
    >>> read_stream(io.BytesIO(b"[rank1]: RuntimeError: boom\\n")).ranks
    [1]
    """
    limits = limits or IngestLimits()
    masker = masker or Masker()
    shown = display_name(name)
    budget = ReadBudget(limits, shown)
    members = iter_stream_members(stream, shown, limits, budget)
    return _read_members(Builder(retention or Retention()), masker, members, budget, strict=False, what=shown)


def _text_opener(text: str) -> Callable[[], BinaryIO]:
    return lambda: io.BytesIO(text.encode("utf-8", errors="replace"))


def _read_flight_recorder(builder: Builder, masker: Masker, stream: BinaryIO, name: str) -> None:
    """Keep a Flight Recorder dump (read by the restricted reader: no pickled code ever runs)."""
    limit = FR_MAX_BYTES
    data = stream.read(limit + 1)  # the peeked stream starts again at the first byte
    if len(data) > limit:
        raise FlightRecorderError(f"{masker.mask(name)}: Flight Recorder dump larger than {limit} bytes")
    dump = read_flight_recorder(data, source=masker.mask(name), max_bytes=limit)
    rank = dump.rank if dump.rank is not None else rank_from_path(name)
    if rank is None:
        rank = len(builder.bundle.flight_recorder)
    builder.bundle.flight_recorder[rank] = dump
    builder.bundle.formats["flight-recorder"] += 1


def _read_members(
    builder: Builder, masker: Masker, members: Iterable[Member], budget: ReadBudget, *, strict: bool, what: str
) -> LogBundle:
    """Ingest every member; binary members are skipped with a warning (or raise when ``strict``).

    PyTorch Flight Recorder dumps among them (pickle or JSON) are read by
    :func:`~denpex_ml.logs.flight_recorder.read_flight_recorder` into ``bundle.flight_recorder``;
    one that the restricted reader refuses is skipped with a warning (raises when ``strict``).
    """
    n = 0
    binaries = 0
    for member in members:
        n += 1
        try:
            with opened(member) as raw:
                head, stream = peek(raw, name=member.name)
                if looks_like_flight_recorder(head, member.name):
                    _read_flight_recorder(builder, masker, stream, member.name)
                    continue
                system = system_kind(member.name, head)
                if system in JOB_METADATA_KINDS:
                    _read_job_metadata(builder, masker, stream, member.name, system)
                    continue
                ingest_stream(builder, masker, stream, member.name, budget.limits, system)  # type: ignore[arg-type]
        except FlightRecorderError as exc:
            if strict:
                raise
            budget.warnings.append(f"skipped {masker.mask(member.name)}: {exc}")
            continue
        except NotALogError:
            if strict:
                raise
            binaries += 1
            builder.bundle.sources.pop()
            budget.warnings.append(f"skipped {masker.mask(member.name)}: binary content, not a log")
    if binaries and binaries == n - len(builder.bundle.flight_recorder):
        raise NotALogError(f"{masker.mask(what)}: no text log among {n} file(s) (all binary)")
    bundle = builder.finish(masker)
    bundle.warnings.extend(masker.mask(w) for w in budget.warnings)
    return bundle


def read_members(
    members: Iterable[Member],
    *,
    name: str,
    limits: IngestLimits | None = None,
    retention: Retention | None = None,
    budget: ReadBudget | None = None,
    masker: Masker | None = None,
) -> LogBundle:
    """Read one job given as :class:`~denpex_ml.logs.sources.Member` objects (the batch scorer's
    entry point for jobs that are not one path: pattern-grouped files, archive members)."""
    limits = limits or IngestLimits()
    masker = masker or Masker()
    return _read_members(
        Builder(retention or Retention()), masker, members, budget or ReadBudget(limits, name), strict=False, what=name
    )
