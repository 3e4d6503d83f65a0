"""Transient faults that the log shows recovering are not the cause of the job's failure.

An InfiniBand port that flaps (``Got async event: port error``) and comes back (``port active``
on the same HCA port, nothing failing in between) is what NCCL's retries exist for: a job that
failed hours later failed of something else. Practitioners read past such a pair; the
fingerprint hits of a recovered pair are dropped before they become evidence, so the error
that actually ended the job is the one the model weighs. A port that errs again after coming
back, or never comes back, stays evidence.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from denpex_ml.features.fingerprints import FingerprintHit
from denpex_ml.logs.bundle import LogLine

__all__ = ["drop_recovered"]

_PORT_EVENT = re.compile(r"NET/IB ?: ?(\S+) Got async (?:error )?event ?[-:] ?(port error|port active)")


def _recovered_lines(lines: Sequence[LogLine]) -> set[tuple[str, int]]:
    """``(source, lineno)`` of every port-error line followed by ``port active`` on the same
    stream and HCA port before any further error there, and of that ``port active`` line."""
    recovered: set[tuple[str, int]] = set()
    open_errors: dict[tuple[object, str], list[LogLine]] = {}
    for line in lines:
        if "Got async" not in line.text:
            continue
        m = _PORT_EVENT.search(line.text)
        if m is None:
            continue
        key = (line.stream, m.group(1))
        if m.group(2) == "port error":
            open_errors.setdefault(key, []).append(line)
        elif open_errors.get(key):
            recovered.update((e.source, e.lineno) for e in open_errors.pop(key))
            recovered.add((line.source, line.lineno))
    return recovered


def drop_recovered(hits: list[FingerprintHit], lines: Sequence[LogLine]) -> list[FingerprintHit]:
    """``hits`` without those on lines of a fault the log shows recovering (see the module).

    ``lines`` are the job's retained lines, each stream in order.
    """
    if not any("Got async" in h.line.text for h in hits):
        return hits
    recovered = _recovered_lines(lines)
    if not recovered:
        return hits
    return [h for h in hits if (h.line.source, h.line.lineno) not in recovered]
