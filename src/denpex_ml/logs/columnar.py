"""Line tables: a block of UTF-8 lines asked questions all at once, by compiled engines.

The ingestion fast path (:meth:`denpex_ml.logs.ingest._Builder._add_block_columnar`) needs, for
every line of a block, its offsets, its launcher prefix, and whether the masking gate, the
salience pattern or a rank hint matches in it. Offsets and ``[rankN]:`` prefixes come from
numpy over the bytes; regex questions from one RE2 scan of the whole block with a compiled
pattern kept across blocks (:meth:`LineTable.scan`); ISO timestamps at line starts from Arrow's
RE2 ``extract_regex`` kernel on the lines that may hold one. No line becomes a Python object
unless it is masked or kept.

A pattern is matched per line here and per block by the reference path; the two agree because
no pattern asked here can match a newline, and RE2's ``(?m:^)`` and word boundaries see a line
start inside a block as they see a text start. The equivalence test
(``tests/logs/test_columnar_equivalence.py``) holds both paths to the same output on every
fixture and real log.

numpy and pyarrow are imported inside the functions: small inputs never take this path and never
pay the imports, and pyarrow is loaded only for blocks with timestamped lines.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import re2

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["LineTable"]


class LineTable:
    """The lines of ``raw`` (UTF-8 bytes ending in a newline): their offsets, and on demand an
    Arrow string array of them without their newlines."""

    __slots__ = ("_arr", "ends", "n", "raw", "starts")

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
        self._arr: Any = None

    @property
    def arr(self) -> Any:
        """The lines as an Arrow ``StringArray`` (built, and pyarrow imported, on first use)."""
        if self._arr is None:
            import numpy as np
            import pyarrow as pa

            n = self.n
            offsets = np.empty(n + 1, dtype=np.int32)
            offsets[:n] = self.starts - np.arange(n)  # newlines removed from the data
            offsets[n] = len(self.raw) - n
            self._arr = pa.StringArray.from_buffers(
                n, pa.py_buffer(offsets), pa.py_buffer(self.raw.replace(b"\n", b""))
            )
        return self._arr

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

    def extract(self, pattern: str, rows: Any = None) -> dict[str, Any]:
        """Named groups of the first match of ``pattern`` in each line (or in lines ``rows``).

        A line without a match has nulls; a group that did not take part is an empty string.
        """
        import pyarrow.compute as pc

        arr = self.arr if rows is None else self.arr.take(_indices(rows))
        found = pc.extract_regex(arr, pattern)
        return {f.name: found.field(f.name) for f in found.type}

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


def _indices(rows: Any) -> Any:
    """Row numbers as an Arrow array, built on numpy's buffer (``pa.array`` would import pandas to check its input)."""
    import numpy as np
    import pyarrow as pa

    rows = np.ascontiguousarray(rows, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(rows), [None, pa.py_buffer(rows)])


def _ints(arr: Any) -> npt.NDArray[np.int64]:
    import numpy as np
    import pyarrow as pa

    if arr.type != pa.int64():
        arr = arr.cast(pa.int64())
    if arr.null_count:
        arr = arr.fill_null(0)
    values = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset : arr.offset + len(arr)]
    return values.copy()  # from the buffer, not to_numpy (which imports pandas)


def byte_lengths(arr: Any) -> npt.NDArray[np.int64]:
    """Byte length of each string (0 for a null)."""
    import pyarrow.compute as pc

    return _ints(pc.binary_length(arr))
