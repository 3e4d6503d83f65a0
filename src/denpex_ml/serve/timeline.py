"""Per-rank timelines for the page: the last lines each rank printed before it failed.

Built from the masked, retained lines of the bundle (ingestion keeps each rank's first, last
and salient lines), so nothing here reads the input again. A rank's timeline ends at its last
evidence line when it has one (what it printed up to the failure), else at its last line.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from denpex_ml.logs.bundle import LogBundle, LogLine, RankLog, StreamKey
from denpex_ml.model.diagnosis import Diagnosis

__all__ = ["rank_timelines"]

#: Lines shown per rank, ranks shown per job, characters shown per line.
LINES_PER_RANK = 12
MAX_RANKS = 16
LINE_CHARS = 2_000


def _when(line: LogLine) -> str | None:
    t = line.timestamp
    if t is None:
        return None
    try:
        return datetime.fromtimestamp(t, UTC).strftime("%H:%M:%S.%f")[:-3]
    except (OverflowError, OSError, ValueError):
        return None


def _order(bundle: LogBundle, d: Diagnosis) -> list[StreamKey]:
    """Streams worth showing first: the first failing rank, ranks with evidence, hang suspects, the rest."""
    keys: list[StreamKey] = []

    def add(key: StreamKey | None) -> None:
        if key is not None and key in bundle.streams and key not in keys:
            keys.append(key)

    add(d.initiating_rank)
    for ev in d.evidence:
        add(ev.rank if ev.rank is not None else ev.stream)
    if d.hang is not None:
        for r in d.hang.suspects:
            add(r)
    for key in sorted(bundle.streams, key=lambda k: (not isinstance(k, int), str(k).zfill(8))):
        add(key)
    return keys


def _timeline(stream: RankLog, evidence: dict[tuple[str, int], str], per_rank: int) -> dict[str, Any]:
    lines = stream.lines
    marks = [i for i, ln in enumerate(lines) if (ln.source, ln.lineno) in evidence]
    end = marks[-1] + 1 if marks else len(lines)
    shown = lines[max(0, end - per_rank) : end]
    return {
        "stream": str(stream.key),
        "rank": stream.rank,
        "lines_read": stream.n_lines,
        "has_evidence": bool(marks),
        "lines": [
            {
                "source": ln.source,
                "line": ln.lineno,
                "time": _when(ln),
                "text": ln.text[:LINE_CHARS],
                "evidence": evidence.get((ln.source, ln.lineno)),
            }
            for ln in shown
        ],
    }


def rank_timelines(
    bundle: LogBundle, d: Diagnosis, *, per_rank: int = LINES_PER_RANK, max_ranks: int = MAX_RANKS
) -> dict[str, Any]:
    """``{"ranks": [timeline, ...], "more": N}``: up to ``max_ranks`` streams, most telling first,
    each with its last ``per_rank`` lines up to its last evidence line (``evidence`` holds why a
    line counts, or None)."""
    evidence = {(ev.source, ev.line): ev.why for ev in d.evidence}
    keys = _order(bundle, d)
    return {
        "ranks": [_timeline(bundle.streams[k], evidence, per_rank) for k in keys[:max_ranks]],
        "more": max(0, len(keys) - max_ranks),
    }
