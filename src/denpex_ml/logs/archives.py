"""Archives: what kind a byte stream is, and the one policy and reader for tar and zip members.

Both the one-job reader (:mod:`denpex_ml.logs.sources`) and the batch reader
(:mod:`denpex_ml.batch.jobs`) read archives through this module, so they refuse the same
members the same way:

* a member name that is absolute or holds ``..`` (:func:`~denpex_ml.logs.names.check_member_name`);
* a link (symbolic or hard), a device or a FIFO;
* a zip member that declares a decompression ratio above ``max_compression_ratio``
  (a possible bomb, refused before a byte of it is read);
* archives nested deeper than ``max_depth``.

The one-job reader raises the refusal (:func:`tar_members`, :func:`zip_members`); the batch
reader turns it into an error row for that job (:func:`check_tar_member`,
:func:`check_zip_member`). Tars are read in one pass (``r|``), never extracted; every byte
is counted against a :class:`~denpex_ml.logs.metered.ReadBudget` as it streams.
"""

from __future__ import annotations

import stat
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, cast

from denpex_ml.errors import ArchiveError, DenpexError, InputTooLargeError, UnsafeArchiveMemberError
from denpex_ml.logs.limits import IngestLimits
from denpex_ml.logs.metered import (
    _DECODE_ERRORS,
    _FEED,
    _GZIP_MAGIC,
    _XZ_MAGIC,
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
    "ARCHIVE_SUFFIXES",
    "MemberCheck",
    "check_tar_member",
    "check_zip_member",
    "is_archive_name",
    "open_tar_stream",
    "open_zip",
    "read_zip_member",
    "source_kind",
    "stream_kind",
    "tar_infos",
    "tar_members",
    "zip_members",
]

#: File names that say "an archive of files" (not one compressed log).
ARCHIVE_SUFFIXES = (".tar", ".tgz", ".tar.gz", ".zip", ".tar.bz2", ".tar.xz", ".tbz2", ".txz")

_ZIP_MAGIC = b"PK\x03\x04"
_ZIP_EMPTY = b"PK\x05\x06"
_BZ2_BLOCK = (b"\x31\x41\x59\x26\x53\x59", b"\x17\x72\x45\x38\x50\x90")  # first block / empty stream
#: The kinds a decompressor reads (the rest are archives or plain text).
COMPRESSED = ("gzip", "bz2", "xz")
_ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError)


def is_archive_name(name: str | Path) -> bool:
    """Whether a file name ends like an archive of files (``.tar``, ``.tgz``, ``.zip``...)."""
    base = name.name if isinstance(name, Path) else name
    return base.lower().endswith(ARCHIVE_SUFFIXES)


def _is_tar_header(head: bytes) -> bool:
    return len(head) > 262 and head[257:262] == b"ustar"


def source_kind(head: bytes, name: str) -> str:
    """``gzip``, ``zip``, ``tar`` or ``plain`` from magic bytes (the name only breaks ties).

    A bzip2 or xz file counts as ``tar`` when its name says so (``.tar.bz2``, ``.txz``...).
    """
    if head.startswith(_GZIP_MAGIC):
        return "gzip"
    if head.startswith((_ZIP_MAGIC, _ZIP_EMPTY)):
        return "zip"
    if _is_tar_header(head):
        return "tar"
    lower = name.lower()
    if lower.endswith((".tar.bz2", ".tbz2", ".tar.xz", ".txz")):
        return "tar"
    return "plain"


def stream_kind(head: bytes) -> str:
    """``gzip``, ``bz2``, ``xz``, ``zip``, ``tar`` or ``plain`` from magic bytes."""
    if head.startswith(_GZIP_MAGIC):
        return "gzip"
    if head.startswith(_XZ_MAGIC):
        return "xz"
    if head.startswith(b"BZh") and head[3:4].isdigit() and head[4:10] in _BZ2_BLOCK:
        return "bz2"
    if head.startswith((_ZIP_MAGIC, _ZIP_EMPTY)):
        return "zip"
    if _is_tar_header(head):
        return "tar"
    return "plain"


