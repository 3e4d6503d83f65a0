"""Byte streams to clean text blocks: decoding, binary sniffing and line normalisation.

Text is processed in blocks of complete lines (about 1 MiB each) so that all per-character
work runs in C (``str.replace``, compiled regexes) and memory stays flat however long the
input is. A line longer than ``max_line_chars`` is cut and the rest of it skipped while
streaming, so a gigabyte without a newline never sits in memory.

Line endings: LF and CRLF end lines; a carriage return inside an LF-ended line is a
progress bar redrawn in place (see :func:`collapse_cr`). A stream whose first lines end in
CR alone (old Mac style) has CR read as the line ending instead.
"""

from __future__ import annotations

import codecs
import io
import re
import unicodedata
from collections.abc import Iterator
from typing import Any, BinaryIO

from denpex_ml.errors import NotALogError

__all__ = [
    "BLOCK_CHARS",
    "collapse_cr",
    "iter_blocks",
    "iter_text_blocks",
    "looks_binary",
    "normalize_block",
    "sniff_encoding",
]

BLOCK_CHARS = 1 << 20
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_CR_OVERWRITE = re.compile(r"[^\n]*\r(?=[^\n\r])")
_CONTROL = bytes(i for i in range(32) if i not in (9, 10, 12, 13, 27))
TRUNCATION_MARK = " …[line truncated]"


_TEXT_CONTROLS = frozenset("\t\n\r\f\x1b")
#: Character categories that text does not contain: controls, unassigned, private use, surrogates.
_NOT_TEXT = frozenset(("Cc", "Cn", "Co", "Cs"))


def sniff_encoding(head: bytes) -> str:
    r"""Encoding of a stream from its first bytes: UTF-16 or UTF-8-sig by their BOM, else UTF-8.

    A UTF-16 BOM counts only when the bytes after it decode as UTF-16 text (random bytes
    that happen to start with ``FF FE`` are not UTF-16).

    >>> sniff_encoding("\ufeffok\n".encode("utf-16-le"))
    'utf-16'
    >>> sniff_encoding(b"\xff\xfe\x00\xd8\x00\xd8")
    'utf-8'
    """
    if head.startswith((b"\xff\xfe", b"\xfe\xff")) and _is_utf16_text(head):
        return "utf-16"
    if head.startswith(b"\xef\xbb\xbf"):
        return "utf-8-sig"
    return "utf-8"


def _is_utf16_text(head: bytes) -> bool:
    codec = "utf-16-le" if head.startswith(b"\xff\xfe") else "utf-16-be"
    body = head[2:8194]
    try:
        text = codecs.getincrementaldecoder(codec)("strict").decode(body[: len(body) - len(body) % 2], final=False)
    except UnicodeDecodeError:
        return False
    bad = sum(1 for ch in text if ch not in _TEXT_CONTROLS and unicodedata.category(ch) in _NOT_TEXT)
    return bad <= 0.05 * len(text)


def _invalid_utf8(sample: bytes) -> int:
    """Bytes of ``sample`` that are not UTF-8 (about one per invalid byte; a cut last character is fine)."""
    text = codecs.getincrementaldecoder("utf-8")("replace").decode(sample, final=False)
    return text.count("\ufffd") - sample.count(b"\xef\xbf\xbd")


def looks_binary(head: bytes) -> bool:
    """True when the first bytes are not text.

    Binary: more than 10 % control bytes (NUL and the like; tab, newlines, form feed and
    ESC are text), or more than 3 % control bytes together with more than 20 % bytes that
    are not UTF-8 (random or compressed data has about 10 % and 40 %). Text in a legacy
    8-bit encoding has invalid UTF-8 but no control bytes, and stays text; UTF-16 with a
    BOM is text.

    >>> looks_binary(b"[rank0]: ok\\n")
    False
    >>> import os
    >>> looks_binary(os.urandom(8192))
    True
    """
    if not head or sniff_encoding(head) == "utf-16":
        return False
    sample = head[:8192]
    n = len(sample)
    controls = n - len(sample.translate(None, _CONTROL))
    if controls > 0.10 * n:
        return True
    return controls > 0.03 * n and _invalid_utf8(sample) > 0.20 * n


