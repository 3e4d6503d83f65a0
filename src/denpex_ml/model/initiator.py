"""Which rank failed first.

Evidence per rank, strongest first:

* a root-cause fingerprint of the diagnosed failure on that rank (earliest by timestamp
  when several ranks have one);
* a real exception on that rank while other ranks only report watchdog timeouts;
* the rank whose last collective is *behind* the others (lowest SeqNum) or that is
  silent while every other rank reports a timeout;
* the launcher's "Root Cause (first observed failure)", which is often a waiting rank,
  so it only breaks ties, and the worker the launcher saw fail when nothing else names one.

Lines without a rank prefix count for the rank their own words name (``did not receive
grad for rank 3``, torchelastic's ``failed (exitcode: -9) local_rank: 3``; see
:mod:`denpex_ml.model.rank_clues`).

When nothing singles out one rank, the answer is ``None`` rather than a guess.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

from denpex_ml.features.fingerprints import FingerprintHit
from denpex_ml.features.structure import StructureFeatures
from denpex_ml.logs.bundle import LogBundle
from denpex_ml.model.featurize import JobAnalysis
from denpex_ml.model.rank_clues import error_line_naming_rank, launcher_failed_worker, only_rank_named, rank_named_in
from denpex_ml.taxonomy import FingerprintRole, Taxonomy
from denpex_ml.taxonomy.groups import HANG_IDS

__all__ = ["InitiatorVerdict", "find_initiator", "initiating_rank"]

_TRACEBACK = "Traceback (most recent call last)"
# a line that reports an error of its own (an exception, a logger's error level, a fatal abort),
# or Python's last line of a traceback naming an exception class whose name says neither
# ("pyarrow.lib.ArrowInvalid: offset overflow …", "triton.runtime.errors.OutOfResources: …")
_ERROR_LINE = re.compile(
    r"\b\w*(?:Error|Exception)\b|\bFATAL\b|\bERROR\b|\[E\]|\bFailed\b|\bfailed\b|^\s*(?:[a-z_]\w*\.)+[A-Z]\w*: \S"
)


@dataclass(frozen=True)
class InitiatorVerdict:
    rank: int | None
    reason: str
    scores: dict[int, float]


def find_initiator(
    bundle: LogBundle,
    hits: list[FingerprintHit],
    structure: StructureFeatures,
    label: str | None,
    *,
    usual_initiator: str | None = None,
) -> InitiatorVerdict:
    """Name the rank that failed first, or ``None`` when the log gives no basis.

    ``usual_initiator`` is the diagnosed entry's ``usual_initiator`` (``"main-process"``: in
    that failure rank 0 does the extra work the others wait for); it names rank 0 when no
    rank shows root-cause evidence of its own and rank 0 did not time out itself.
    """
    ranks = bundle.ranks
    score: dict[int, float] = defaultdict(float)
    why: dict[int, list[str]] = defaultdict(list)
    first_ts: dict[int, float] = {}
    first_pos: dict[int, tuple[str, int]] = {}
    unranked_cause = False  # root-cause evidence of the diagnosed failure on a line no rank owns
    for h in hits:
        r = h.line.rank
        named = ""
        if r is None:
            clue = rank_named_in(h.line, bundle)
            if clue is None:
                unranked_cause |= h.role is FingerprintRole.ROOT_CAUSE and h.entry_id == label
                continue
            r, named = clue.rank, f"; {clue.reason}"
        if h.role is FingerprintRole.ROOT_CAUSE:
            value = (3.0 if h.entry_id == label else 1.0) + h.weight
            reason = f"root-cause evidence ({h.entry_id}){named}"
        elif h.entry_id == label:
            # context/symptom lines of the diagnosed failure (a loss-scale line, an NCCL WARN)
            value = 1.0 + 0.5 * h.weight if h.role is FingerprintRole.CONTEXT else 0.6 + 0.5 * h.weight
            reason = f"{h.role.value} evidence ({h.entry_id}){named}"
        elif label is None and r not in structure.watchdog_ranks:
            # an abstention names no failure, so any failure's own lines on a rank that did not
            # just time out waiting count, below any root-cause line
            value = 0.6 + 0.25 * h.weight
            reason = f"{h.role.value} evidence ({h.entry_id}){named}"
        else:
            continue
        if value > score.get(r, 0.0):
            score[r] = value
            why[r].insert(0, reason)
        ts = h.line.timestamp
        if ts is not None and (r not in first_ts or ts < first_ts[r]):
            first_ts[r] = ts
        pos = (h.line.source, h.line.lineno)
        if r not in first_pos or pos < first_pos[r]:
            first_pos[r] = pos
    timeouts = {k for k in structure.watchdog_ranks if isinstance(k, int)}
    if unranked_cause and not score:
        # an unprefixed error (a CUDA kernel's assert, a C++ library's message) beside the Python
        # traceback of exactly one rank: that rank raised it
        traced = [
            k
            for k, st in bundle.streams.items()
            if isinstance(k, int) and k not in timeouts and any(_TRACEBACK in ln.text for ln in st.lines)
        ]
        if len(traced) == 1:
            score[traced[0]] = 1.0
            why[traced[0]].append("the only rank with a traceback, beside unprefixed root-cause evidence")
    for key in structure.exception_ranks:
        if isinstance(key, int) and key not in timeouts:
            score[key] += 1.5
            why[key].append("raised an exception while others waited")
    coll = {k: c for k, c in structure.collectives.items() if isinstance(k, int)}
    if len(coll) >= 3:
        by_kind: dict[tuple[int, str, int | None], list[int]] = defaultdict(list)
        for k, c in coll.items():
            by_kind[(c.seq, c.op, c.numel_in)].append(k)
        if len({key[0] for key in by_kind}) == 1 and len(by_kind) > 1:
            odd = min(by_kind.values(), key=len)
            if len(odd) < len(coll) / 2:
                for k in odd:
                    score[k] += 1.2
                    why[k].append("its collective differs from the other ranks' at the same SeqNum")
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
    launcher_rank = launcher.root_cause.rank if launcher and launcher.root_cause else None
    if not score and launcher_rank is not None:
        score[launcher_rank] = 0.6
        why[launcher_rank].append("named by the launcher as first observed failure (no other evidence)")
    if usual_initiator == "main-process" and 0 not in timeouts and max(score.values(), default=0.0) < 3.0:
        # the waiting ranks' timeouts and context lines do not make them the initiator
        score[0] = max(max(score.values(), default=0.0), 0.6) + 0.5
        why[0].append("in this failure the main process (rank 0) does the work the others wait for")
    if not score:
        failed = launcher_failed_worker(bundle)
        if failed is None:
            failed = error_line_naming_rank(bundle)
        if failed is not None:
            score[failed.rank] = 0.6
            why[failed.rank].append(failed.reason + " (no other evidence)")
    if (
        not score
        and len(ranks) == 1
        and ranks[0] not in timeouts
        and (label is not None or _reports_error(bundle, ranks[0]))
    ):
        # one rank's output pasted (the usual excerpt of a failed job): the failure is that rank's,
        # unless it says it only waited for the others (its own timeout); with no diagnosis
        # (an abstention) only when that rank reports an error of its own
        score[ranks[0]] = 0.6
        why[ranks[0]].append("the only rank the log shows, and it did not time out waiting for others")
    if not score and label is not None:
        # no rank prefixes, yet the lines name one rank only (a single process's output pasted;
        # without rank streams no rank has a timeout of its own to exclude)
        single = only_rank_named(bundle)
        if single is not None:
            score[single.rank] = 0.6
            why[single.rank].append(single.reason)
    if not score:
        return InitiatorVerdict(None, "no rank shows a failure of its own", {})
    best = max(score.values())
    top = [r for r, s in score.items() if s == best]
    if len(top) > 1:
        timed = [r for r in top if r in first_ts]
        if len(timed) == len(top) and len({first_ts[r] for r in timed}) == len(timed):
            top = [min(timed, key=lambda r: first_ts[r])]
            why[top[0]].append("earliest timestamp among ranks with the same evidence")
        elif all(r in first_pos for r in top) and len({first_pos[r][0] for r in top}) == 1:
            # one interleaved file: the order of lines is the order of events
            top = [min(top, key=lambda r: first_pos[r])]
            why[top[0]].append("first in the log among ranks with the same evidence")
        elif launcher_rank in top:
            top = [launcher_rank]
            why[launcher_rank].append("named by the launcher as first observed failure")
    if len(top) > 1 or best < 0.6:
        return InitiatorVerdict(None, "several ranks look alike; no single first failure", dict(score))
    r = top[0]
    return InitiatorVerdict(r, "; ".join(dict.fromkeys(why[r])), dict(score))


def _reports_error(bundle: LogBundle, rank: int) -> bool:
    st = bundle.streams.get(rank)
    return st is not None and any(_TRACEBACK in ln.text or _ERROR_LINE.search(ln.text) for ln in st.lines)


def initiating_rank(a: JobAnalysis, label: str | None, taxonomy: Taxonomy) -> tuple[int | None, str]:
    """``(rank, reason)`` of the rank that failed first for a job diagnosed as ``label``
    (``None`` when the model abstained: the rank then comes from evidence of any failure,
    since which rank broke does not depend on naming the failure).

    In a hang the rank the others wait for failed first: when the hang analysis names exactly
    one (mismatch report, Flight Recorder dumps, desync report, SeqNums), it beats the generic
    rules, whose loudest exception is usually a waiting rank's timeout.
    """
    usual = taxonomy.get(label).usual_initiator if label is not None and label in taxonomy else None
    verdict = find_initiator(a.bundle, a.hits, a.structure, label, usual_initiator=usual)
    if label in HANG_IDS and len(a.hang.suspects) == 1:
        return a.hang.suspects[0], "hang analysis: " + (
            a.hang.reasons[0] if a.hang.reasons else "the others wait for it"
        )
    return verdict.rank, verdict.reason if verdict.rank is not None else ""
