"""The result of ingestion: one job's masked log lines, split per rank, bounded in size."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from denpex_ml.logs.launcher import LauncherSummary
from denpex_ml.logs.system import SystemLine
from denpex_ml.logs.timestamps import parse_timestamp

__all__ = ["GLOBAL_STREAM", "LogBundle", "LogLine", "RankLog", "StreamKey"]

#: Key of the stream that holds lines no rank can be assigned to (launcher output, kernel...).
GLOBAL_STREAM = "global"

#: A stream is a global rank (int) or a named stream: ``"global"``, ``"node-1"``, ``"node-1:pid1234"``.
StreamKey = int | str


@dataclass(frozen=True, slots=True)
class LogLine:
    """One masked line: where it came from and its text without the launcher prefix."""

    stream: StreamKey
    source: str
    lineno: int
    text: str
    host: str | None = None
    salient: bool = False

    @property
    def rank(self) -> int | None:
        return self.stream if isinstance(self.stream, int) else None

    @property
    def timestamp(self) -> float | None:
        """Seconds of the line's timestamp, if it has one (parsed on demand)."""
        return parse_timestamp(self.text)


@dataclass
class RankLog:
    """The retained lines of one stream plus counts of everything that was read."""

    key: StreamKey
    lines: list[LogLine] = field(default_factory=list)
    n_lines: int = 0
    n_salient: int = 0
    hosts: set[str] = field(default_factory=set)

    @property
    def rank(self) -> int | None:
        return self.key if isinstance(self.key, int) else None

    @property
    def last_lines(self) -> list[LogLine]:
        return self.lines[-20:]

    def first_timestamp(self) -> float | None:
        return next((t for t in (ln.timestamp for ln in self.lines) if t is not None), None)

    def last_timestamp(self) -> float | None:
        return next((t for t in (ln.timestamp for ln in reversed(self.lines)) if t is not None), None)


@dataclass
class LogBundle:
    """One job's logs after ingestion.

    Attributes
    ----------
    streams:
        Retained lines per stream (global rank, host or ``"global"``), see :class:`RankLog`.
    launcher:
        The launcher's error summary (torchelastic ``Root Cause``), when printed.
    n_lines, n_bytes:
        Everything read, retained or not.
    formats:
        How many lines each launcher format matched (``torchrun``, ``srun``...).
    warnings:
        Skipped members (links, binaries) and other non-fatal findings.
    flight_recorder:
        PyTorch Flight Recorder dumps found among the job's files, by rank
        (:class:`~denpex_ml.logs.flight_recorder.FlightRecorderDump`, read without unpickling code).
    system:
        Masked hardware lines of the job's kernel / ``nvidia-smi`` / DCGM members, with the host
        (pseudonym) each member belongs to (:class:`~denpex_ml.logs.system.SystemLine`).
    job_hosts, job_meta:
        The job's hosts (pseudonyms, in node order) and fields (``state``, ``start``...) from
        Slurm metadata among its files (``sacct -P`` output, a node list file).
    """

    streams: dict[StreamKey, RankLog] = field(default_factory=dict)
    launcher: LauncherSummary | None = None
    sources: list[str] = field(default_factory=list)
    n_lines: int = 0
    n_bytes: int = 0
    n_truncated_lines: int = 0
    formats: Counter[str] = field(default_factory=Counter)
    masked: dict[str, int] = field(default_factory=dict)
    n_hosts: int = 0
    warnings: list[str] = field(default_factory=list)
    flight_recorder: dict[int, Any] = field(default_factory=dict)
    system: list[SystemLine] = field(default_factory=list)
    job_hosts: list[str] = field(default_factory=list)
    job_meta: dict[str, str] = field(default_factory=dict)

    @property
    def ranks(self) -> list[int]:
        """Global ranks that have lines, sorted."""
        return sorted(k for k in self.streams if isinstance(k, int))

    @property
    def is_empty(self) -> bool:
        return self.n_lines == 0

    def rank(self, rank: int) -> RankLog:
        return self.streams[rank]

    @property
    def global_stream(self) -> RankLog | None:
        return self.streams.get(GLOBAL_STREAM)

    def iter_lines(self) -> Iterator[LogLine]:
        """All retained lines, stream by stream (ranks first, in order)."""
        for key in sorted(
            self.streams, key=lambda k: (not isinstance(k, int), str(k) if not isinstance(k, int) else k)
        ):
            yield from self.streams[key].lines

    def text(self) -> str:
        """Retained lines as one text, each with its stream key, e.g. for display."""
        return "\n".join(f"[{ln.stream}] {ln.text}" for ln in self.iter_lines())

    def summary(self) -> dict[str, object]:
        """Counts for display or JSON."""
        return {
            "sources": len(self.sources),
            "lines": self.n_lines,
            "bytes": self.n_bytes,
            "ranks": len(self.ranks),
            "streams": len(self.streams),
            "formats": dict(self.formats),
            "hosts": self.n_hosts,
            "truncated_lines": self.n_truncated_lines,
            "masked": dict(self.masked),
            "launcher_root_cause_rank": (
                self.launcher.root_cause.rank if self.launcher and self.launcher.root_cause else None
            ),
            "warnings": list(self.warnings),
        }
