"""Where log bytes come from: files, gzip, directories and archives, read safely.

Archives are read as streams, never extracted to disk. Members with an absolute path,
``..``, links or devices are refused; uncompressed size and compression ratio are
bounded by :class:`~denpex_ml.logs.limits.IngestLimits` (zip/gzip bombs).
"""

from __future__ import annotations

import gzip
import io
import logging
import os
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from denpex_ml.errors import ArchiveError, InputTooLargeError, LogNotFoundError, UnsafeArchiveMemberError
from denpex_ml.logs.limits import IngestLimits

__all__ = ["Member", "ReadBudget", "check_member_name", "iter_bytes_members", "iter_members", "source_kind"]

log = logging.getLogger(__name__)

_GZIP_MAGIC = b"\x1f\x8b"
_ZIP_MAGIC = b"PK\x03\x04"
_ZIP_EMPTY = b"PK\x05\x06"


@dataclass
class ReadBudget:
    """Counts uncompressed bytes of one source against the limits."""

    limits: IngestLimits
    source: str
    read: int = 0
    members: int = 0
    warnings: list[str] = field(default_factory=list)

    def charge(self, n: int, compressed: int | None) -> None:
        self.read += n
        lim = self.limits
        if self.read > lim.max_total_bytes:
            raise InputTooLargeError(
                f"{self.source}: more than {lim.max_total_bytes} uncompressed bytes (IngestLimits.max_total_bytes)"
            )
        if (
            compressed
            and self.read > lim.ratio_min_bytes
            and self.read / max(compressed, 1) > lim.max_compression_ratio
        ):
            raise InputTooLargeError(
                f"{self.source}: decompression ratio above {lim.max_compression_ratio:g} "
                f"({self.read} bytes from {compressed} compressed; IngestLimits.max_compression_ratio): "
                "refusing a possible archive bomb"
            )

    def add_member(self, name: str) -> None:
        self.members += 1
        if self.members > self.limits.max_members:
            raise InputTooLargeError(
                f"{self.source}: more than {self.limits.max_members} files (IngestLimits.max_members)"
            )


class _Counting(io.RawIOBase):
    """A read-only stream that charges every byte to a :class:`ReadBudget`."""

    def __init__(self, inner: BinaryIO, budget: ReadBudget, compressed: Callable[[], int | None]) -> None:
        self._inner = inner
        self._budget = budget
        self._compressed = compressed

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        if not self.closed:
            try:
                self._inner.close()
            finally:
                super().close()

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        try:
            data = self._inner.read(len(b))
        except (EOFError, zlib.error, gzip.BadGzipFile, tarfile.TarError, zipfile.BadZipFile, OSError) as exc:
            raise ArchiveError(f"{self._budget.source}: corrupt or truncated compressed data ({exc})") from None
        n = len(data)
        b[:n] = data
        if n:
            self._budget.charge(n, self._compressed())
        return n


@dataclass(frozen=True)
class Member:
    """One file of a source: its relative name and a way to open it as a binary stream."""

    name: str
    open: Callable[[], BinaryIO]


def source_kind(head: bytes, name: str) -> str:
    """``gzip``, ``zip``, ``tar`` or ``plain`` from magic bytes (the name only breaks ties)."""
    if head.startswith(_GZIP_MAGIC):
        return "gzip"
    if head.startswith((_ZIP_MAGIC, _ZIP_EMPTY)):
        return "zip"
    if len(head) > 262 and head[257:262] == b"ustar":
        return "tar"
    lower = name.lower()
    if lower.endswith((".tar.bz2", ".tbz2", ".tar.xz", ".txz")):
        return "tar"
    return "plain"


def _check_member_name(source: str, name: str) -> str:
    posix = name.replace("\\", "/")
    if posix.startswith("/") or (len(posix) > 1 and posix[1] == ":"):
        raise UnsafeArchiveMemberError(f"{source}: archive member {name!r} has an absolute path")
    parts = PurePosixPath(posix).parts
    if ".." in parts:
        raise UnsafeArchiveMemberError(f"{source}: archive member {name!r} contains '..'")
    return "/".join(p for p in parts if p not in (".", ""))


def check_member_name(source: str, name: str) -> str:
    """``name`` normalised to a relative POSIX path; raises on absolute paths and ``..``."""
    return _check_member_name(source, name)


