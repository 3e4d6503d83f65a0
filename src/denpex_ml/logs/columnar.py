"""Line tables: a block of UTF-8 lines asked questions all at once, by compiled engines.

The ingestion fast path (:meth:`denpex_ml.logs.columnar_builder.ColumnarBuilder._add_block_columnar`) needs, for
every line of a block, its offsets, its timestamp and launcher prefix, and whether the masking
gate, the salience pattern or a rank hint matches in it. Offsets, ISO timestamps and
``[rankN]:`` prefixes come from numpy over the bytes (a window of each line's first bytes);
regex questions from one RE2 scan of the whole block with a compiled pattern kept across blocks
(:meth:`LineTable.scan`). No line becomes a Python object unless it is masked or kept.

A line is flagged when a match starts in it, as the reference path flags it (one search per
line from the line's start); no pattern asked here can match a newline, so a match never runs
into the next line. The equivalence test
(``tests/logs/test_columnar_equivalence.py``) holds both paths to the same output on every
fixture and real log.

numpy is imported inside the functions: small inputs never take this path and never pay the
import. (Arrow's string kernels were tried: each call compiles its pattern again and costs
about 1.5 ms per 7,000 lines before matching anything, and importing pyarrow adds 0.3 s and
35 MB; one warm RE2 scan of the block is as fast and costs neither.)
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import re2

from denpex_ml.logs.normalize import TRUNCATION_MARK, collapse_cr
from denpex_ml.logs.patterns import ISO_TS_PREFIX, retention_templates

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "SPACE_OR_HIGH",
    "TRUNCATION_MARK_B",
    "Block",
    "LineTable",
    "StreamRetention",
    "iso_timestamps",
    "line_indices",
    "matching_line_ends",
    "matching_lines",
    "rank_prefixes",
]


class LineTable:
    """The lines of ``raw`` (UTF-8 bytes ending in a newline): where each starts and ends."""

    __slots__ = ("ends", "n", "raw", "starts")

    def __init__(self, raw: bytes) -> None:
        import numpy as np

        data = np.frombuffer(raw, dtype=np.uint8)
        ends = np.flatnonzero(data == 10)
        n = len(ends)
        starts = np.empty(n, dtype=np.int64)
        if n:
            starts[0] = 0
            starts[1:] = ends[:-1] + 1
        self.raw = raw
        self.n = n
        self.starts = starts
        self.ends = ends

    def scan(self, pattern: bytes, options: Any = None) -> npt.NDArray[np.bool_]:
        """Per line: does the RE2 ``pattern`` match in it. One scan of the whole block by a
        compiled pattern kept across blocks (its DFA stays warm), one call per matching line
        (:func:`matching_line_ends`), the scan going on at the next line (as
        :func:`line_indices` steps)."""
        import numpy as np

        found = matching_line_ends(pattern, self.raw, options)
        hit = np.zeros(self.n, dtype=np.bool_)
        if found:
            hit[np.searchsorted(self.ends, np.array(found, dtype=np.int64))] = True
        return hit

    def window(self, raw: bytes, width: int, rows: Any = None, skip: Any = None) -> npt.NDArray[np.uint8]:
        """The first ``width`` bytes of every line (of lines ``rows``, after their first ``skip``
        bytes), one row per line. Bytes after a line's end are the next lines', or the block's
        final newline: a pattern read in them must hold no newline."""
        import numpy as np
        from numpy.lib.stride_tricks import sliding_window_view

        data = np.frombuffer(raw, dtype=np.uint8)
        first = self.starts if rows is None else self.starts[rows]
        if skip is not None:
            first = first + skip
        size = len(raw)
        if size < width:
            return self._window_by_index(data, first, width)
        # rows of the block's sliding windows (no index per byte); a window that would run past
        # the end reads the last byte there, as the index path does
        out: npt.NDArray[np.uint8] = sliding_window_view(data, width)[np.minimum(first, size - width)]
        late = np.flatnonzero(first > size - width)
        if len(late):
            out[late] = self._window_by_index(data, first[late], width)
        return out

    @staticmethod
    def _window_by_index(data: Any, first: Any, width: int) -> npt.NDArray[np.uint8]:
        """:meth:`window` by an index per byte (bytes past the end: the last byte)."""
        import numpy as np

        at = first[:, None] + np.arange(width)
        np.minimum(at, len(data) - 1, out=at)
        out: npt.NDArray[np.uint8] = data[at]
        return out


def matching_lines(pattern: bytes, raw: bytes, options: Any = None) -> list[tuple[int, int]]:
    """Per line of ``raw`` in which the RE2 ``pattern`` starts a match: (where the first match
    starts, where the line ends: its newline or the end of ``raw``). One scan by a compiled
    ``(?:pattern)[^\\n]*`` kept across calls (its DFA stays warm), which ends every match at the end
    of the line where it starts: each matching line costs one call, no match object, and the scan
    goes on at the next line. No pattern asked here can match a newline."""
    match = _line_regex(pattern, options)._regexp.Match
    size = len(raw)
    found: list[tuple[int, int]] = []
    pos = 0
    while pos < size:
        start, stop = match(_UNANCHORED, raw, pos, size)[0]
        if start == -1:
            break
        found.append((start, stop))
        pos = stop + 1
    return found


def matching_line_ends(pattern: bytes, raw: bytes, options: Any = None) -> list[int]:
    """Where each line of ``raw`` in which the RE2 ``pattern`` starts a match ends (its newline, or
    the end of ``raw``): the lines :func:`matching_lines` finds, by a compiled
    ``(?:[^\\n]*\\n)*?[^\\n]*?(?:pattern)[^\\n]*`` anchored where the scan stands. That match skips
    the lines without one, ends at the end of the first line with one, and starts where it is
    asked to: RE2 needs no backward pass to find where it starts, as it does for an unanchored
    search (about a fifth faster). No pattern asked here can match a newline. Text that is not
    ASCII goes by :func:`matching_lines` (in UTF-8 mode ``[^\\n]`` skips no invalid byte)."""
    if not raw.isascii():
        return [stop for _, stop in matching_lines(pattern, raw, options)]
    match = _line_end_regex(pattern, options)._regexp.Match
    size = len(raw)
    found: list[int] = []
    pos = 0
    while pos < size:
        stop = match(_ANCHOR_START, raw, pos, size)[0][1]
        if stop == -1:
            break
        found.append(stop)
        pos = stop + 1
    return found


def line_indices(pattern: Any, block: bytes) -> set[int]:
    """Indices of the lines of ``block`` (UTF-8 bytes) in which ``pattern`` (an RE2 pattern compiled
    with the default options, or a masking detector) starts a match: one scan of the block, no
    match objects."""
    if hasattr(pattern, "line_starts"):
        marks = pattern.line_starts(block)
    else:
        marks = matching_line_ends(pattern.pattern, block)  # a line's end is in it as its start is
    found: set[int] = set()
    line = 0
    pos = 0
    for at in marks:
        line += block.count(b"\n", pos, at)
        pos = at
        found.add(line)
    return found


_LINE_REGEXES: dict[tuple[bytes, int], Any] = {}
_LINE_END_REGEXES: dict[tuple[bytes, int], Any] = {}
_UNANCHORED = re2._Anchor.UNANCHORED
_ANCHOR_START = re2._Anchor.ANCHOR_START


def _line_end_regex(pattern: bytes, options: Any) -> Any:
    return _compiled(_LINE_END_REGEXES, b"(?:[^\n]*\n)*?[^\n]*?(?:", pattern, options)


def _line_regex(pattern: bytes, options: Any) -> Any:
    return _compiled(_LINE_REGEXES, b"(?:", pattern, options)


def _compiled(cache: dict[tuple[bytes, int], Any], head: bytes, pattern: bytes, options: Any) -> Any:
    """``head + pattern + b")[^\n]*"`` compiled by RE2, kept in ``cache`` (its DFA stays warm)."""
    key = (pattern, id(options))
    rx = cache.get(key)
    if rx is None:
        if len(cache) > 64:  # learned-host patterns change as hosts are learned
            cache.clear()
        whole = head + pattern + b")[^\n]*"
        rx = cache[key] = re2.compile(whole) if options is None else re2.compile(whole, options=options)
    return rx


_TS_AT_START = re.compile(ISO_TS_PREFIX.encode())


def iso_timestamps(win: Any, raw: bytes, starts: Any) -> Any:
    """Length of the ISO timestamp (``ISO_TS_PREFIX``) at the start of each line, 0 where none, from
    the first bytes of the lines (``win``). The pattern is read left to right taking every
    optional part that is there: no later part can match where an optional part could have,
    so that is what Python's backtracking ``re`` finds too. A line whose fraction or blank run
    reaches the end of the window is read by ``re`` itself."""
    import numpy as np

    n, width = win.shape
    rows = np.arange(n)
    w = win.astype(np.int64)
    digit = (w >= 48) & (w <= 57)

    def at(k: Any) -> Any:
        return w[rows, np.minimum(k, width - 1)]

    def dig(k: Any) -> Any:
        return digit[rows, np.minimum(k, width - 1)]

    p = (w[:, 0] == 91).astype(np.int64)  # "["
    ok = np.ones(n, dtype=np.bool_)
    for k, want in enumerate(b"dddd-dd-ddTdd:dd:dd"):
        if want == 100:  # "d"
            ok &= dig(p + k)
        elif want == 84:  # "T" or " "
            ok &= (at(p + k) == 84) | (at(p + k) == 32)
        else:
            ok &= at(p + k) == want
    p = p + 19
    # fraction: [.,] and a run of digits
    frac = ((at(p) == 46) | (at(p) == 44)) & dig(p + 1)
    run = np.zeros(n, dtype=np.int64)
    going = frac.copy()
    for k in range(1, width):
        going &= dig(p + k)
        if not going.any():
            break
        run += going
    p = p + np.where(frac, 1 + run, 0)
    unsure = frac & (p >= width - 8)
    # zone: Z, or [+-]dd:?dd
    sign = (at(p) == 43) | (at(p) == 45)
    colon = at(p + 3) == 58
    zone = np.where(
        at(p) == 90,
        1,
        np.where(
            sign & dig(p + 1) & dig(p + 2) & colon & dig(p + 4) & dig(p + 5),
            6,
            np.where(sign & dig(p + 1) & dig(p + 2) & ~colon & dig(p + 3) & dig(p + 4), 5, 0),
        ),
    )
    p = p + zone
    p = p + (at(p) == 93)  # "]"
    p = p + (at(p) == 58)  # ":"
    blank = np.zeros(n, dtype=np.int64)
    going = np.ones(n, dtype=np.bool_)
    for k in range(width):
        c = at(p + k)
        going &= (c == 32) | (c == 9)
        if not going.any():
            break
        blank += going
    ok &= blank > 0
    unsure |= ok & (p + blank >= width - 1)
    out = np.where(ok, p + blank, 0)
    for i in np.flatnonzero(unsure).tolist():  # a long fraction or blank run: the pattern itself
        s = int(starts[i])
        m = _TS_AT_START.match(raw, s, raw.find(b"\n", s))
        out[i] = m.end() - s if m else 0
    return out


_RANK_WORD = int.from_bytes(b"[rank", "little")  # the first bytes of a line, read as one little-endian word
_DEFAULT_WORD = int.from_bytes(b"[default", "little")


def rank_prefixes(head: Any) -> tuple[Any, Any, Any]:
    """``[rankN]:`` / ``[defaultN]:`` (then one optional space) at the start of each line, from
    the first bytes of the lines (at least 18 a line): (timestamp length: zeros, prefix length,
    rank or -1). A line's first 8 bytes are read as one word; the digits column by column."""
    import numpy as np

    n = len(head)
    pre = np.zeros(n, dtype=np.int64)
    ranks = np.full(n, -1, dtype=np.int64)
    if not n:
        return np.zeros(n, dtype=np.int64), pre, ranks
    first = np.ascontiguousarray(head[:, :8]).view("<u8").ravel()
    for rows, off in (
        (np.flatnonzero((first & 0xFFFFFFFFFF) == _RANK_WORD), 5),
        (np.flatnonzero(first == _DEFAULT_WORD), 8),
    ):
        m = len(rows)
        if not m:
            continue
        h = head[:, off : off + 10] if m == n else head[rows, off : off + 10]  # up to 7 digits, "]", ":", " "
        digits = (h - np.uint8(48)).T.copy()  # a digit's value; any other byte is above 9
        value = np.zeros(m, dtype=np.int64)
        run = np.zeros(m, dtype=np.int64)  # leading digits, up to 7
        going = np.ones(m, dtype=np.bool_)
        for k in range(7):
            going &= digits[k] <= 9
            if k < 6:
                np.copyto(value, value * 10 + digits[k], where=going)
            run += going
        at = np.arange(m)
        ok = (run >= 1) & (run <= 6) & (h[at, run] == 93) & (h[at, run + 1] == 58)
        space = h[at, run + 2] == 32
        where = slice(None) if m == n else rows
        pre[where] = np.where(ok, off + run + 2 + space, 0)
        ranks[where] = np.where(ok, value, -1)
    return np.zeros(n, dtype=np.int64), pre, ranks


