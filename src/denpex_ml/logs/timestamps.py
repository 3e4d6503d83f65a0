"""Timestamps in log lines, parsed to seconds so events across ranks can be ordered.

Formats: ISO 8601 (``2024-04-19T10:42:28.858Z``, ``2024-04-19 10:42:28,858``), glog
(``E0419 10:42:28.858931`` - no year; the year 2000 is assumed, so only ordering within
one job is meaningful), syslog (``Apr 19 10:42:28``), and bracketed variants of each.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

__all__ = ["parse_timestamp"]


_ISO = re.compile(r"(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?(Z|[+-]\d\d:?\d\d)?")
_GLOG = re.compile(r"(?<![\w])[IWEF](\d{1,2}?)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{1,9})")
_SYSLOG = re.compile(r"\b(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +(\d{1,2}) (\d\d):(\d\d):(\d\d)\b")
_MONTHS = {
    m: i + 1 for i, m in enumerate(["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"])
}
_GLOG_YEAR = 2000


def _frac(digits: str | None) -> float:
    return int(digits) / 10 ** len(digits) if digits else 0.0


def parse_timestamp(text: str, *, search_chars: int = 120) -> float | None:
    """Seconds since the epoch of the first timestamp in the first ``search_chars`` characters.

    >>> parse_timestamp("[rank3]:[E419 10:42:28.858931807 ProcessGroupNCCL.cpp:616] x") is not None
    True
    >>> parse_timestamp("no time here") is None
    True
    """
    head = text[:search_chars]
    m = _ISO.search(head)
    if m:
        y, mo, d, h, mi, s, frac, tz = m.groups()
        try:
            dt = datetime(int(y), int(mo), int(d), int(h), int(mi), int(s), tzinfo=UTC)
        except ValueError:
            return None
        offset = 0.0
        if tz and tz != "Z":
            sign = -1 if tz[0] == "-" else 1
            tzd = tz[1:].replace(":", "")
            offset = sign * (int(tzd[:2]) * 3600 + int(tzd[2:]) * 60)
        return dt.timestamp() + _frac(frac) - offset
    m = _GLOG.search(head)
    if m:
        mo, d, h, mi, s, frac = m.groups()
        try:
            dt = datetime(_GLOG_YEAR, int(mo), int(d), int(h), int(mi), int(s), tzinfo=UTC)
        except ValueError:
            return None
        return dt.timestamp() + _frac(frac)
    m = _SYSLOG.search(head)
    if m:
        mon, d, h, mi, s = m.groups()
        try:
            dt = datetime(_GLOG_YEAR, _MONTHS[mon], int(d), int(h), int(mi), int(s), tzinfo=UTC)
        except ValueError:
            return None
        return dt.timestamp()
    return None
