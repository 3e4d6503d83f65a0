"""Log ingestion: read any log source, mask it, and split it per rank.

>>> from denpex_ml.logs import read_logs
>>> bundle = read_logs(text="[rank0]: ok\\n[rank1]: RuntimeError: boom\\n")
>>> bundle.ranks
[0, 1]
"""

from __future__ import annotations

from denpex_ml.logs.bundle import GLOBAL_STREAM, LogBundle, LogLine, RankLog
from denpex_ml.logs.launcher import FailureRecord, LauncherSummary
from denpex_ml.logs.limits import IngestLimits, Retention
from denpex_ml.logs.masking import Masker
from denpex_ml.logs.prefixes import LINE_FORMATS, parse_prefix, rank_from_path
from denpex_ml.logs.readers import LogSource, read_logs
from denpex_ml.logs.timestamps import parse_timestamp

__all__ = [
    "GLOBAL_STREAM",
    "LINE_FORMATS",
    "FailureRecord",
    "IngestLimits",
    "LauncherSummary",
    "LogBundle",
    "LogLine",
    "LogSource",
    "Masker",
    "RankLog",
    "Retention",
    "parse_prefix",
    "parse_timestamp",
    "rank_from_path",
    "read_logs",
]
