"""Where log bytes come from: files, compressed files, directories and archives, read safely.

Archives are read as streams, never extracted: a tar (plain, gzip, bzip2 or xz) is read
member by member in one pass, a tar nested in an archive is read from inside it, and only a
zip nested in another archive or read from a pipe is spooled to a temporary file (zip needs
random access). Which members are refused (an absolute path, ``..``, links, devices, a
declared bomb, nesting deeper than ``max_depth``) is :mod:`denpex_ml.logs.archives`, the one
archive reader and member policy, shared with the batch reader.

Every decompressor (gzip, bzip2, xz, zip members, at any depth) counts the bytes it
*produces* against :class:`~denpex_ml.logs.limits.IngestLimits` while it streams:

* all bytes produced from one source together stay under ``max_total_bytes``;
* each decompressor produces at most ``max_compression_ratio`` times the compressed bytes it
  has consumed (checked continuously once it has produced ``ratio_min_bytes``), and so does
  each file on disk with everything decompressed from it (archives nested in archives);
  compressed input is handed to a decompressor in small chunks, so a bomb is refused a few
  megabytes after it starts, not after it has been expanded (the counting and decompressing
  streams are :mod:`denpex_ml.logs.metered`).

Names are shown with :func:`~denpex_ml.logs.names.display_name`: bytes that are not UTF-8 (``surrogateescape``)
and control characters become backslash escapes, so a hostile name cannot break an output.
"""

from __future__ import annotations

import errno
import io
import logging
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, cast

from denpex_ml.errors import (
    ArchiveError,
    DenpexError,
    InputTooLargeError,
    InvalidInputError,
    LogNotFoundError,
)
from denpex_ml.logs.archives import (
    COMPRESSED,
    root_feed,
    stream_kind,
    tar_members,
    zip_members,
)
from denpex_ml.logs.limits import IngestLimits
from denpex_ml.logs.metered import (
    _DECODE_ERRORS,
    ReadBudget,
    _buffered,
    _Chain,
    _Counting,
    _decompressing,
    _Gauge,
    _Metered,
)
from denpex_ml.logs.names import check_member_name, display_name

__all__ = [
    "Member",
    "ReadBudget",
    "check_member_name",
    "display_name",
    "iter_bytes_members",
    "iter_members",
    "iter_stream_members",
]

log = logging.getLogger(__name__)

#: Name suffixes a decompressor removes (``.tgz`` -> ``.tar``).
_SUFFIXES = {
    "gzip": ((".tgz", ".tar"), (".gz", "")),
    "bz2": ((".tbz2", ".tar"), (".tbz", ".tar"), (".bz2", "")),
    "xz": ((".txz", ".tar"), (".xz", "")),
}
#: A nested or piped zip is spooled to memory up to this size, then to a temporary file.
_SPOOL_MEMORY = 32 * 1024**2


@dataclass(frozen=True)
class Member:
    """One file of a source: its relative name (safe to display) and a way to open it as a binary stream."""

    name: str
    open: Callable[[], BinaryIO]


def _join(prefix: str, name: str) -> str:
    return f"{prefix}/{name}" if prefix else name


def _strip_suffix(name: str, kind: str) -> str:
    lower = name.lower()
    for suffix, replacement in _SUFFIXES[kind]:
        if lower.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)] + replacement
    return name


def iter_members(
    path: str | os.PathLike[str], limits: IngestLimits, budget: ReadBudget | None = None
) -> Iterator[Member]:
    """Yield the text members of ``path``.

    A file (plain, .gz, .bz2, .xz), a directory (read recursively, links skipped) or an
    archive (.tar, .tar.gz/.tgz, .tar.bz2, .tar.xz, .zip, archives nested up to
    ``limits.max_depth``). Members are read one at a time, in order: read (or skip) each
    member before asking for the next one.
    """
    if isinstance(path, str) and not path:
        raise LogNotFoundError("'': empty path (give a log file, a directory or an archive)")
    p = Path(path)
    shown = display_name(str(p))
    try:
        st = p.lstat()
    except FileNotFoundError:
        raise LogNotFoundError(f"{shown}: no such file or directory", filename=str(p), errno=errno.ENOENT) from None
    except (OSError, ValueError) as exc:
        raise LogNotFoundError(
            f"{shown}: cannot access ({getattr(exc, 'strerror', None) or exc})",
            filename=str(p),
            errno=getattr(exc, "errno", None),
        ) from None
    budget = budget or ReadBudget(limits, shown)
    if stat.S_ISLNK(st.st_mode):
        try:
            st = p.stat()  # a link named by the user is followed once, at the top only
        except OSError:
            raise LogNotFoundError(f"{shown}: broken symbolic link", filename=str(p), errno=errno.ENOENT) from None
    if stat.S_ISDIR(st.st_mode):
        yield from _iter_dir(p, limits, budget)
    elif stat.S_ISREG(st.st_mode):
        yield from _iter_file(p, p.name, limits, budget, level=0)
    else:
        raise LogNotFoundError(f"{shown}: not a regular file or directory")


