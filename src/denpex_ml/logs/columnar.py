"""Line tables: a block of UTF-8 lines asked questions all at once, by compiled engines.

The ingestion fast path (:meth:`denpex_ml.logs.ingest._Builder._add_block_columnar`) needs, for
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

from typing import TYPE_CHECKING, Any

import re2

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["LineTable"]


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
        compiled pattern kept across blocks (its DFA stays warm): ``(?:pattern)[^\\n]*`` ends
        every match at the end of the line where it starts, so each matching line costs one call
        and the scan goes on at the next line (as ``ingest._line_indices`` steps)."""
        import numpy as np

        match = _line_regex(pattern, options)._regexp.Match
        raw = self.raw
        size = len(raw)
        found: list[int] = []
        pos = 0
        while pos < size:
            start, stop = match(_UNANCHORED, raw, pos, size)[0]
            if start == -1:
                break
            found.append(stop)  # the newline that ends the line
            pos = stop + 1
        hit = np.zeros(self.n, dtype=np.bool_)
        if found:
            hit[np.searchsorted(self.ends, np.array(found, dtype=np.int64))] = True
        return hit

    def window(self, raw: bytes, width: int, rows: Any = None, skip: Any = None) -> npt.NDArray[np.uint8]:
        """The first ``width`` bytes of every line (of lines ``rows``, after their first ``skip``
        bytes), one row per line. Bytes after a line's end are the next lines', or the block's
        final newline: a pattern read in them must hold no newline."""
        import numpy as np

        data = np.frombuffer(raw, dtype=np.uint8)
        first = self.starts if rows is None else self.starts[rows]
        if skip is not None:
            first = first + skip
        at = first[:, None] + np.arange(width)
        np.minimum(at, len(raw) - 1, out=at)
        out: npt.NDArray[np.uint8] = data[at]
        return out


_LINE_REGEXES: dict[tuple[bytes, int], Any] = {}
_UNANCHORED = re2._Anchor.UNANCHORED


def _line_regex(pattern: bytes, options: Any) -> Any:
    key = (pattern, id(options))
    rx = _LINE_REGEXES.get(key)
    if rx is None:
        if len(_LINE_REGEXES) > 64:  # learned-host patterns change as hosts are learned
            _LINE_REGEXES.clear()
        whole = b"(?:" + pattern + b")[^\n]*"
        rx = _LINE_REGEXES[key] = re2.compile(whole) if options is None else re2.compile(whole, options=options)
    return rx
