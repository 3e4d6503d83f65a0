"""The HTML report of a scored archive: one self-contained file, no network at view time.

>>> from denpex_ml.report import build_report, write_report   # doctest: +SKIP
>>> write_report("results.jsonl", "report.html")              # doctest: +SKIP

``denpex-ml report RESULTS -o report.html`` is the same from the command line.
"""

from __future__ import annotations

from denpex_ml.report.html import MAX_BYTES, ReportInfo, build_report, write_report

__all__ = ["MAX_BYTES", "ReportInfo", "build_report", "write_report"]
