"""Metered reading: every byte a source yields is counted against its :class:`ReadBudget`.

A :class:`_Gauge` records what one producer consumed and produced (a file, an in-memory
value, a decompressor); :class:`_Counting` charges the bytes read through it to the budget
and checks the size and compression-ratio limits as it streams; :class:`_Inflating`
decompresses gzip/bzip2/xz by feeding the standard library's decompressor objects
:data:`_FEED` bytes at a time, so the consumed count is exact and a bomb is refused early.
Archive walking (what the bytes mean) is :mod:`denpex_ml.logs.sources` and
:mod:`denpex_ml.logs.archives`.
"""

from __future__ import annotations

import bz2
import io
import lzma
import tarfile
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import BinaryIO, ClassVar, Protocol, cast

from denpex_ml.errors import ArchiveError, DenpexError, InputTooLargeError
from denpex_ml.logs.limits import IngestLimits
from denpex_ml.logs.names import display_name

__all__ = ["ReadBudget"]

#: gzip's two magic bytes and its only compression method, deflate (8, RFC 1952): two bytes
#: alone begin one random file in 65,536, which would then be read as a corrupt archive.
_GZIP_MAGIC = b"\x1f\x8b\x08"
_XZ_MAGIC = b"\xfd7zXZ\x00"
#: Most compressed bytes handed to a decompressor at once: the ratio is known to within this.
_FEED = 1024
#: Errors of the decompressors and archive readers (turned into :class:`ArchiveError`).
_DECODE_ERRORS = (EOFError, zlib.error, lzma.LZMAError, tarfile.TarError, zipfile.BadZipFile, OSError)


class _Gauge:
    """Bytes one producer consumed and produced: a file (or in-memory value) or a decompressor.

    A decompressor's ``root`` is the file it reads from, however deep: the root's
    ``produced`` sums everything decompressed from it, so nested compression is bounded too.
    """

    __slots__ = ("compressed", "consumed", "name", "produced", "root")

    def __init__(self, name: str, root: _Gauge | None = None, *, compressed: bool = False, consumed: int = 0) -> None:
        self.name = name
        self.root = root
        self.compressed = compressed
        self.consumed = consumed
        self.produced = 0


@dataclass
class ReadBudget:
    """Counts the bytes read from one source against the limits.

    ``read`` is every byte produced: plain files as read, and the output of every
    decompressor (at every depth of nesting).
    """

    limits: IngestLimits
    source: str
    read: int = 0
    members: int = 0
    warnings: list[str] = field(default_factory=list)

    def produce(self, gauge: _Gauge, n: int) -> None:
        """Count ``n`` bytes produced by ``gauge``; raises when a size or ratio limit is passed."""
        self._add(n)
        gauge.produced += n
        if gauge.compressed:
            self._check_ratio(gauge.produced, gauge.consumed, gauge.name)
        root = gauge.root
        if root is not None and root is not gauge:
            root.produced += n
            self._check_ratio(root.produced, root.consumed, root.name)

    def _add(self, n: int) -> None:
        self.read += n
        if self.read > self.limits.max_total_bytes:
            raise InputTooLargeError(
                f"{display_name(self.source)}: more than {self.limits.max_total_bytes} uncompressed bytes "
                "(IngestLimits.max_total_bytes)"
            )

    def _check_ratio(self, produced: int, consumed: int, name: str) -> None:
        lim = self.limits
        if produced > lim.ratio_min_bytes and produced > lim.max_compression_ratio * max(consumed, 1):
            where, shown = display_name(self.source), display_name(name)
            if not where.endswith(shown):  # a member, or a file of a directory
                where = f"{where}: {shown}"
            raise InputTooLargeError(
                f"{where}: decompression ratio above {lim.max_compression_ratio:g} "
                f"({produced} bytes from {consumed} compressed; IngestLimits.max_compression_ratio): "
                "refusing a possible archive bomb"
            )

    def add_member(self, name: str) -> None:
        self.members += 1
        if self.members > self.limits.max_members:
            raise InputTooLargeError(
                f"{display_name(self.source)}: more than {self.limits.max_members} files (IngestLimits.max_members)"
            )


class _Metered(io.RawIOBase):
    """Reads ``inner`` at most ``feed`` bytes at a time, counting them as consumed by ``gauge``."""

    def __init__(self, inner: BinaryIO, gauge: _Gauge, feed: int = _FEED) -> None:
        self._inner = inner
        self._gauge = gauge
        self._feed = feed

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self._inner.read(min(len(b), self._feed))
        n = len(data)
        b[:n] = data
        self._gauge.consumed += n
        return n