def _join(prefix: str, name: str) -> str:
    return f"{prefix}/{name}" if prefix else name


def iter_members(
    path: str | os.PathLike[str], limits: IngestLimits, budget: ReadBudget | None = None
) -> Iterator[Member]:
    """Yield the text members of ``path`` (file, .gz, directory, .tar[.gz|.bz2|.xz], .zip)."""
    p = Path(path)
    try:
        st = p.lstat()
    except FileNotFoundError:
        raise LogNotFoundError(f"{p}: no such file or directory") from None
    except OSError as exc:
        raise LogNotFoundError(f"{p}: cannot access ({exc.strerror or exc})") from None
    budget = budget or ReadBudget(limits, str(p))
    if stat.S_ISLNK(st.st_mode):
        try:
            st = p.stat()  # a link named by the user is followed once, at the top only
        except OSError:
            raise LogNotFoundError(f"{p}: broken symbolic link") from None
    if stat.S_ISDIR(st.st_mode):
        yield from _iter_dir(p, limits, budget)
    elif stat.S_ISREG(st.st_mode):
        yield from _iter_file(p, p.name, "", limits, budget, depth=0)
    else:
        raise LogNotFoundError(f"{p}: not a regular file or directory")


def _iter_dir(root: Path, limits: IngestLimits, budget: ReadBudget) -> Iterator[Member]:
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False, onerror=_raise_walk):
        dirnames.sort()
        for d in list(dirnames):
            if (Path(dirpath) / d).is_symlink():
                budget.warnings.append(f"skipped symbolic link {Path(dirpath, d).relative_to(root)}")
                dirnames.remove(d)
        for fname in sorted(filenames):
            full = Path(dirpath) / fname
            rel = full.relative_to(root).as_posix()
            try:
                st = full.lstat()
            except OSError as exc:
                raise LogNotFoundError(f"{full}: cannot access ({exc.strerror or exc})") from None
            if not stat.S_ISREG(st.st_mode):
                budget.warnings.append(f"skipped {rel}: not a regular file (link or device)")
                continue
            yield from _iter_file(full, rel, "", limits, budget, depth=1)


def _raise_walk(exc: OSError) -> None:
    raise LogNotFoundError(f"{exc.filename}: cannot read directory ({exc.strerror or exc})")


def _iter_file(
    path: Path, rel: str, prefix: str, limits: IngestLimits, budget: ReadBudget, depth: int
) -> Iterator[Member]:
    try:
        with path.open("rb") as fh:
            head = fh.read(512)
    except OSError as exc:
        raise LogNotFoundError(f"{path}: cannot read ({exc.strerror or exc})") from None
    kind = source_kind(head, path.name)
    name = _join(prefix, rel)
    if kind == "plain":
        budget.add_member(name)
        yield Member(name, lambda: _open_plain(path, budget))
    elif kind == "gzip":
        inner_name = rel[:-3] if rel.lower().endswith(".gz") else rel
        if inner_name.lower().endswith((".tar", ".tgz")) or rel.lower().endswith(".tgz") or _gz_is_tar(path):
            yield from _iter_tar_file(path, name, limits, budget, depth)
        else:
            budget.add_member(inner_name)
            yield Member(_join(prefix, inner_name), lambda: _open_gzip(path, budget))
    elif kind == "zip":
        yield from _iter_zip(path, name, limits, budget, depth)
    else:
        yield from _iter_tar_file(path, name, limits, budget, depth)


def _open_plain(path: Path, budget: ReadBudget) -> BinaryIO:
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise LogNotFoundError(f"{path}: cannot read ({exc.strerror or exc})") from None
    return io.BufferedReader(_Counting(fh, budget, lambda: None), 1 << 16)


def _open_gzip(path: Path, budget: ReadBudget) -> BinaryIO:
    raw = path.open("rb")
    gz = gzip.GzipFile(fileobj=raw, mode="rb")
    return io.BufferedReader(_Counting(_Closing(gz, raw), budget, raw.tell), 1 << 16)  # type: ignore[arg-type]


class _Closing(io.RawIOBase):
    """Reads from ``inner`` and closes ``inner`` and then ``owner`` (the file under it)."""

    def __init__(self, inner: gzip.GzipFile, owner: BinaryIO) -> None:
        self._inner = inner
        self._owner = owner

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        return self._inner.readinto(b)

    def close(self) -> None:
        if not self.closed:
            try:
                self._inner.close()
            finally:
                self._owner.close()
                super().close()


