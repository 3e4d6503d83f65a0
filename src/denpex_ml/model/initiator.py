"""Which rank failed first.

Evidence per rank, strongest first:

* a root-cause fingerprint of the diagnosed failure on that rank (earliest by timestamp
  when several ranks have one);
* a real exception on that rank while other ranks only report watchdog timeouts;
* the rank whose last collective is *behind* the others (lowest SeqNum) or that is
  silent while every other rank reports a timeout;
* the launcher's "Root Cause (first observed failure)", which is often a waiting rank,
  so it only breaks ties.

When nothing singles out one rank, the answer is ``None`` rather than a guess.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from denpex_ml.features.fingerprints import FingerprintHit
from denpex_ml.features.structure import StructureFeatures
from denpex_ml.logs.bundle import LogBundle
from denpex_ml.taxonomy import FingerprintRole

__all__ = ["InitiatorVerdict", "find_initiator"]


@dataclass(frozen=True)
class InitiatorVerdict:
    rank: int | None
    reason: str
    scores: dict[int, float]


def find_initiator(bundle: LogBundle, hits: list[FingerprintHit], structure: StructureFeatures, label: str | None) -> InitiatorVerdict:
    """Name the rank that failed first, or ``None`` when the log gives no basis."""
    ranks = bundle.ranks
    if not ranks:
        return InitiatorVerdict(None, "the log names no ranks", {})
    score: dict[int, float] = defaultdict(float)
    why: dict[int, list[str]] = defaultdict(list)
    first_ts: dict[int, float] = {}
    for h in hits:
        r = h.line.rank
        if r is None:
            continue
        if h.role is FingerprintRole.ROOT_CAUSE:
            bonus = 3.0 if h.entry_id == label else 1.0
            if bonus > score.get(r, 0.0) or not why[r]:
                why[r].append(f"root-cause evidence ({h.entry_id})")
            score[r] = max(score[r], bonus + h.weight)
            ts = h.line.timestamp
            if ts is not None and (r not in first_ts or ts < first_ts[r]):
                first_ts[r] = ts
    timeouts = {k for k in structure.watchdog_ranks if isinstance(k, int)}
    for key in structure.exception_ranks:
        if isinstance(key, int) and key not in timeouts:
            score[key] += 1.5
            why[key].append("raised an exception while others waited")
    coll = {k: c for k, c in structure.collectives.items() if isinstance(k, int)}
    if len(coll) >= 2:
        seqs = sorted({c.seq for c in coll.values()})
        if len(seqs) > 1:
            low = min(seqs)
            behind = [k for k, c in coll.items() if c.seq == low]
            if len(behind) < len(coll) / 2:
                for k in behind:
                    score[k] += 1.2
                    why[k].append(f"last collective behind the others (SeqNum {low})")
    if timeouts and len(timeouts) >= 2:
        silent = [r for r in ranks if r not in timeouts and r not in structure.exception_ranks]
        if len(silent) == 1:
            score[silent[0]] += 1.0
            why[silent[0]].append("silent while every other rank timed out")
    launcher = bundle.launcher
    if launcher and launcher.root_cause and launcher.root_cause.rank is not None:
        r = launcher.root_cause.rank
        score[r] += 0.3
        why[r].append("named by the launcher as first observed failure")
    if not score:
        return InitiatorVerdict(None, "no rank shows a failure of its own", {})
    best = max(score.values())
    top = [r for r, s in score.items() if s == best]
    if len(top) > 1:
        timed = [r for r in top if r in first_ts]
        if timed:
            top = [min(timed, key=lambda r: first_ts[r])]
    if len(top) > 1 or best < 1.0:
        return InitiatorVerdict(None, "several ranks look alike; no single first failure", dict(score))
    r = top[0]
    return InitiatorVerdict(r, "; ".join(dict.fromkeys(why[r])), dict(score))