def normalize_block(block: str) -> str:
    """Drop NULs, turn CRLF into LF, strip ANSI escapes.

    Carriage returns inside a line (progress bars redrawn in place) are collapsed per line
    by :func:`collapse_cr`, after the launcher prefix has been read: torchrun's ``[rank3]:``
    is printed once per write, and redrawing must not erase it.
    """
    if "\x00" in block:
        block = block.replace("\x00", "")
    if "\r\n" in block:
        block = block.replace("\r\n", "\n")
    if "\x1b" in block:
        block = _ANSI.sub("", block)
    return block


def collapse_cr(text: str) -> str:
    r"""What a terminal shows of a line redrawn with carriage returns: its last non-empty part.

    >>> collapse_cr(" 10%|#  | 1/10\r100%|###| 10/10\r")
    '100%|###| 10/10'
    """
    if "\r" not in text:
        return text
    return _CR_OVERWRITE.sub("", text).replace("\r", "")


def iter_text_blocks(
    stream: BinaryIO, *, name: str, max_line_chars: int, block_chars: int = BLOCK_CHARS
) -> Iterator[str]:
    """Yield normalised blocks of complete lines (each ending in ``\\n``) from a binary stream.

    Every block is decoded (:func:`iter_blocks` leaves plain ASCII as bytes); this is the
    reference the equivalence tests hold :func:`iter_blocks` to.

    Raises :class:`NotALogError` when the stream is binary (see :func:`looks_binary`).
    """
    buffered = _open_text_stream(stream, name)
    yield from _decoded_blocks(buffered, sniff_encoding(buffered.peek(8192)[:8192]), max_line_chars, block_chars)


def iter_blocks(
    stream: BinaryIO, *, name: str, max_line_chars: int, block_chars: int = BLOCK_CHARS
) -> Iterator[str | bytes]:
    """:func:`iter_text_blocks`, with a block that is plain ASCII and needs no normalisation
    (no NUL, carriage return, escape or over-long line) yielded as the bytes read, undecoded.

    UTF-8 is cut at newlines as bytes (a newline byte is never part of a multi-byte
    character), so a block decodes on its own; only blocks holding other bytes are decoded
    and normalised as text. A log that is ASCII throughout (most machine output) is never
    decoded at all: ingestion reads such blocks as bytes
    (:meth:`denpex_ml.logs.ingest.Builder.add_block`).
    """
    buffered = _open_text_stream(stream, name)
    head = buffered.peek(8192)[:8192]
    encoding = sniff_encoding(head)
    if encoding == "utf-8" and b"\n" in head:  # LF-ended lines (the text reader's cr_only is False)
        yield from _utf8_blocks(buffered, max_line_chars, block_chars)
        return
    yield from _decoded_blocks(buffered, encoding, max_line_chars, block_chars)


def _open_text_stream(stream: BinaryIO, name: str) -> io.BufferedReader[Any]:
    buffered = stream if isinstance(stream, io.BufferedReader) else io.BufferedReader(stream, 1 << 16)  # type: ignore[type-var]
    head = buffered.peek(8192)[:8192]
    if looks_binary(head):
        raise NotALogError(f"{name}: not a text log (binary content in the first {len(head)} bytes)")
    return buffered


def _utf8_blocks(buffered: io.BufferedReader, max_line_chars: int, block_chars: int) -> Iterator[str | bytes]:
    """UTF-8 read as bytes and cut at newlines; a block that needs decoding or normalising is
    decoded and goes through :func:`normalize_block`, the others stay bytes."""
    carry = b""
    skipping = False  # inside an over-long line whose tail is being skipped
    while True:
        chunk = buffered.read(block_chars)
        if not chunk:
            break
        if skipping:
            nl = chunk.find(b"\n")
            if nl < 0:
                continue
            chunk = chunk[nl + 1 :]
            skipping = False
        data = carry + chunk if carry else chunk
        cut = data.rfind(b"\n")
        if cut < 0:
            carry = data
        else:
            carry = data[cut + 1 :]
            yield _clean_block(data[: cut + 1], max_line_chars)
        if len(carry) > max_line_chars:
            text = carry.decode("utf-8", "replace")
            if len(text) > max_line_chars:  # characters, as the text reader counts them
                yield normalize_block(text[:max_line_chars] + TRUNCATION_MARK + "\n")
                carry = b""
                skipping = True
    if carry:
        yield _clean_block(carry + b"\n", max_line_chars)