def root_feed(kind: str) -> int:
    """Bytes read from a source at once: little under a decompressor, so its ratio is known early."""
    return _FEED if kind in COMPRESSED else 1 << 16


# -- the member policy --------------------------------------------------------------------------
@dataclass(frozen=True)
class MemberCheck:
    """The verdict on one archive member.

    ``name`` is the normalised relative path (the raw name, without a leading ``/``, when the
    name itself is unsafe); ``problem`` the refusal, or None; ``is_file`` False for folders.
    """

    name: str
    problem: DenpexError | None = None
    is_file: bool = True


def _name_check(archive: str, raw: str) -> MemberCheck | str:
    try:
        return check_member_name(archive, raw)
    except UnsafeArchiveMemberError as exc:
        return MemberCheck(raw.lstrip("/"), exc)


def _link_or_device(archive: str, raw: str, *, link: bool, device: bool) -> UnsafeArchiveMemberError | None:
    if link:
        return UnsafeArchiveMemberError(f"{display_name(archive)}: archive member '{display_name(raw)}' is a link")
    if device:
        return UnsafeArchiveMemberError(
            f"{display_name(archive)}: archive member '{display_name(raw)}' is a device or FIFO"
        )
    return None


def check_tar_member(archive: str, info: tarfile.TarInfo) -> MemberCheck:
    """A tar member's verdict: an unsafe name, a link or a device is a problem."""
    name = _name_check(archive, info.name)
    if isinstance(name, MemberCheck):
        return name
    device = info.ischr() or info.isblk() or info.isfifo() or info.isdev()
    problem = _link_or_device(archive, info.name, link=info.issym() or info.islnk(), device=device)
    return MemberCheck(name, problem, is_file=info.isfile())


def check_zip_member(archive: str, info: zipfile.ZipInfo, limits: IngestLimits) -> MemberCheck:
    """A zip member's verdict: an unsafe name, a link, a device or a declared bomb is a problem."""
    name = _name_check(archive, info.filename)
    if isinstance(name, MemberCheck):
        return name
    mode = info.external_attr >> 16
    link = bool(mode) and stat.S_ISLNK(mode)
    device = bool(mode) and (stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISFIFO(mode))
    problem: DenpexError | None = _link_or_device(archive, info.filename, link=link, device=device)
    if problem is None and not info.is_dir() and _declares_bomb(info, limits):
        problem = InputTooLargeError(
            f"{display_name(archive)}: member '{display_name(info.filename)}' declares a decompression ratio above "
            f"{limits.max_compression_ratio:g} (IngestLimits.max_compression_ratio): "
            "refusing a possible archive bomb"
        )
    return MemberCheck(name, problem, is_file=not info.is_dir())


def _declares_bomb(info: zipfile.ZipInfo, limits: IngestLimits) -> bool:
    return info.file_size > limits.ratio_min_bytes and info.file_size > limits.max_compression_ratio * max(
        info.compress_size, 1
    )


def _depth_check(name: str, level: int, limits: IngestLimits) -> None:
    if level > limits.max_depth:
        raise InputTooLargeError(
            f"{display_name(name)}: archives nested deeper than {limits.max_depth} (IngestLimits.max_depth)"
        )


# -- tar ----------------------------------------------------------------------------------------
def _open_tar(stream: BinaryIO, name: str) -> tarfile.TarFile:
    try:
        return tarfile.open(fileobj=stream, mode="r|")
    except DenpexError:
        raise
    except (*_DECODE_ERRORS, ValueError) as exc:
        raise ArchiveError(f"{display_name(name)}: not a readable tar archive ({exc})") from None


def tar_infos(tf: tarfile.TarFile, name: str) -> Iterator[tarfile.TarInfo]:
    """The headers of a tar read in one pass; a corrupt archive is an :class:`ArchiveError`."""
    while True:
        try:
            info = tf.next()
        except DenpexError:
            raise
        except (*_DECODE_ERRORS, ValueError) as exc:
            raise ArchiveError(f"{display_name(name)}: corrupt or truncated tar archive ({exc})") from None
        if info is None:
            return
        yield info


