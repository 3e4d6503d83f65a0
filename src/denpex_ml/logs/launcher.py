"""Launcher error summaries, e.g. torchelastic's ``ChildFailedError`` table.

torchelastic prints, when a worker dies::

    Root Cause (first observed failure):
    [0]:
      time      : 2024-04-19_10:42:31
      host      : node-a
      rank      : 3 (local_rank: 3)
      exitcode  : -9 (pid: 12345)
      error_file: <N/A>
      traceback : Signal 9 (SIGKILL) received by PID 12345

The "first observed failure" is what the agent saw first, which is often not the rank
that broke first (a rank killed by the watchdog can be reported); the model treats it
as one piece of evidence among others.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["FailureRecord", "LauncherParser", "LauncherSummary"]

_FIELD = re.compile(r"^\s*(time|host|rank|exitcode|error_file|traceback)\s*:\s*(.*?)\s*$")
_RANK = re.compile(r"(-?\d+)(?:\s*\(local_rank:\s*(\d+)\))?")
_EXIT = re.compile(r"(-?\d+)(?:\s*\(pid:\s*(\d+)\))?")
_SIGNAL = re.compile(r"Signal (\d+) \((SIG[A-Z]+)\)")


@dataclass
class FailureRecord:
    """One failed worker as reported by the launcher."""

    rank: int | None = None
    local_rank: int | None = None
    exitcode: int | None = None
    host: str | None = None
    time: str | None = None
    signal: str | None = None
    traceback: str | None = None

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


@dataclass
class LauncherSummary:
    """The launcher's own error report: the root-cause record and the other failures."""

    root_cause: FailureRecord | None = None
    failures: list[FailureRecord] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {
            "root_cause": self.root_cause.to_dict() if self.root_cause else None,
            "failures": [f.to_dict() for f in self.failures],
        }


class LauncherParser:
    """Incremental parser fed one (prefix-stripped) line at a time."""

    def __init__(self) -> None:
        self.summary: LauncherSummary | None = None
        self._section: str | None = None
        self._current: FailureRecord | None = None
        self._budget = 0

    @property
    def open(self) -> bool:
        """A summary has started and its next lines are still read as its fields."""
        return self._section is not None

    def close(self) -> None:
        """End the open section, if any (its file has ended)."""
        self._section = None
        self._current = None

    def feed(self, line: str) -> None:
        if "Root Cause (first observed failure)" in line:
            self._start("root")
            return
        if line.strip() == "Failures:":
            self._start("failures")
            return
        if self._section is None:
            return
        self._budget -= 1
        if self._budget < 0:
            self._section = None
            return
        m = _FIELD.match(line)
        if not m:
            return
        key, value = m.groups()
        rec = self._current
        if rec is None or (key == "time" and rec.time is not None):
            rec = self._new_record()
        if key == "rank":
            rm = _RANK.match(value)
            if rm:
                rec.rank = int(rm.group(1))
                rec.local_rank = int(rm.group(2)) if rm.group(2) else None
        elif key == "exitcode":
            em = _EXIT.match(value)
            if em:
                rec.exitcode = int(em.group(1))
        elif key == "host":
            rec.host = value
        elif key == "time":
            rec.time = value
        elif key == "traceback":
            rec.traceback = value
            sm = _SIGNAL.search(value)
            if sm:
                rec.signal = sm.group(2)

    def _start(self, section: str) -> None:
        if self.summary is None:
            self.summary = LauncherSummary()
        self._section = section
        self._current = None
        self._budget = 40

    def _new_record(self) -> FailureRecord:
        rec = FailureRecord()
        assert self.summary is not None
        if self._section == "root" and self.summary.root_cause is None:
            self.summary.root_cause = rec
        else:
            self.summary.failures.append(rec)
        self._current = rec
        return rec