class _Chain(io.RawIOBase):
    """``head`` bytes already read, then the rest of ``inner`` (for streams without peek)."""

    def __init__(self, head: bytes, inner: BinaryIO) -> None:
        self._head = head
        self._inner = inner

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        if self._head:
            n = min(len(b), len(self._head))
            b[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        data = self._inner.read(len(b))
        b[: len(data)] = data
        return len(data)


def _constant(value: int) -> Callable[[], int | None]:
    return lambda: value


def _returning(stream: BinaryIO) -> Callable[[], BinaryIO]:
    return lambda: stream


def _gunzipping(stream: BinaryIO) -> Callable[[], BinaryIO]:
    return lambda: gzip.GzipFile(fileobj=stream, mode="rb")  # type: ignore[return-value]


def _read_head(stream: BinaryIO, n: int = 512) -> tuple[bytes, BinaryIO]:
    head = stream.read(n)
    return head, io.BufferedReader(_Chain(head, stream), 1 << 16)


def peek(stream: BinaryIO, n: int = 8192) -> tuple[bytes, BinaryIO]:
    """The first ``n`` bytes of ``stream`` and a stream that reads it again from the start."""
    return _read_head(stream, n)


def _gz_is_tar(path: Path) -> bool:
    try:
        with gzip.open(path, "rb") as gz:
            head = gz.read(512)
    except (OSError, EOFError, zlib.error):
        return False
    return len(head) > 262 and head[257:262] == b"ustar"


def _iter_tar_file(path: Path, name: str, limits: IngestLimits, budget: ReadBudget, depth: int) -> Iterator[Member]:
    raw = path.open("rb")
    try:
        yield from _iter_tar_stream(raw, raw.tell, name, limits, budget, depth)
    finally:
        raw.close()


def _iter_tar_stream(
    raw: BinaryIO,
    compressed_pos: Callable[[], int | None],
    name: str,
    limits: IngestLimits,
    budget: ReadBudget,
    depth: int,
) -> Iterator[Member]:
    if depth > limits.max_depth:
        raise InputTooLargeError(f"{name}: archives nested deeper than {limits.max_depth} (IngestLimits.max_depth)")
    counted = io.BufferedReader(_Counting(raw, budget, compressed_pos), 1 << 16)
    try:
        tf = tarfile.open(fileobj=counted, mode="r|*")  # noqa: SIM115 - closed in finally below
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        raise ArchiveError(f"{name}: not a readable tar archive ({exc})") from None
    try:
        while True:
            try:
                info = tf.next()
            except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
                raise ArchiveError(f"{name}: corrupt or truncated tar archive ({exc})") from None
            if info is None:
                break
            member_name = _check_member_name(name, info.name)
            if info.issym() or info.islnk():
                raise UnsafeArchiveMemberError(f"{name}: archive member {info.name!r} is a link")
            if info.ischr() or info.isblk() or info.isfifo() or info.isdev():
                raise UnsafeArchiveMemberError(f"{name}: archive member {info.name!r} is a device or FIFO")
            if not info.isfile():
                continue
            budget.add_member(member_name)
            fobj = tf.extractfile(info)
            if fobj is None:
                continue
            full = _join(name, member_name)
            try:
                head, data_stream = _read_head(fobj)  # type: ignore[arg-type]
            except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
                raise ArchiveError(f"{name}: corrupt or truncated tar archive ({exc})") from None
            kind = source_kind(head, member_name)
            if kind == "plain":
                yield Member(full, _returning(data_stream))
            elif kind == "gzip":
                inner = member_name[:-3] if member_name.lower().endswith(".gz") else member_name
                yield Member(_join(name, inner), _gunzipping(data_stream))
            else:
                nested = io.BytesIO(data_stream.read())
                yield from _iter_nested(nested, full, limits, budget, depth + 1, kind)
    finally:
        tf.close()


def _iter_nested(
    data: io.BytesIO, name: str, limits: IngestLimits, budget: ReadBudget, depth: int, kind: str
) -> Iterator[Member]:
    if depth > limits.max_depth:
        raise InputTooLargeError(f"{name}: archives nested deeper than {limits.max_depth} (IngestLimits.max_depth)")
    if kind == "zip":
        yield from _iter_zip_obj(data, name, limits, budget, depth)
    else:
        yield from _iter_tar_stream(data, data.tell, name, limits, budget, depth)


def _iter_zip(path: Path, name: str, limits: IngestLimits, budget: ReadBudget, depth: int) -> Iterator[Member]:
    with path.open("rb") as fh:
        yield from _iter_zip_obj(fh, name, limits, budget, depth)


def _iter_zip_obj(fh: BinaryIO, name: str, limits: IngestLimits, budget: ReadBudget, depth: int) -> Iterator[Member]:
    if depth > limits.max_depth:
        raise InputTooLargeError(f"{name}: archives nested deeper than {limits.max_depth} (IngestLimits.max_depth)")
    try:
        zf = zipfile.ZipFile(fh)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError) as exc:
        raise ArchiveError(f"{name}: not a readable zip archive ({exc})") from None
    with zf:
        for info in zf.infolist():
            member_name = _check_member_name(name, info.filename)
            mode = info.external_attr >> 16
            if mode and stat.S_ISLNK(mode):
                raise UnsafeArchiveMemberError(f"{name}: archive member {info.filename!r} is a link")
            if mode and (stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISFIFO(mode)):
                raise UnsafeArchiveMemberError(f"{name}: archive member {info.filename!r} is a device or FIFO")
            if info.is_dir():
                continue
            if (
                info.file_size > limits.ratio_min_bytes
                and info.file_size / max(info.compress_size, 1) > limits.max_compression_ratio
            ):
                raise InputTooLargeError(
                    f"{name}: member {info.filename!r} declares a decompression ratio above "
                    f"{limits.max_compression_ratio:g} (IngestLimits.max_compression_ratio): refusing a possible archive bomb"
                )
            budget.add_member(member_name)
            full = _join(name, member_name)
            try:
                with zf.open(info) as zraw:
                    counted = io.BufferedReader(_Counting(zraw, budget, _constant(info.compress_size)), 1 << 16)  # type: ignore[arg-type]
                    head = counted.peek(512)[:512]
                    kind = source_kind(head, member_name)
                    if kind == "plain":
                        yield Member(full, _returning(counted))
                    elif kind == "gzip":
                        inner = member_name[:-3] if member_name.lower().endswith(".gz") else member_name
                        yield Member(_join(name, inner), _gunzipping(counted))
                    else:
                        yield from _iter_nested(io.BytesIO(counted.read()), full, limits, budget, depth + 1, kind)
            except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
                raise ArchiveError(f"{name}: corrupt member {info.filename!r} ({exc})") from None
            except RuntimeError as exc:  # encrypted members
                raise ArchiveError(f"{name}: cannot read member {info.filename!r} ({exc})") from None