def _iter_dir(root: Path, limits: IngestLimits, budget: ReadBudget) -> Iterator[Member]:
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False, onerror=_raise_walk):
        dirnames.sort()
        for d in list(dirnames):
            if (Path(dirpath) / d).is_symlink():
                rel_dir = Path(dirpath, d).relative_to(root).as_posix()
                budget.warnings.append(f"skipped symbolic link {display_name(rel_dir)}")
                dirnames.remove(d)
        for fname in sorted(filenames):
            full = Path(dirpath) / fname
            rel = full.relative_to(root).as_posix()
            try:
                st = full.lstat()
            except OSError as exc:
                raise LogNotFoundError(
                    f"{display_name(str(full))}: cannot access ({exc.strerror or exc})",
                    filename=str(full),
                    errno=exc.errno,
                ) from None
            if not stat.S_ISREG(st.st_mode):
                budget.warnings.append(f"skipped {display_name(rel)}: not a regular file (link or device)")
                continue
            yield from _iter_file(full, rel, limits, budget, level=1)


def _raise_walk(exc: OSError) -> None:
    raise LogNotFoundError(
        f"{display_name(str(exc.filename))}: cannot read directory ({exc.strerror or exc})",
        filename=None if exc.filename is None else str(exc.filename),
        errno=exc.errno,
    )


def _open_file(path: Path, buffering: int = -1) -> BinaryIO:
    try:
        return path.open("rb", buffering=buffering)
    except OSError as exc:
        raise LogNotFoundError(
            f"{display_name(str(path))}: cannot read ({exc.strerror or exc})", filename=str(path), errno=exc.errno
        ) from None


def _iter_file(path: Path, rel: str, limits: IngestLimits, budget: ReadBudget, level: int) -> Iterator[Member]:
    with _open_file(path) as fh:
        head = fh.read(512)
    kind = stream_kind(head)
    budget.add_member(rel)
    if kind == "plain":
        yield Member(display_name(rel), lambda: _open_plain(path, rel, budget))
        return
    root = _Gauge(rel)
    fh = _open_file(path)
    try:
        if kind == "zip":
            root.consumed = os.fstat(fh.fileno()).st_size
            yield from _iter_zip(fh, rel, limits, budget, level, root)
        else:
            meter = cast(BinaryIO, _Metered(fh, root, root_feed(kind)))
            yield from _iter_stream(meter, rel, "", limits, budget, level, root, charged=False)
    finally:
        fh.close()


def _open_plain(path: Path, rel: str, budget: ReadBudget) -> BinaryIO:
    """A plain file, counted as it is read; unbuffered below the counter: an uncompressed file has
    no ratio to meter, and the counter reads straight into the caller's buffer (a metered layer
    and a second buffer had copied a 100 MB file twice more before its first scan)."""
    return _buffered(_Counting(_open_file(path, buffering=0), budget, gauge=_Gauge(rel)))


class _Unclosable(io.RawIOBase):
    """Reads ``inner`` but leaves it open when closed (a stream the caller owns, e.g. stdin)."""

    def __init__(self, inner: BinaryIO) -> None:
        self._inner = inner

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self._inner.read(len(b))
        b[: len(data)] = data
        return len(data)


def _returning(stream: BinaryIO) -> Callable[[], BinaryIO]:
    return lambda: stream


def _read_head(stream: BinaryIO, n: int = 512, *, name: str = "") -> tuple[bytes, BinaryIO]:
    try:
        head = stream.read(n)
    except DenpexError:
        raise
    except _DECODE_ERRORS as exc:
        raise ArchiveError(f"{display_name(name) or 'stream'}: corrupt or truncated data ({exc})") from None
    return head, _buffered(_Chain(head, stream))


def peek(stream: BinaryIO, n: int = 8192, *, name: str = "") -> tuple[bytes, BinaryIO]:
    """The first ``n`` bytes of ``stream`` and a stream that reads it again from the start."""
    return _read_head(stream, n, name=name)


