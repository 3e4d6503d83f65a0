"""Line tables: a block of UTF-8 lines as an Arrow string array, matched by compiled kernels.

The ingestion fast path (:meth:`denpex_ml.logs.ingest._Builder._add_block_columnar`) asks
questions of every line of a block at once: does a regex match it, how long is its launcher
prefix, which host does an NCCL debug prefix name. Arrow's compute kernels answer them in C++
(RE2, the engine every masking and salience pattern is written for), so no line becomes a
Python object unless it is kept or masked.

A pattern is matched per line here and per block elsewhere; the two agree because no pattern
asked here can match a newline, uses ``^`` or ``$`` other than in multi-line mode, and RE2's
word boundaries and line anchors see a line start inside a block as they see a text start.
The equivalence test (``tests/logs/test_columnar_equivalence.py``) holds both paths to the
same output on every fixture and real log.

pyarrow (and numpy) are imported inside the functions: small inputs never use this path and never
pay the import, and a block whose lines start with no timestamp never builds an Arrow array.
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
        and the scan goes on at the next line, as :func:`~denpex_ml.logs.ingest._line_indices`."""
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

    def matches(self, pattern: str | bytes, rows: Any = None) -> npt.NDArray[np.bool_]:
        """Per line (or per line of ``rows``): does the RE2 ``pattern`` match anywhere in it."""
        import pyarrow.compute as pc

        if isinstance(pattern, bytes):
            pattern = pattern.decode()
        arr = self.arr if rows is None else self.arr.take(_indices(rows))
        return _bools(pc.match_substring_regex(arr, pattern))

    def contains(self, literal: str) -> npt.NDArray[np.bool_]:
        """Per line: does it contain ``literal``."""
        import pyarrow.compute as pc

        return _bools(pc.match_substring(self.arr, literal))

    def extract(self, pattern: str, rows: Any = None) -> dict[str, Any]:
        """Named groups of the first match of ``pattern`` in each line (or in lines ``rows``).

        A line without a match has nulls; a group that did not take part is an empty string.
        """
        import pyarrow.compute as pc

        arr = self.arr if rows is None else self.arr.take(_indices(rows))
        found = pc.extract_regex(arr, pattern)
        return {f.name: found.field(f.name) for f in found.type}

    def window(self, raw: bytes, width: int) -> npt.NDArray[np.uint8]:
        """The first ``width`` bytes of every line, one row per line (bytes after a line's end are
        the next lines', or the block's final newline)."""
        import numpy as np

        data = np.frombuffer(raw, dtype=np.uint8)
        at = self.starts[:, None] + np.arange(width)
        np.minimum(at, len(raw) - 1, out=at)
        rows: npt.NDArray[np.uint8] = data[at]
        return rows


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


def _bools(arr: Any) -> npt.NDArray[np.bool_]:
    """An Arrow boolean array as numpy, unpacked from its bitmap (``to_numpy`` would go through
    pandas' conversion code, importing pandas: 40 MB of resident memory)."""
    import numpy as np

    if arr.null_count:  # pragma: no cover - the kernels above give nulls only for null input
        arr = arr.fill_null(False)
    n = len(arr)
    if not n:
        return np.zeros(0, dtype=np.bool_)
    bits = np.frombuffer(arr.buffers()[1], dtype=np.uint8)
    out: npt.NDArray[np.bool_] = np.unpackbits(bits, bitorder="little")[arr.offset : arr.offset + n].view(np.bool_)
    return out


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


def to_ints(arr: Any, default: int) -> npt.NDArray[np.int64]:
    """Decimal strings (ASCII digits) as ints; empty strings and nulls become ``default``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    empty = pc.fill_null(pc.equal(pc.binary_length(arr), 0), True)
    filled = pc.if_else(empty, pa.scalar(str(default)), arr)
    return _ints(pc.cast(filled, pa.int64()))
