"""Hang analysis: per rank, the collective it waits in, where it stands, and what it was doing.

A hang shows as watchdog timeouts on the ranks left waiting; the rank at fault is usually
quiet. This stage reads, for every rank, the stuck collective (process group, SeqNum, op,
sizes, last enqueued/completed work), whether its own watchdog fired first or it followed
another rank's dump signal, its stack frames (tracebacks, py-spy, faulthandler) and the
phase of training they show (:mod:`denpex_ml.hang.phase`), then names the ranks the others
wait for. Practitioners' rules it encodes:

* a rank whose last enqueued work equals its last completed work never entered the stuck
  collective: it is the one the others wait for;
* the same SeqNum with a different op or size means mismatched collectives; ranks one or two
  SeqNums ahead reached a collective the others never called;
* ``First PG on this rank to signal dumping`` marks the rank whose own watchdog fired first,
  ``Observed flight recorder dump signal from another rank`` a follower;
* a desync report or a ``Detected mismatch between collectives`` error names the ranks.

The result is a :class:`HangReport` on the diagnosis, and a set of named *signals* the model
uses as features (:data:`HANG_FEATURE_NAMES`). Taxonomy entries say which signals point at
them (their ``hang_signals`` field); :func:`signal_affinity` turns that into per-class evidence.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from denpex_ml.errors import TaxonomyError
from denpex_ml.features.structure import CollectiveState, StructureFeatures
from denpex_ml.hang.frames import exchanges_p2p, gathers_sharded_params
from denpex_ml.hang.phase import PHASES, Phase, phase_of
from denpex_ml.hang.scan import scan_streams
from denpex_ml.logs.bundle import LogBundle

__all__ = [
    "HANG_FEATURE_NAMES",
    "SIGNALS",
    "HangReport",
    "RankHangState",
    "analyse_hang",
    "signal_affinity",
]

#: Named signals of a hang (besides ``phase:<phase>``), each a feature of the model.
SIGNALS: tuple[str, ...] = (
    "hang",  # the job shows a hang at all (watchdog, store or gloo timeout, desync report)
    "mismatch-report",  # "Detected mismatch between collectives" (TORCH_DISTRIBUTED_DEBUG=DETAIL)
    "desync-report",  # TORCH_NCCL_DESYNC_DEBUG report naming lagging ranks
    "store-timeout",  # c10d store wait / socket timeout (barrier or lazy communicator set-up)
    "gloo-timeout",  # gloo transport timed out waiting for a peer
    "barrier",  # the stuck call is a barrier
    "p2p",  # the stuck op is a send/recv
    "alltoall",  # the stuck op is an all-to-all
    "allgather",  # the stuck op is an all-gather (parameter gathering under ZeRO-3/FSDP)
    "tiny-collective",  # the stuck collective moves at most a few elements (a flag, a metric, a barrier)
    "seq-early",  # the stuck SeqNum is <= 5: the job hung at its first collectives
    "seq-spread",  # ranks wait at different SeqNums
    "same-seq-diff-op",  # the same SeqNum with a different op or size on different ranks (or Horovod's
    # stall report: ranks waiting for different tensors)
    "mismatch-param-gather",  # a mismatch report of one all-gather/reduce-scatter op, sizes differ (sharded params)
    "never-entered",  # a rank's last enqueued work equals its last completed work while others wait
    "silent-rank",  # a rank with lines but no timeout while the others timed out
    "absent-rank",  # the world size is known and some ranks printed nothing
    "own-watchdog-first",  # a rank says its own watchdog fired first
    "frames",  # stack frames (traceback, py-spy, faulthandler) are in the log
    "py-spy",  # a py-spy dump is in the log
    "zero3",  # DeepSpeed ZeRO stage 3 / partitioned parameters in use
    "fsdp",  # FSDP in use
    "moe",  # mixture-of-experts layers / token dispatch in use
    "pipeline",  # pipeline parallelism in use
    "flight-recorder-mismatch",  # Flight Recorder dumps disagree on a collective
    "flight-recorder-missing-rank",  # Flight Recorder dumps show ranks missing from a collective
    "rank-divergence",  # a framework's own cross-rank check found the ranks differ (model, list lengths, shapes)
    "stacks-diff-collective",  # stack dumps show ranks parked in different collective calls (different code paths)
    "stack-busy-rank",  # a rank's stack dump is outside any collective while others wait in one (it is busy)
    "mismatch-p2p",  # a transport size mismatch inside a send/recv: the stages disagree on a tensor's shape
)

#: The hang features of a job, in vector order: ``phase:<p>`` for every phase, then the signals.
HANG_FEATURE_NAMES: tuple[str, ...] = (
    *(f"phase:{p.value}" for p in PHASES if p is not Phase.UNKNOWN),
    *(f"signal:{s}" for s in SIGNALS),
)

_PARAM_GATHER = re.compile(r"ALLGATHER_BASE|ALLGATHER_INTO_TENSOR|REDUCE_SCATTER")
#: Elements from which an all-gather is a parameter shard's, not a flag's or a metric's.
_PARAM_NUMEL = 1_000_000


def _gathers_params_alone(ops: set[tuple[str, int | None]]) -> bool:
    """At one SeqNum: a large parameter all-gather / reduce-scatter on some ranks, another op on others."""
    names = {op for op, _ in ops}
    return len(names) > 1 and any(_PARAM_GATHER.search(op) and (n or 0) >= _PARAM_NUMEL for op, n in ops)


_MAX_RANKS_REPORTED = 64


@dataclass(frozen=True)
class RankHangState:
    """What one rank was doing when the job stopped.

    ``state`` is ``waiting`` (its watchdog or store timed out), ``crashed`` (it raised an
    error), ``silent`` (it printed lines but no timeout while others waited), ``ahead`` /
    ``behind`` (its SeqNum differs from the others'), ``mismatched`` (same SeqNum, other op or
    size) or ``running`` (nothing says it was stuck).
    """

    rank: int
    state: str
    phase: Phase
    collective: str | None = None  #: e.g. "ALLREDUCE #3 NumelIn=1 on PG 0"
    seq: int | None = None
    op: str | None = None
    process_group: str | None = None
    last_enqueued: int | None = None
    last_completed: int | None = None
    dump_role: str | None = None  #: "first" or "follower" (Flight Recorder dump signal)
    frames: tuple[str, ...] = ()
    last_activity: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["phase"] = self.phase.value
        d["frames"] = list(self.frames)
        return d


@dataclass(frozen=True)
class HangReport:
    """A structured account of a hang (see the module docs).

    Attributes
    ----------
    is_hang:
        The log shows ranks waiting (watchdog, store or gloo timeout, desync report).
    phase:
        The phase the job hung in: the phase of the ranks the others wait for when known.
    ranks:
        Per-rank states (at most 64; the suspects and the odd ones first).
    suspects:
        The ranks the others wait for, with ``reasons``.
    absent:
        Ranks of the world that printed nothing (when the world size is known).
    signals:
        The named signals found (:data:`SIGNALS` and ``phase:<phase>``).
    flight_recorder:
        The Flight Recorder analysis as a dict, when dumps were part of the job.
    """

    is_hang: bool
    phase: Phase
    ranks: tuple[RankHangState, ...] = ()
    suspects: tuple[int, ...] = ()
    reasons: tuple[str, ...] = ()
    stuck: str | None = None
    world_size: int | None = None
    absent: tuple[int, ...] = ()
    signals: frozenset[str] = field(default_factory=frozenset)
    flight_recorder: dict[str, Any] | None = None

    @property
    def vector(self) -> np.ndarray:
        """The hang features, in :data:`HANG_FEATURE_NAMES` order (0/1)."""
        return np.asarray([float(n in self.signals) for n in HANG_FEATURE_NAMES], dtype=np.float32)

    def to_dict(self) -> dict[str, Any]:
        return {
            "is_hang": self.is_hang,
            "phase": self.phase.value,
            "stuck": self.stuck,
            "suspects": list(self.suspects),
            "reasons": list(self.reasons),
            "world_size": self.world_size,
            "absent": list(self.absent[:_MAX_RANKS_REPORTED]),
            "signals": sorted(self.signals),
            "ranks": [r.to_dict() for r in self.ranks],
            "flight_recorder": self.flight_recorder,
        }

    def summary_lines(self, max_ranks: int = 6) -> list[str]:
        """A few lines for the on-call summary."""
        if not self.is_hang:
            return []
        out = [f"Hang in phase {self.phase.value}" + (f", stuck in {self.stuck}" if self.stuck else "")]
        if self.suspects:
            out.append(
                f"  the others wait for rank(s) {', '.join(map(str, self.suspects[:8]))}: "
                + "; ".join(self.reasons[:3])
            )
        if self.absent:
            out.append(f"  ranks that printed nothing: {_ranges(self.absent)}")
        if self.flight_recorder:
            for ev in list(self.flight_recorder.get("evidence", []))[:3]:
                out.append(f"  Flight Recorder: {ev}")
        for r in self.ranks[:max_ranks]:
            bits = [f"rank {r.rank}: {r.state}", f"phase {r.phase.value}"]
            if r.collective:
                bits.append(r.collective)
            if r.last_enqueued is not None:
                bits.append(f"last enqueued {r.last_enqueued} / completed {r.last_completed}")
            if r.frames:
                bits.append("in " + " > ".join(r.frames[-3:]))
            out.append("  " + ", ".join(bits))
        return out


def _ranges(ranks: Sequence[int]) -> str:
    out: list[str] = []
    start = prev = None
    for r in ranks:
        if start is None:
            start = prev = r
        elif prev is not None and r == prev + 1:
            prev = r
        else:
            out.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = prev = r
    if start is not None:
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
    return ", ".join(out)


def _collective_text(c: CollectiveState, pg: str | None) -> str:
    numel = f" NumelIn={c.numel_in}" if c.numel_in is not None else ""
    return f"{c.op} #{c.seq}{numel}" + (f" on PG {pg}" if pg else "")


def analyse_hang(bundle: LogBundle, structure: StructureFeatures, *, flight_recorder: Any | None = None) -> HangReport:
    """Analyse one job's hang (cheap when there is none: a few regex passes over salient lines).

    Parameters
    ----------
    bundle:
        The ingested job.
    structure:
        Its cross-rank structure (collectives per rank, watchdog and exception ranks).
    flight_recorder:
        Optional findings of :func:`denpex_ml.hang.flight_recorder.analyse_flight_recorder`.
    """
    scan = scan_streams(bundle)
    facts = scan.facts
    signals = set(scan.signals)
    mismatch_ranks = scan.mismatch_ranks
    desync_ranks = scan.desync_ranks
    waited_for = scan.waited_for
    ready = scan.ready
    text_enqueued = scan.text_enqueued
    world = scan.world
    size_mismatch = scan.size_mismatch
    global_frames = scan.global_frames
    parked_at = {k: f.parked for k, f in facts.items() if isinstance(k, int) and f.parked is not None}
    parked = set(parked_at.values())
    if len(parked - {""}) > 1:
        signals.add("stacks-diff-collective")  # ranks wait in different calls
        callers = {f.parked_by for f in facts.values() if f.parked}
        if len(callers) == 1 and None not in callers:
            # ... made from the same function of the program: the ranks disagree at the same point
            signals.update(("same-seq-diff-op", "hang"))
    if "" in parked and len(parked) > 1:
        signals.add("stack-busy-rank")  # one rank is elsewhere while the others wait: it is busy
    if structure.watchdog_ranks:
        signals.add("hang")
    if flight_recorder is not None:
        kinds = {str(f.kind) for f in getattr(flight_recorder, "findings", ())}
        kinds.add(str(getattr(flight_recorder, "kind", None)))
        if "mismatch" in kinds:
            signals.add("flight-recorder-mismatch")
        if "missing-rank" in kinds:
            signals.add("flight-recorder-missing-rank")
        if kinds & {"mismatch", "missing-rank"}:
            signals.add("hang")
    colls = {k: c for k, c in structure.collectives.items() if isinstance(k, int)}
    ops = Counter(c.op.upper() for c in colls.values())
    if colls:
        seqs = Counter(c.seq for c in colls.values())
        if min(seqs) <= 5:
            signals.add("seq-early")
        if len(seqs) > 1:
            signals.add("seq-spread")
        by_seq: dict[int, set[tuple[str, int | None]]] = {}
        for c in colls.values():
            by_seq.setdefault(c.seq, set()).add((c.op.upper(), c.numel_in))
        if any(len(v) > 1 for v in by_seq.values()):
            signals.add("same-seq-diff-op")
        if any(_gathers_params_alone(v) for v in by_seq.values()):
            # one rank gathers a parameter shard (millions of elements) where another waits in a
            # different collective at the same SeqNum: a sharded forward the others never ran
            signals.add("mismatch-param-gather")
        if any(c.numel_in is not None and c.numel_in <= 8 for c in colls.values()):
            signals.add("tiny-collective")
    for op in ops:
        if op in ("SEND", "RECV") or "P2P" in op:
            signals.add("p2p")
        elif "ALLTOALL" in op:
            signals.add("alltoall")
        elif "ALLGATHER" in op:
            signals.add("allgather")
        elif "BARRIER" in op:
            signals.add("barrier")
    enq = {
        **text_enqueued,
        **{k: f.enqueued for k, f in facts.items() if isinstance(k, int) and f.enqueued is not None},
    }
    # a rank whose last enqueued work is its last completed never entered the stuck collective:
    # beside ranks stuck in it, or alone when it is the only rank the log shows
    never = sorted(
        k for k, (e, c) in enq.items() if e == c and (len(enq) == 1 or any(e2 > c2 for e2, c2 in enq.values()))
    )
    if never:
        signals.add("never-entered")
    int_keys = sorted(k for k in bundle.streams if isinstance(k, int))
    waiting = {k for k in int_keys if facts[k].timed_out or k in structure.watchdog_ranks}
    crashed = {k for k in structure.exception_ranks if isinstance(k, int)} - waiting
    silent = [k for k in int_keys if k not in waiting and k not in crashed] if len(waiting) >= 2 else []
    if silent:
        signals.add("silent-rank")
    absent: tuple[int, ...] = ()
    if 0 < world <= 65536 and int_keys and max(int_keys) < world:
        absent = tuple(r for r in range(world) if r not in bundle.streams)
        if absent and len(absent) < world:
            signals.add("absent-rank")
    all_frames = [*global_frames, *(x for k in int_keys for x in facts[k].frames)]
    if size_mismatch and gathers_sharded_params(all_frames):
        # the odd size arrived inside a sharded-parameter gather (FSDP unshard, ZeRO-3 fetch):
        # the ranks gather different parameters - divergent models or forwards, not user collectives
        signals.add("mismatch-param-gather")
    elif size_mismatch and exchanges_p2p(all_frames):
        signals.add("mismatch-p2p")  # the receiver posted a buffer of another size than was sent
    if any(x.function == "barrier" or x.function == "monitored_barrier" for x in all_frames):
        signals.add("barrier")
    # suspects: the ranks the others wait for, by the strongest rule that names any
    suspects: list[int] = []
    reasons: list[str] = []
    if mismatch_ranks:
        sigs = Counter(mismatch_ranks.values())
        mm_ops = {op.upper() for op, _shape in mismatch_ranks.values()}
        if len(sigs) > 1 and len(mm_ops) == 1 and _PARAM_GATHER.search(next(iter(mm_ops))):
            # the same parameter all-gather / gradient reduce-scatter on every rank, different sizes:
            # the ranks gather different modules of a sharded model (ZeRO-3/FSDP divergence)
            signals.add("mismatch-param-gather")
        odd = [r for r, s in mismatch_ranks.items() if sigs[s] == 1] if len(sigs) > 1 else []
        suspects = sorted(odd or mismatch_ranks)[:8]
        reasons.append("named by the collective mismatch check")
    recent = {k: [ln.text for ln in bundle.streams[k].lines[-12:]] for k in int_keys}  # last activity
    phases: dict[int, Phase] = {k: phase_of(facts[k].frames, recent[k]) for k in int_keys}
    ended = [k for k in int_keys if phases[k] is Phase.END and not facts[k].timed_out]
    if not suspects and ended and len(ended) < len(int_keys) / 2 and Phase.TRAINING in phases.values():
        # the practitioners' subset rule: a rank announced the end of its loop (uneven data, an
        # early stop decided alone) while the others still wait in a training step's collective
        suspects = ended[:8]
        reasons.append("its loop ended while the others still wait in a training step")
    fr_blamed = list(getattr(flight_recorder, "blamed_ranks", ()) or ())
    if not suspects and fr_blamed:
        suspects = sorted(int(r) for r in fr_blamed)[:8]
        fr_ev = list(getattr(flight_recorder, "evidence", ()) or ())
        reasons.append("blamed by the Flight Recorder dumps" + (f" ({fr_ev[0]})" if fr_ev else ""))
    if not suspects and desync_ranks:
        suspects = sorted(set(desync_ranks))[:8]
        reasons.append("named by the desync report as lagging")
    if not suspects and never:
        suspects = never[:8]
        reasons.append("last enqueued work equals last completed: never entered the stuck collective")
    if not suspects and waited_for:
        suspects = sorted(set(waited_for))[:8]
        reasons.append("the others wait in the store for the NCCL id it never published (busy or gone)")
    if not suspects and ready:
        missing = [r for r in range(max(world, max(ready) + 1)) if r not in ready]
        if 0 < len(missing) <= max(1, len(ready) // 2):
            suspects = missing[:8]
            reasons.append("every other rank is ready for the collective; it is not")
    state_of: dict[int, str] = {}
    if colls:
        seq_mode = Counter(c.seq for c in colls.values()).most_common(1)[0][0]
        sig_mode = Counter((c.seq, c.op.upper(), c.numel_in) for c in colls.values()).most_common(1)[0][0]
        for k, c in colls.items():
            if c.seq > seq_mode:
                state_of[k] = "ahead"
            elif c.seq < seq_mode:
                state_of[k] = "behind"
            elif (c.seq, c.op.upper(), c.numel_in) != sig_mode:
                state_of[k] = "mismatched"
        odd_ranks = sorted(state_of)
        if not suspects and odd_ranks and len(odd_ranks) <= max(1, len(colls) // 2):
            suspects = odd_ranks[:8]
            odd_states = sorted({state_of[k] for k in odd_ranks})
            reasons.append(f"its collective is {'/'.join(odd_states)} the others' (SeqNum/op/size)")
    if not suspects and len(parked) > 1:
        # stack dumps: the rank(s) not where the majority waits (another call, or busy outside any)
        common, n_common = Counter(parked_at.values()).most_common(1)[0]
        odd_out = sorted(k for k, c in parked_at.items() if c != common)
        if common and n_common > len(odd_out):
            suspects = odd_out[:8]
            reasons.append(f"its stack dump is not where the others wait ({common})")
    if not suspects and silent and len(silent) <= max(1, len(int_keys) // 2):
        suspects = silent[:8]
        reasons.append("printed no timeout while the others timed out (busy elsewhere or stuck)")
    firsts = [k for k in int_keys if facts[k].dump_role == "first"]
    if not suspects and len(firsts) == 1 and len(int_keys) > 1:
        reasons.append(f"rank {firsts[0]}'s own watchdog fired first")
    # per-rank states and phases
    states: list[RankHangState] = []
    for k in int_keys:
        f = facts[k]
        acts = recent[k]
        ph = phases[k]
        coll = colls.get(k)
        state = state_of.get(k) or (
            "crashed" if k in crashed else "waiting" if k in waiting else "silent" if k in silent else "running"
        )
        states.append(
            RankHangState(
                rank=k,
                state=state,
                phase=ph,
                collective=_collective_text(coll, f.pg) if coll else None,
                seq=coll.seq if coll else None,
                op=coll.op if coll else None,
                process_group=f.pg,
                last_enqueued=f.enqueued[0] if f.enqueued else None,
                last_completed=f.enqueued[1] if f.enqueued else None,
                dump_role=f.dump_role,
                frames=tuple(str(x) for x in f.frames[-6:]),
                last_activity=acts[-1][:300] if acts else None,
            )
        )
    g_phase = phase_of(
        global_frames, [ln.text for ln in bundle.global_stream.lines[-12:]] if bundle.global_stream else []
    )
    for p in {*phases.values(), g_phase}:
        if p is not Phase.UNKNOWN:
            signals.add(f"phase:{p.value}")
    order = list(PHASES)
    cand = [phases[k] for k in suspects if k in phases and phases[k] not in (Phase.UNKNOWN, Phase.TRAINING)]
    if not cand:
        cand = [p for p in (*phases.values(), g_phase) if p is not Phase.UNKNOWN]
    job_phase = min(cand, key=order.index) if cand else Phase.UNKNOWN
    is_hang = "hang" in signals
    susp = set(suspects)
    states.sort(key=lambda s: (s.rank not in susp, s.state in ("waiting", "running"), s.rank))
    stuck = None
    if colls:
        mode = Counter(_collective_text(c, facts[k].pg) for k, c in colls.items()).most_common(1)[0][0]
        stuck = mode
    return HangReport(
        is_hang=is_hang,
        phase=job_phase,
        ranks=tuple(states[:_MAX_RANKS_REPORTED]) if is_hang else (),
        suspects=tuple(suspects),
        reasons=tuple(reasons),
        stuck=stuck,
        world_size=world or None,
        absent=absent,
        signals=frozenset(s if s.startswith("phase:") else f"signal:{s}" for s in signals),
        flight_recorder=flight_recorder.to_dict()
        if flight_recorder is not None and hasattr(flight_recorder, "to_dict")
        else None,
    )


def signal_affinity(labels: Sequence[str], declared: Mapping[str, Sequence[str]]) -> np.ndarray:
    """A (n_labels, n_hang_features) 0/1 matrix: which hang features each entry declares.

    ``declared`` maps an entry id to its ``hang_signals`` (``phase:<p>`` / ``signal:<s>``).
    Unknown names raise :class:`~denpex_ml.errors.TaxonomyError` naming the entry.
    """
    index = {n: i for i, n in enumerate(HANG_FEATURE_NAMES)}
    A = np.zeros((len(labels), len(HANG_FEATURE_NAMES)), dtype=np.float32)
    for row, lab in enumerate(labels):
        for name in declared.get(lab, ()):
            if name not in index:
                raise TaxonomyError(
                    f"taxonomy entry {lab!r}: hang signal {name!r} is not one of {', '.join(HANG_FEATURE_NAMES)}"
                )
            A[row, index[name]] = 1.0
    return A
