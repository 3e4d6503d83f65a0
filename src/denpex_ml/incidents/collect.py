"""Reading the logs of one incident for the store: files, directories, archives, mappings.

Text only (binary and empty files are skipped inside containers, refused on their own),
read with the project's safe reader (no extraction, no links or ``..``), decoded, not yet
masked (the store masks them with :func:`~denpex_ml.logs.masking.mask_files`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from denpex_ml.dataset.incident import check_log_key
from denpex_ml.errors import DatasetError, InvalidInputError, NotALogError
from denpex_ml.logs.limits import IngestLimits
from denpex_ml.logs.normalize import looks_binary, sniff_encoding
from denpex_ml.logs.sources import ReadBudget, iter_members, opened

__all__ = ["Collected", "LogInput", "collect"]

PathLike = str | os.PathLike[str]
#: What :meth:`IncidentStore.add` accepts: a path, or a mapping ``name or rank -> text``.
LogInput = PathLike | Mapping[str | int, str | bytes]

_BINARY_SNIFF = 8192


def _decode(data: bytes, name: str) -> str:
    """Bytes of one log file as text; refuses binary content.

    UTF-8 with undecodable bytes as U+FFFD (UTF-16 when the file starts with its BOM);
    a byte-order mark is dropped. NUL bytes, or more than 10 % control bytes at the
    start, mean binary.
    """
    head = data[:_BINARY_SNIFF]
    if sniff_encoding(head) == "utf-16":
        text = data.decode("utf-16", errors="replace")
    else:
        if b"\x00" in data or looks_binary(head):
            raise NotALogError(f"{name}: binary content (NUL or control bytes), expected a text log")
        text = data.decode("utf-8", errors="replace")
    if "\x00" in text:
        raise NotALogError(f"{name}: binary content (NUL characters), expected a text log")
    return text.removeprefix("\ufeff")


def _clean_str(text: str, name: str) -> str:
    """A caller's ``str`` log: lone surrogates replaced (they cannot be written as UTF-8)."""
    if "\x00" in text:
        raise NotALogError(f"{name}: binary content (NUL characters), expected a text log")
    return text.encode("utf-8", errors="replace").decode("utf-8").removeprefix("\ufeff")


def _hidden(name: str) -> bool:
    return any(part.startswith(".") or part == "__MACOSX" for part in name.split("/"))


@dataclass
class Collected:
    """Raw (unmasked) files of one incident, before masking."""

    files: list[tuple[str, str]]
    single: bool  # a path to one plain file: stored as ``log``
    basename: str | None  # for the default source
    skipped: list[str]


def collect(source: LogInput, limits: IngestLimits) -> Collected:
    """The raw (unmasked) text files of one incident: a path (file, directory, archive) or a mapping."""
    if isinstance(source, Mapping):
        return _collect_mapping(source)
    if not isinstance(source, (str, os.PathLike)):
        raise InvalidInputError(f"source must be a log path or a mapping name -> text, got {type(source).__name__}")
    return _collect_path(Path(source), limits)


def _collect_mapping(source: Mapping[str | int, str | bytes]) -> Collected:
    files: list[tuple[str, str]] = []
    skipped: list[str] = []
    for key, value in source.items():
        if isinstance(key, bool) or not isinstance(key, (int, str)):
            raise InvalidInputError(f"log mapping: key {key!r} must be a rank (int) or a file name (str)")
        name = str(key)
        why = check_log_key(name)
        if why:
            raise DatasetError(f"log mapping: field logs: {why}")
        if isinstance(value, bytes):
            text = _decode(value, f"log mapping[{name!r}]")
        elif isinstance(value, str):
            text = _clean_str(value, f"log mapping[{name!r}]")
        else:
            raise InvalidInputError(f"log mapping: value of {name!r} must be str or bytes, got {type(value).__name__}")
        if not text.strip():
            raise NotALogError(f"log mapping[{name!r}]: empty log")
        files.append((name, text))
    if not files:
        raise NotALogError("log mapping: no logs given")
    return Collected(files, single=False, basename=None, skipped=skipped)


def _collect_path(path: Path, limits: IngestLimits) -> Collected:
    budget = ReadBudget(limits, str(path))
    single_file = path.is_file()
    archive_prefix = f"{path.name}/"
    is_archive = not single_file  # a directory is a container too
    entries: list[tuple[str, bytes]] = []
    for member in iter_members(path, limits, budget):
        name = member.name
        inside = not single_file  # a member of a directory or archive, not the file itself
        if single_file and name.startswith(archive_prefix):
            name = name[len(archive_prefix) :]
            is_archive = inside = True
        with opened(member) as stream:  # tar streams are read in order: consume every member
            data = stream.read()
        if not (inside and _hidden(name)):
            entries.append((name, data))
    single = not is_archive
    if is_archive and single_file:
        entries = _strip_common_folder(entries)
    files: list[tuple[str, str]] = []
    skipped: list[str] = list(budget.warnings)
    for name, data in entries:
        try:
            text = _decode(data, str(path) if single else f"{path}: {name}")
        except NotALogError:
            if single:
                raise
            skipped.append(f"{name} (binary)")
            continue
        if not text.strip():
            if single:
                raise NotALogError(f"{path}: empty log (no text besides whitespace)")
            skipped.append(f"{name} (empty)")
            continue
        files.append((name, text))
    if not files:
        what = ", ".join(skipped) if skipped else "no files"
        raise NotALogError(f"{path}: no text log to store ({what})")
    basename = Path(os.path.abspath(path)).name or str(path)
    return Collected(files, single=single, basename=basename, skipped=skipped)


def _strip_common_folder(entries: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
    """Drop a top-level folder every member of an archive lies in (``job/rank0.log``)."""
    firsts = {name.split("/", 1)[0] for name, _ in entries}
    if len(firsts) == 1 and all("/" in name for name, _ in entries):
        return [(name.split("/", 1)[1], data) for name, data in entries]
    return entries