def iter_bytes_members(
    name: str, data: bytes, limits: IngestLimits, budget: ReadBudget, depth: int = 1
) -> Iterator[Member]:
    """Yield the text members of one file held in memory (a member of a batch archive).

    ``data`` may be a plain log, gzip-compressed, or an archive (tar, tar.gz, zip), read with
    the same checks and limits as files on disk.
    """
    kind = source_kind(data[:512], name)
    if kind == "plain":
        budget.add_member(name)
        yield Member(name, lambda: io.BufferedReader(_Counting(io.BytesIO(data), budget, lambda: None), 1 << 16))
    elif kind == "gzip":
        inner = name[:-3] if name.lower().endswith(".gz") else name
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(data), mode="rb") as gz:
                head = gz.read(512)
        except (OSError, EOFError, zlib.error) as exc:
            raise ArchiveError(f"{name}: corrupt gzip data ({exc})") from None
        if len(head) > 262 and head[257:262] == b"ustar":
            buf = io.BytesIO(data)
            yield from _iter_tar_stream(buf, buf.tell, name, limits, budget, depth)
        else:
            budget.add_member(inner)
            yield Member(inner, lambda: _gunzip_bytes(data, budget))
    else:
        yield from _iter_nested(io.BytesIO(data), name, limits, budget, depth, kind)


def _gunzip_bytes(data: bytes, budget: ReadBudget) -> BinaryIO:
    raw = io.BytesIO(data)
    gz = gzip.GzipFile(fileobj=raw, mode="rb")
    return io.BufferedReader(_Counting(_Closing(gz, raw), budget, raw.tell), 1 << 16)  # type: ignore[arg-type]


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