def open_tar_stream(raw: BinaryIO, name: str, budget: ReadBudget) -> tarfile.TarFile:
    """A tar archive read in one pass from ``raw``: plain, gzip, bzip2 or xz.

    Its decompressed bytes are counted against ``budget`` (size and ratio, see
    :mod:`denpex_ml.logs.metered`) as they stream; ``raw`` is not closed with the archive.
    """
    root = _Gauge(name)
    head = raw.read(512)
    root.consumed = len(head)
    kind = stream_kind(head)
    stream = cast(BinaryIO, _Chain(head, cast(BinaryIO, _Metered(raw, root, root_feed(kind)))))
    if kind in COMPRESSED:
        stream = _decompressing(stream, kind, name, budget, root)
    else:
        stream = _buffered(_Counting(stream, budget, gauge=root))
    return _open_tar(stream, name)


def tar_members(
    stream: BinaryIO, name: str, limits: IngestLimits, budget: ReadBudget, level: int
) -> Iterator[tuple[str, BinaryIO]]:
    """``(safe name, stream)`` of each file of an uncompressed tar stream (already counted), in one pass.

    Raises the first refused member (see the module doc); folders are passed over.
    """
    _depth_check(name, level, limits)
    tf = _open_tar(stream, name)
    try:
        for info in tar_infos(tf, name):
            check = check_tar_member(name, info)
            if check.problem is not None:
                raise check.problem
            if not check.is_file:
                continue
            budget.add_member(check.name)
            fobj = tf.extractfile(info)
            if fobj is not None:
                yield check.name, cast(BinaryIO, fobj)
    finally:
        tf.close()


# -- zip ----------------------------------------------------------------------------------------
def open_zip(fh: BinaryIO | Path, name: str) -> zipfile.ZipFile:
    """A zip archive (``fh`` seekable, or a path); an unreadable one is an :class:`ArchiveError`."""
    try:
        return zipfile.ZipFile(fh)
    except _ZIP_ERRORS as exc:
        if isinstance(exc, UnicodeDecodeError):
            raise ArchiveError(f"{display_name(name)}: a member name is marked UTF-8 but is not valid UTF-8") from None
        raise ArchiveError(f"{display_name(name)}: not a readable zip archive ({exc})") from None


def zip_members(
    fh: BinaryIO, name: str, limits: IngestLimits, budget: ReadBudget, level: int, root: _Gauge
) -> Iterator[tuple[str, BinaryIO]]:
    """``(safe name, counted stream)`` of each file of a zip (``fh`` seekable).

    Each member is a producer under ``root`` (its bytes and ratio are counted as it is read);
    raises the first refused member (see the module doc).
    """
    _depth_check(name, level, limits)
    shown = display_name(name)
    with open_zip(fh, name) as zf:
        for info in zf.infolist():
            check = check_zip_member(name, info, limits)
            if check.problem is not None:
                raise check.problem
            if not check.is_file:
                continue
            budget.add_member(check.name)
            full = f"{name}/{check.name}" if name else check.name
            gauge = _Gauge(full, root, compressed=info.compress_type != zipfile.ZIP_STORED, consumed=info.compress_size)
            shown_member = display_name(info.filename)
            try:
                zraw = zf.open(info)
            except _ZIP_ERRORS as exc:
                raise ArchiveError(f"{shown}: corrupt member '{shown_member}' ({exc})") from None
            except (RuntimeError, NotImplementedError) as exc:  # encrypted, unsupported compression
                raise ArchiveError(f"{shown}: cannot read member '{shown_member}' ({exc})") from None
            with zraw:
                yield check.name, _buffered(_Counting(cast(BinaryIO, zraw), budget, gauge=gauge))


def read_zip_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, budget: ReadBudget, max_bytes: int) -> bytes:
    """Up to ``max_bytes`` bytes of one zip member, counted against ``budget`` (size and ratio)."""
    size = info.compress_size
    with zf.open(info) as zraw:
        counted = _buffered(_Counting(cast(BinaryIO, zraw), budget, lambda: size))
        return counted.read(max_bytes)