def _iter_stream(
    stream: BinaryIO,
    rel: str,
    prefix: str,
    limits: IngestLimits,
    budget: ReadBudget,
    level: int,
    root: _Gauge,
    *,
    charged: bool,
    stacked: int = 0,
    container: str | None = None,
) -> Iterator[Member]:
    """The members of one byte stream: itself (text), what it decompresses to, or an archive's.

    ``charged``: whether the bytes of ``stream`` were already counted (inside an archive or
    a decompressor) or are a source's raw bytes, counted here as ``root``'s. ``level`` is
    the number of archives around the stream, ``stacked`` the decompressors directly on it.
    An archive is named ``container`` (the compressed file it came from) when given:
    the members of ``job.tar.gz`` are ``job.tar.gz/...``.
    """
    full = _join(prefix, rel)
    head, stream = _read_head(stream, name=full)
    kind = stream_kind(head)
    if kind == "plain" and stacked and rel.lower().endswith(".tar") and len(head) >= 512:
        kind = "tar"  # a pre-POSIX tar (no ``ustar`` magic) named by its compressed file: x.tar.gz, x.tgz
    if kind in COMPRESSED:
        if stacked >= limits.max_depth:
            raise InputTooLargeError(
                f"{display_name(full)}: compressed more than {limits.max_depth} times (IngestLimits.max_depth)"
            )
        inner = _strip_suffix(rel, kind)
        dec = _decompressing(stream, kind, full, budget, root)
        yield from _iter_stream(
            dec,
            inner,
            prefix,
            limits,
            budget,
            level,
            root,
            charged=True,
            stacked=stacked + 1,
            container=container or full,
        )
        return
    if not charged:
        stream = _buffered(_Counting(stream, budget, gauge=root))
    archive = container or full
    if kind == "tar":
        yield from _iter_tar_stream(stream, archive, limits, budget, level, root)
    elif kind == "zip":
        with _spooled(stream, archive) as spool:
            yield from _iter_zip(spool, archive, limits, budget, level, root)
    else:
        yield Member(display_name(full), _returning(stream))


@contextmanager
def _spooled(stream: BinaryIO, name: str) -> Iterator[BinaryIO]:
    """A seekable copy of ``stream`` (a zip inside an archive or a pipe), removed afterwards."""
    spool = tempfile.SpooledTemporaryFile(max_size=_SPOOL_MEMORY)  # noqa: SIM115 - closed below
    try:
        try:
            shutil.copyfileobj(stream, spool, 1 << 16)
        except DenpexError:
            raise
        except _DECODE_ERRORS as exc:
            raise ArchiveError(f"{display_name(name)}: corrupt or truncated data ({exc})") from None
        spool.seek(0)
        yield cast(BinaryIO, spool)
    finally:
        spool.close()


def _iter_tar_stream(
    stream: BinaryIO, name: str, limits: IngestLimits, budget: ReadBudget, level: int, root: _Gauge
) -> Iterator[Member]:
    """The members of an uncompressed tar stream (already counted), read in one pass."""
    for member_name, fobj in tar_members(stream, name, limits, budget, level):
        yield from _iter_stream(fobj, member_name, name, limits, budget, level + 1, root, charged=True)


def _iter_zip(
    fh: BinaryIO, name: str, limits: IngestLimits, budget: ReadBudget, level: int, root: _Gauge
) -> Iterator[Member]:
    """The members of a zip archive (``fh`` is seekable); each member is a producer under ``root``."""
    for member_name, counted in zip_members(fh, name, limits, budget, level, root):
        yield from _iter_stream(counted, member_name, name, limits, budget, level + 1, root, charged=True)


def iter_bytes_members(
    name: str, data: bytes, limits: IngestLimits, budget: ReadBudget, depth: int = 1
) -> Iterator[Member]:
    """Yield the text members of one file held in memory (a member of a batch archive).

    ``data`` may be a plain log, compressed (gzip, bzip2, xz), or an archive (tar, tar.gz,
    zip...), read with the same checks and limits as files on disk.
    """
    root = _Gauge(name)
    budget.add_member(name)
    stream = cast(BinaryIO, _Metered(io.BytesIO(data), root, root_feed(stream_kind(data[:512]))))
    yield from _iter_stream(stream, name, "", limits, budget, depth, root, charged=False)


def iter_stream_members(stream: BinaryIO, name: str, limits: IngestLimits, budget: ReadBudget) -> Iterator[Member]:
    """Yield the text members of a binary stream read once, front to back (e.g. standard input).

    The stream may be a plain log, compressed, or an archive (a zip is spooled first).
    It is not closed.
    """
    root = _Gauge(name)
    head = stream.read(512)
    if not isinstance(head, bytes):
        raise InvalidInputError(f"{display_name(name)}: expected a binary stream (e.g. sys.stdin.buffer)")
    root.consumed = len(head)
    rest = cast(BinaryIO, _Metered(cast(BinaryIO, _Unclosable(stream)), root, root_feed(stream_kind(head))))
    raw = cast(BinaryIO, _Chain(head, rest))
    budget.add_member(name)
    yield from _iter_stream(raw, name, "", limits, budget, 0, root, charged=False)


@contextmanager
def opened(member: Member) -> Iterator[BinaryIO]:
    """Open a member and close it afterwards."""
    stream = member.open()
    try:
        yield stream
    finally:
        try:
            stream.close()
        except Exception:  # pragma: no cover - closing a broken stream
            log.debug("closing %s failed", member.name)