class _Counting(io.RawIOBase):
    """A read-only stream that charges every byte it returns to a :class:`ReadBudget`.

    With ``gauge``, the bytes are the output of that producer (see :meth:`ReadBudget.produce`).
    Otherwise the stream is its own producer and ``compressed`` (when given) tells how many
    compressed bytes it has consumed so far (``None``: not compressed), for its ratio.
    Decompression errors become :class:`ArchiveError`.
    """

    def __init__(
        self,
        inner: BinaryIO,
        budget: ReadBudget,
        compressed: Callable[[], int | None] | None = None,
        *,
        gauge: _Gauge | None = None,
    ) -> None:
        self._inner = inner
        self._budget = budget
        self._compressed = compressed if gauge is None else None
        self._gauge = gauge or _Gauge(budget.source)

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
            n = self._inner.readinto(b) or 0  # type: ignore[attr-defined]  # straight into the caller's buffer: no copy
        except DenpexError:
            raise
        except _DECODE_ERRORS as exc:
            raise ArchiveError(
                f"{display_name(self._gauge.name)}: corrupt or truncated compressed data ({exc})"
            ) from None
        if n:
            if self._compressed is not None:
                consumed = self._compressed()
                self._gauge.compressed = consumed is not None
                self._gauge.consumed = consumed or 0
            self._budget.produce(self._gauge, n)
        return n


class _Inflating(io.RawIOBase):
    """The decompressed bytes of ``below`` (gzip, bzip2 or xz; concatenated streams too).

    The standard library's decompressor objects are fed at most :data:`_FEED` bytes at a
    time and only when they need input, so ``gauge.consumed`` is exact to within one feed
    (``gzip.GzipFile`` and friends read ahead, which would hide a bomb for longer).
    gzip trailers (CRC, size) are checked by zlib; zero padding and anything that is not
    another stream after the last one are ignored, as ``gzip``/``bz2``/``lzma`` do.
    """

    _MAGIC: ClassVar[dict[str, bytes]] = {"gzip": _GZIP_MAGIC, "bz2": b"BZh", "xz": _XZ_MAGIC}

    def __init__(self, below: BinaryIO, kind: str, gauge: _Gauge) -> None:
        self._below = below
        self._kind = kind
        self._gauge = gauge
        self._dec = self._decompressor()
        self._input = b""  # fed but not yet consumed (zlib's unconsumed tail, a next stream)
        self._done = False

    def readable(self) -> bool:
        return True

    def _decompressor(self) -> _Decompressor:
        if self._kind == "gzip":
            return cast(_Decompressor, zlib.decompressobj(16 + zlib.MAX_WBITS))
        if self._kind == "bz2":
            return cast(_Decompressor, bz2.BZ2Decompressor())
        return cast(_Decompressor, lzma.LZMADecompressor())

    def _feed(self) -> bytes:
        data = self._below.read(_FEED)
        self._gauge.consumed += len(data)
        return data

    def _next_stream(self) -> bool:
        """After the end of a stream: start the next one, if another follows."""
        rest = self._dec.unused_data
        magic = self._MAGIC[self._kind]
        while True:
            rest = rest.lstrip(b"\0")
            if len(rest) >= len(magic):
                break
            more = self._feed()
            if not more:
                rest = b""
                break
            rest += more
        if not rest.startswith(magic):
            return False
        self._dec = self._decompressor()
        self._input = rest
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        size = len(b)
        while size and not self._done:
            if self._dec.eof:
                if not self._next_stream():
                    self._done = True
                    break
                continue
            if self._input:
                data, self._input = self._input, b""
            elif self._kind == "gzip" or self._dec.needs_input:
                data = self._feed()
                if not data:
                    out = self._dec.decompress(b"", size)
                    if not out:
                        raise EOFError("compressed data ended before the end-of-stream marker")
                    b[: len(out)] = out
                    return len(out)
            else:
                data = b""
            out = self._dec.decompress(data, size)
            if self._kind == "gzip":
                self._input = self._dec.unconsumed_tail
            if out:
                b[: len(out)] = out
                return len(out)
        return 0


class _Decompressor(Protocol):
    """What :class:`_Inflating` uses of ``zlib``/``bz2``/``lzma`` decompressor objects."""

    eof: bool
    unused_data: bytes
    needs_input: bool
    unconsumed_tail: bytes

    def decompress(self, data: bytes, max_length: int = ...) -> bytes: ...


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


def _buffered(raw: io.RawIOBase) -> BinaryIO:
    return cast(BinaryIO, io.BufferedReader(raw, 1 << 16))


def _decompressing(below: BinaryIO, kind: str, name: str, budget: ReadBudget, root: _Gauge) -> BinaryIO:
    """The decompressed bytes of ``below``, counted: a new producer under ``root``."""
    gauge = _Gauge(name, root, compressed=True)
    return _buffered(_Counting(cast(BinaryIO, _Inflating(below, kind, gauge)), budget, gauge=gauge))
