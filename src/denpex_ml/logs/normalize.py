"""Byte streams to clean text blocks: decoding, binary sniffing and line normalisation.

Text is processed in blocks of complete lines (about 1 MiB each) so that all per-character
work runs in C (``str.replace``, compiled regexes) and memory stays flat however long the
input is. A line longer than ``max_line_chars`` is cut and the rest of it skipped while
streaming, so a gigabyte without a newline never sits in memory.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from typing import BinaryIO

from denpex_ml.errors import NotALogError

__all__ = ["BLOCK_CHARS", "collapse_cr", "iter_text_blocks", "looks_binary", "normalize_block", "sniff_encoding"]

BLOCK_CHARS = 1 << 20
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_CR_OVERWRITE = re.compile(r"[^\n]*\r(?=[^\n\r])")
_CONTROL = bytes(i for i in range(32) if i not in (9, 10, 12, 13, 27))
TRUNCATION_MARK = " …[line truncated]"


def sniff_encoding(head: bytes) -> str:
    """Encoding of a stream from its first bytes: a BOM selects UTF-16/UTF-8-sig, else UTF-8."""
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "utf-16"
    if head.startswith(b"\xef\xbb\xbf"):
        return "utf-8-sig"
    return "utf-8"


def looks_binary(head: bytes) -> bool:
    """True when the first bytes are not text: many NUL/control bytes (UTF-16 with BOM is text)."""
    if not head or sniff_encoding(head) == "utf-16":
        return False
    sample = head[:8192]
    controls = len(sample) - len(sample.translate(None, _CONTROL))
    return controls > 0.10 * len(sample)


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
    """What a terminal shows of a line redrawn with carriage returns: its last non-empty part.

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

    Raises :class:`NotALogError` when the stream is binary.
    """
    buffered = stream if isinstance(stream, io.BufferedReader) else io.BufferedReader(stream, 1 << 16)  # type: ignore[type-var]
    head = buffered.peek(8192)[:8192]
    if looks_binary(head):
        raise NotALogError(f"{name}: not a text log (binary content in the first {len(head)} bytes)")
    encoding = sniff_encoding(head)
    reader = io.TextIOWrapper(buffered, encoding=encoding, errors="replace", newline="")
    carry = ""
    skipping = False  # inside an over-long line whose tail is being skipped
    while True:
        chunk = reader.read(block_chars)
        if not chunk:
            break
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


def _cap_lines(block: str, max_line_chars: int) -> str:
    if len(block) <= max_line_chars:
        return block
    # Fast path: only split when some line can be too long.
    lines = block.split("\n")
    if max(map(len, lines)) <= max_line_chars:
        return block
    return "\n".join(line if len(line) <= max_line_chars else line[:max_line_chars] + TRUNCATION_MARK for line in lines)