TRUNCATION_MARK_B = TRUNCATION_MARK.encode()
#: first bytes of a line that may be blank (str.isspace): ASCII white space, or a non-ASCII character
SPACE_OR_HIGH = bytes([9, 10, 11, 12, 13, 28, 29, 30, 31, 32, *range(128, 256)])


class Block:
    """A columnar block's bytes and line table, kept while stream tails point into it."""

    __slots__ = ("ends", "hosts", "lineno", "pre_len", "raw", "salient", "source", "starts", "texts", "ts_len")

    def __init__(self, raw: bytes, starts: Any, ends: Any, ts_len: Any, pre_len: Any, source: str, lineno: int) -> None:
        self.raw = raw
        self.starts = starts
        self.ends = ends
        self.ts_len = ts_len
        self.pre_len = pre_len
        self.source = source
        self.lineno = lineno
        self.texts: dict[int, str] = {}  # masked lines (before carriage returns are collapsed)
        self.salient: Any = None
        self.hosts: dict[int, str] | None = None  # host pseudonyms of NCCL debug lines (per-rank files)

    def raw_line(self, i: int) -> str:
        return self.raw[int(self.starts[i]) : int(self.ends[i])].decode("utf-8", "replace")

    def rest(self, i: int) -> str:
        """The line after its timestamp and rank prefix."""
        cut = int(self.starts[i] + self.ts_len[i] + self.pre_len[i])
        return self.raw[cut : int(self.ends[i])].decode("utf-8", "replace")

    def joined(self, idx: list[int]) -> bytes:
        """The lines without their rank prefix (a timestamp before it stays), unmasked, as UTF-8
        joined by newlines."""
        raw = self.raw
        s = self.starts[idx].tolist()
        e = self.ends[idx].tolist()
        t = self.ts_len[idx].tolist()
        p = self.pre_len[idx].tolist()
        return b"\n".join(
            [
                raw[a:b] if not pl else raw[a + pl : b] if not tl else raw[a : a + tl] + raw[a + tl + pl : b]
                for a, b, tl, pl in zip(s, e, t, p, strict=True)
            ]
        )

    def raw_texts(self, idx: list[int]) -> list[str]:
        """The lines without their rank prefix (a timestamp before it stays), unmasked."""
        if not idx:
            return []
        return self.joined(idx).decode("utf-8", "replace").split("\n")  # no line holds a newline

    def lines(self, idx: list[int]) -> list[str]:
        """Lines ``idx`` as kept: masked text where masked, else decoded at once; progress-bar
        redraws collapsed."""
        if not idx:
            return []
        texts = self.texts
        it = iter(self.raw_texts([i for i in idx if i not in texts]) if texts else self.raw_texts(idx))
        out: list[str] = []
        for i in idx:
            text = texts.get(i)
            if text is None:
                text = next(it)
            out.append(collapse_cr(text) if "\r" in text else text)
        return out

    def items(self, idx: list[int]) -> list[tuple[str, int, str, str | None, bool]]:
        """Retention items of lines ``idx``: (source, line number, text, host, salient)."""
        if not idx:
            return []
        base = self.lineno + 1
        src = self.source
        sal = self.salient[idx].tolist()
        if self.hosts:
            host = self.hosts.get
            return [(src, base + i, text, host(i), s) for i, text, s in zip(idx, self.lines(idx), sal, strict=True)]
        return [(src, base + i, text, None, s) for i, text, s in zip(idx, self.lines(idx), sal, strict=True)]


