"""Step 3 of the hang analysis: the ranks the others wait for (the *suspects*), and why.

:func:`rank_suspects` reads a :class:`HangFacts` (what the scan and the cross-rank view found,
nothing of the log itself) and applies the rules below, strongest first; the first rule that
names any rank decides, and its reason goes with it:

1. **mismatch check**: ``Detected mismatch between collectives`` names the ranks; the ranks
   whose op/shape no other rank shares, else all it names;
2. **loop ended**: fewer than half of the ranks announced the end of their loop (without timing
   out) while some rank is in a training step (uneven data, an early stop decided alone);
3. **Flight Recorder**: the ranks the Flight Recorder dumps blame from their entries (a
   mismatch, ranks missing from a collective);
4. **desync report**: the ranks a desync report or ``monitored_barrier`` names as lagging;
5. **never entered**: ranks whose last enqueued work equals their last completed work;
6. **store wait**: the rank whose NCCL id the others wait for in the store;
7. **not ready**: the ranks Horovod's stall inspector does not list as ready, when at most half;
8. **odd collective**: the ranks ahead of, behind or mismatched with the others' collective
   (SeqNum/op/size), when at most half;
9. **stack dump**: the ranks whose stack dump is not in the call most ranks wait in;
10. **call site**: with stacks or tracebacks of at least three ranks, the ranks whose program
    entered its collective from another line than most (an extra forward, a branch one rank
    took alone), when at most half;
11. **odd value**: with at least four ranks, the rank that printed, in a line every rank printed,
    a number all the others agree on differently (its model's size, its count of batches: it was
    set up or given work differently), when at most half;
12. **missing dumps**: the ranks that wrote no Flight Recorder dump while others did (a rank
    that aborted writes none, so this is weaker than what the dumps' entries show);
13. **silent**: ranks that printed no timeout while the others timed out, when at most half.

When no rule names a rank and exactly one rank says its own watchdog fired first, that is
given as the reason (without a suspect). At most :data:`MAX_SUSPECTS` ranks are named.

:func:`ranks_text` is how the whole hang analysis names a set of ranks in words (its report,
its advice, the Flight Recorder reading), so that one rank list reads the same everywhere.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from denpex_ml.hang.phase import Phase

__all__ = ["MAX_SUSPECTS", "PARAM_GATHER_OPS", "RULES", "HangFacts", "Suspects", "rank_suspects", "ranks_text"]

#: The most ranks named as suspects.
MAX_SUSPECTS = 8
#: collective ops that gather a sharded model's parameters or reduce-scatter its gradients
PARAM_GATHER_OPS = re.compile(r"ALLGATHER_BASE|ALLGATHER_INTO_TENSOR|REDUCE_SCATTER")


@dataclass(frozen=True)
class HangFacts:
    """What the suspect rules read: per-rank facts and the ranks each kind of evidence names.

    Mappings keep the ranks' order in the job (it breaks ties between equally common stacks).
    """

    ranks: tuple[int, ...] = ()  #: the ranks that printed lines, ascending
    phases: Mapping[int, Phase] = field(default_factory=dict)  #: per rank, its phase of training
    timed_out: frozenset[int] = frozenset()  #: ranks whose own watchdog, store or gloo wait timed out
    mismatch_ranks: Mapping[int, tuple[str, str]] = field(default_factory=dict)  #: rank -> (op, shape)
    flight_recorder_blamed: tuple[int, ...] = ()  #: ranks the Flight Recorder dumps blame
    flight_recorder_evidence: tuple[str, ...] = ()  #: the Flight Recorder's evidence lines
    flight_recorder_kind: str | None = None  #: its main finding: mismatch, missing-rank or missing-dump
    desync_ranks: tuple[int, ...] = ()  #: ranks a desync report or monitored_barrier names
    never_entered: tuple[int, ...] = ()  #: ranks whose last enqueued work is their last completed
    waited_for: tuple[int, ...] = ()  #: ranks whose NCCL id the others wait for in the store
    ready: frozenset[int] = frozenset()  #: ranks Horovod's stall inspector lists as ready
    world: int = 0  #: the world size a line states (0: unknown)
    collective_states: Mapping[int, str] = field(default_factory=dict)  #: odd ranks: ahead/behind/mismatched
    collective_ranks: int = 0  #: how many ranks reported their collective
    parked_at: Mapping[int, str] = field(default_factory=dict)  #: stack dump's collective call ("" outside any)
    call_sites: Mapping[int, str] = field(default_factory=dict)  #: file:line where the program entered its collective
    odd_values: Mapping[int, str] = field(default_factory=dict)  #: ranks that printed a value all others agree on differently
    silent: tuple[int, ...] = ()  #: ranks with lines but no timeout while the others timed out
    dump_firsts: tuple[int, ...] = ()  #: ranks whose own watchdog fired first (Flight Recorder dump signal)


@dataclass(frozen=True)
class Suspects:
    """The ranks the others wait for, the reasons, and the signals the ranking found."""

    ranks: tuple[int, ...] = ()
    reasons: tuple[str, ...] = ()
    signals: frozenset[str] = frozenset()


def _mismatch_check(f: HangFacts) -> Suspects | None:
    if not f.mismatch_ranks:
        return None
    sigs = Counter(f.mismatch_ranks.values())
    ops = {op.upper() for op, _shape in f.mismatch_ranks.values()}
    signals: frozenset[str] = frozenset()
    if len(sigs) > 1 and len(ops) == 1 and PARAM_GATHER_OPS.search(next(iter(ops))):
        # the same parameter all-gather / gradient reduce-scatter on every rank, different sizes:
        # the ranks gather different modules of a sharded model (ZeRO-3/FSDP divergence)
        signals = frozenset({"mismatch-param-gather"})
    odd = [r for r, s in f.mismatch_ranks.items() if sigs[s] == 1] if len(sigs) > 1 else []
    return Suspects(tuple(sorted(odd or f.mismatch_ranks)), ("named by the collective mismatch check",), signals)


def _loop_ended(f: HangFacts) -> Suspects | None:
    # the practitioners' subset rule: a rank announced the end of its loop (uneven data, an
    # early stop decided alone) while the others still wait in a training step's collective
    ended = [k for k in f.ranks if f.phases.get(k) is Phase.END and k not in f.timed_out]
    if ended and len(ended) < len(f.ranks) / 2 and Phase.TRAINING in f.phases.values():
        return Suspects(tuple(ended), ("its loop ended while the others still wait in a training step",))
    return None


def _flight_recorder(f: HangFacts) -> Suspects | None:
    # what the dumps' entries show (a mismatch, ranks missing from a collective); ranks that only
    # wrote no dump are weaker evidence (a rank that aborted writes none): see _missing_dumps
    if not f.flight_recorder_blamed or f.flight_recorder_kind == "missing-dump":
        return None
    return _fr_blame(f)


def _missing_dumps(f: HangFacts) -> Suspects | None:
    if not f.flight_recorder_blamed or f.flight_recorder_kind != "missing-dump":
        return None
    return _fr_blame(f)


def _fr_blame(f: HangFacts) -> Suspects:
    ev = f.flight_recorder_evidence
    reason = "blamed by the Flight Recorder dumps" + (f" ({ev[0]})" if ev else "")
    return Suspects(tuple(sorted(f.flight_recorder_blamed)), (reason,))


def _desync_report(f: HangFacts) -> Suspects | None:
    if not f.desync_ranks:
        return None
    return Suspects(tuple(sorted(set(f.desync_ranks))), ("named by the desync report as lagging",))


def _never_entered(f: HangFacts) -> Suspects | None:
    if not f.never_entered:
        return None
    reason = "last enqueued work equals last completed: never entered the stuck collective"
    return Suspects(tuple(f.never_entered), (reason,))


def _store_wait(f: HangFacts) -> Suspects | None:
    if not f.waited_for:
        return None
    reason = "the others wait in the store for the NCCL id it never published (busy or gone)"
    return Suspects(tuple(sorted(set(f.waited_for))), (reason,))


def _not_ready(f: HangFacts) -> Suspects | None:
    if not f.ready:
        return None
    missing = [r for r in range(max(f.world, max(f.ready) + 1)) if r not in f.ready]
    if 0 < len(missing) <= max(1, len(f.ready) // 2):
        return Suspects(tuple(missing), ("every other rank is ready for the collective; it is not",))
    return None


def _odd_collective(f: HangFacts) -> Suspects | None:
    odd = sorted(f.collective_states)
    if odd and len(odd) <= max(1, f.collective_ranks // 2):
        states = "/".join(sorted({f.collective_states[k] for k in odd}))
        return Suspects(tuple(odd), (f"its collective is {states} the others' (SeqNum/op/size)",))
    return None


def _stack_dump(f: HangFacts) -> Suspects | None:
    # the rank(s) not where the majority waits (another call, or busy outside any)
    if len(set(f.parked_at.values())) <= 1:
        return None
    common, n_common = Counter(f.parked_at.values()).most_common(1)[0]
    odd = sorted(k for k, c in f.parked_at.items() if c != common)
    if common and n_common > len(odd):
        return Suspects(tuple(odd), (f"its stack dump is not where the others wait ({common})",))
    return None


def _call_site(f: HangFacts) -> Suspects | None:
    # one program, one place every rank should reach its collectives from: the rank(s) that entered
    # theirs from another line (an extra forward, a branch taken alone) diverged
    if len(f.call_sites) < 3 or len(set(f.call_sites.values())) <= 1:
        return None
    common, n_common = Counter(f.call_sites.values()).most_common(1)[0]
    odd = sorted(k for k, s in f.call_sites.items() if s != common)
    if n_common > len(odd) and len(odd) <= max(1, len(f.call_sites) // 2):
        sites = ", ".join(sorted({f.call_sites[k] for k in odd}))
        return Suspects(
            tuple(odd), (f"its program entered the collective from another line ({sites}) than the others ({common})",)
        )
    return None


def _odd_value(f: HangFacts) -> Suspects | None:
    # the program's own account of itself: one rank printed a number (a model size, its count of
    # batches) that every other rank printed alike - it set up or split its work differently
    if not f.odd_values or len(f.odd_values) > max(1, len(f.ranks) // 2):
        return None
    first = f.odd_values[min(f.odd_values)]
    return Suspects(tuple(sorted(f.odd_values)), (f"it printed a value the others print alike differently: {first}",))


def _silent(f: HangFacts) -> Suspects | None:
    if f.silent and len(f.silent) <= max(1, len(f.ranks) // 2):
        reason = "printed no timeout while the others timed out (busy elsewhere or stuck)"
        return Suspects(tuple(f.silent), (reason,))
    return None


#: The rules, strongest first (see the module docs); each names ranks or returns None.
RULES: tuple[Callable[[HangFacts], Suspects | None], ...] = (
    _mismatch_check,
    _loop_ended,
    _flight_recorder,
    _desync_report,
    _never_entered,
    _store_wait,
    _not_ready,
    _odd_collective,
    _stack_dump,
    _call_site,
    _odd_value,
    _missing_dumps,
    _silent,
)


def rank_suspects(facts: HangFacts) -> Suspects:
    """The ranks the others wait for, by the strongest rule that names any (see the module docs)."""
    for rule in RULES:
        found = rule(facts)
        if found is not None:
            return Suspects(found.ranks[:MAX_SUSPECTS], found.reasons, found.signals)
    if len(facts.dump_firsts) == 1 and len(facts.ranks) > 1:
        return Suspects(reasons=(f"rank {facts.dump_firsts[0]}'s own watchdog fired first",))
    return Suspects()


def ranks_text(ranks: Iterable[int], *, noun: bool = True, max_runs: int = 8) -> str:
    """How the hang analysis names a set of ranks in its evidence and advice: ``rank 2``,
    ``ranks 0, 1``, ``ranks 0-511, 513-1023`` (a run of three or more consecutive ranks as a
    range; past ``max_runs`` runs, ``…`` and the count). ``noun=False`` leaves out the leading
    ``rank`` / ``ranks``; no rank at all reads ``no rank``."""
    ordered = sorted(set(ranks))
    if not ordered:
        return "no rank"
    runs: list[str] = []
    start = prev = ordered[0]
    for r in [*ordered[1:], None]:
        if r is not None and r == prev + 1:
            prev = r
            continue
        runs.append(f"{start}-{prev}" if prev >= start + 2 else ", ".join(map(str, range(start, prev + 1))))
        if r is not None:
            start = prev = r
    shown = ", ".join(runs[:max_runs]) + (f", … ({len(ordered)} ranks)" if len(runs) > max_runs else "")
    if not noun:
        return shown
    return f"rank {shown}" if len(ordered) == 1 else f"ranks {shown}"