def _clean_block(raw: bytes, max_line_chars: int) -> str | bytes:
    plain = raw.isascii() and b"\r" not in raw and b"\x00" not in raw and b"\x1b" not in raw
    if plain and (
        len(raw) <= max_line_chars or _no_line_longer(raw, max_line_chars) or _longest_line(raw) <= max_line_chars
    ):
        return raw
    return normalize_block(_cap_lines(raw.decode("utf-8", "replace"), max_line_chars))


def _decoded_blocks(buffered: io.BufferedReader, encoding: str, max_line_chars: int, block_chars: int) -> Iterator[str]:
    reader = io.TextIOWrapper(buffered, encoding=encoding, errors="replace", newline="")
    carry = ""
    skipping = False  # inside an over-long line whose tail is being skipped
    cr_only: bool | None = None  # lines end in CR alone: decided by the first chunk with a line end
    held_cr = False  # a CR at the end of the last chunk (the next one may start with LF)
    while True:
        chunk = reader.read(block_chars)
        if not chunk:
            break
        if cr_only is None and ("\n" in chunk or "\r" in chunk):
            cr_only = "\n" not in chunk
        if cr_only:
            chunk, held_cr = _cr_lines(chunk, held_cr)
            if not chunk:
                continue
        if skipping:
            nl = chunk.find("\n")
            if nl < 0:
                continue
            chunk = chunk[nl + 1 :]
            skipping = False
        text = carry + chunk if carry else chunk
        cut = text.rfind("\n")
        if cut < 0:
            carry = text
        else:
            carry = text[cut + 1 :]
            yield normalize_block(_cap_lines(text[: cut + 1], max_line_chars))
        if len(carry) > max_line_chars:
            yield normalize_block(carry[:max_line_chars] + TRUNCATION_MARK + "\n")
            carry = ""
            skipping = True
    if carry:
        yield normalize_block(_cap_lines(carry + "\n", max_line_chars))
    reader.detach()  # the caller owns (and closes) the underlying stream


def _cr_lines(chunk: str, held_cr: bool) -> tuple[str, bool]:
    """A chunk of a CR-ended stream with CR and CRLF as LF; a CR at its end is held back."""
    if held_cr:
        chunk = "\r" + chunk
    held = chunk.endswith("\r")
    if held:
        chunk = chunk[:-1]
    return chunk.replace("\r\n", "\n").replace("\r", "\n"), held


def _cap_lines(block: str, max_line_chars: int) -> str:
    if len(block) <= max_line_chars:
        return block
    # Fast path: only split when some line can be too long. A line has at least as many UTF-8
    # bytes as characters, so newline positions in the bytes (numpy) clear most blocks unsplit.
    if _longest_line_bytes(block) <= max_line_chars:
        return block
    lines = block.split("\n")
    if max(map(len, lines)) <= max_line_chars:
        return block
    return "\n".join(line if len(line) <= max_line_chars else line[:max_line_chars] + TRUNCATION_MARK for line in lines)


def _longest_line_bytes(block: str) -> int:
    return _longest_line(block.encode("utf-8", "surrogatepass"))


def _no_line_longer(raw: bytes, limit: int) -> bool:
    """True when every run of ``limit // 2`` bytes from a multiple of it holds a newline: a line
    longer than ``limit`` would hold one such run whole. False says nothing (a few searches, no
    pass over the whole block: :func:`_longest_line` decides then)."""
    step = limit // 2
    if step < 1:
        return False
    find = raw.find
    return all(find(b"\n", at, at + step) >= 0 for at in range(0, len(raw), step))


def _longest_line(raw: bytes) -> int:
    import numpy as np

    data = np.frombuffer(raw, dtype=np.uint8)
    cuts = np.flatnonzero(data == 10)
    if not len(cuts):
        return len(data)
    return int(max(cuts[0], np.diff(cuts).max(initial=0) - 1, len(data) - 1 - cuts[-1]))