@dataclass
class StreamRetention:
    """The lines one stream keeps (its head, salient lines and tail), bounded by :class:`Retention`;
    tail lines of recent blocks stay block indices until they are needed as strings."""

    head: list[tuple[str, int, str, str | None, bool]] = field(default_factory=list)
    tail: deque[tuple[str, int, str, str | None, bool]] = field(default_factory=deque)
    salient: list[tuple[str, int, str, str | None, bool]] = field(default_factory=list)
    templates: dict[str, int] = field(default_factory=dict)
    n_lines: int = 0
    n_salient: int = 0
    hosts: set[str] = field(default_factory=set)
    #: tail lines not yet made into strings: (block, line indices), oldest first, at most ``tail`` in all
    pending: list[tuple[Block, Any]] = field(default_factory=list)
    n_pending: int = 0

    def defer_tail(self, blk: Block, idx: Any, maxlen: int) -> None:
        """Append lines of ``blk`` to the tail, as ``deque(maxlen).extend`` would, without making them strings."""
        if maxlen == 0 or not len(idx):
            return
        self.pending.append((blk, idx))
        self.n_pending += len(idx)
        while self.n_pending - len(self.pending[0][1]) >= maxlen:
            self.n_pending -= len(self.pending.pop(0)[1])
        if self.n_pending > maxlen:
            b, first = self.pending[0]
            self.pending[0] = (b, first[self.n_pending - maxlen :])
            self.n_pending = maxlen

    def flush_tail(self, keep: Collection[int] = ()) -> None:
        """The deferred tail lines of every block not in ``keep`` (ids of blocks) become strings (in order)."""
        done = 0
        for b, idx in self.pending:
            if id(b) in keep:
                break
            self.tail.extend(b.items(idx.tolist()))
            self.n_pending -= len(idx)
            done += 1
        del self.pending[:done]

    def offer_salient(self, item: tuple[str, int, str, str | None, bool], cap: int, per_template: int) -> None:
        """Keep a salient line unless the budget is spent or its template was kept often enough."""
        if len(self.salient) >= cap:
            return
        self.offer_templated(item, retention_templates([item[2]])[0], per_template)

    def offer_templated(self, item: tuple[str, int, str, str | None, bool], tpl: str, per_template: int) -> None:
        """:meth:`offer_salient` with the line's template already made (and the budget checked)."""
        seen = self.templates.get(tpl, 0)
        self.templates[tpl] = seen + 1
        if seen < per_template:
            self.salient.append(item)
