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

The analysis runs in four steps: :mod:`~denpex_ml.hang.scan` reads every stream's lines by
themselves; this module sets the ranks side by side (collectives by SeqNum, stacks, enqueued and
completed work, waiting, silent and absent ranks); :mod:`~denpex_ml.hang.suspects` names the
ranks the others wait for, by an ordered list of rules; this module then assembles per-rank
states, phases and the report.

The result is a :class:`HangReport` on the diagnosis, and a set of named *signals* the model
uses as features (:data:`HANG_FEATURE_NAMES`). Taxonomy entries say which signals point at
them (their ``hang_signals`` field); :func:`signal_affinity` turns that into per-class evidence.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from denpex_ml.errors import TaxonomyError
from denpex_ml.features.structure import CollectiveState, StructureFeatures
from denpex_ml.hang.frames import exchanges_p2p, gathers_sharded_params
from denpex_ml.hang.phase import PHASES, Phase, phase_of
from denpex_ml.hang.scan import StreamScan, odd_values, scan_streams
from denpex_ml.hang.suspects import PARAM_GATHER_OPS, HangFacts, rank_suspects, ranks_text
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

_MAX_RANKS_REPORTED = 64
_REPORTERS = {"vllm": "vLLM", "sglang": "SGLang", "horovod": "Horovod", "deepep": "DeepEP"}


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
    reported_by:
        Whose own stall check reported the hang: a serving engine (``vllm``, ``sglang``), whose
        workers wait on the engine's own communicators and queues, Horovod's stall inspector
        (``horovod``), whose ranks negotiate tensors outside PyTorch's process groups, or DeepEP's
        dispatch/combine timeouts (``deepep``), kernels outside NCCL altogether. The next
        artefacts to collect must reach those (:mod:`~denpex_ml.hang.advice`); ``None`` when the
        report is PyTorch's own (or no stall report names its maker).
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
    reported_by: str | None = None

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
            "reported_by": self.reported_by,
        }

    def summary_lines(self, max_ranks: int = 6) -> list[str]:
        """A few lines for the on-call summary."""
        if not self.is_hang:
            return []
        out = [f"Hang in phase {self.phase.value}" + (f", stuck in {self.stuck}" if self.stuck else "")]
        if self.reported_by:
            out[0] += f" (reported by {_REPORTERS.get(self.reported_by, self.reported_by)}'s own stall check)"
        if self.suspects:
            out.append(
                f"  the others wait for rank(s) {', '.join(map(str, self.suspects[:8]))}: "
                + "; ".join(self.reasons[:3])
            )
        if self.absent:
            out.append(f"  ranks that printed nothing: {ranks_text(self.absent, noun=False)}")
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


def _collective_text(c: CollectiveState, pg: str | None) -> str:
    numel = f" NumelIn={c.numel_in}" if c.numel_in is not None else ""
    return f"{c.op} #{c.seq}{numel}" + (f" on PG {pg}" if pg else "")


def analyse_hang(bundle: LogBundle, structure: StructureFeatures, *, flight_recorder: Any | None = None) -> HangReport:
    """Analyse one job's hang (cheap when there is none: a few regex passes over salient lines).

    Four steps: every stream's lines by themselves (:func:`~denpex_ml.hang.scan.scan_streams`),
    the ranks side by side, the ranks the others wait for
    (:func:`~denpex_ml.hang.suspects.rank_suspects`), then per-rank states, phases and the report.

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
    side = _cross_rank(bundle, structure, scan, flight_recorder)
    recent = {k: [ln.text for ln in bundle.streams[k].lines[-12:]] for k in side.ranks}  # last activity
    phases = {k: phase_of(scan.facts[k].frames, recent[k]) for k in side.ranks}
    facts = _hang_facts(scan, side, phases, flight_recorder)
    if "hang" in side.signals or "hang" in scan.signals:
        facts = replace(facts, odd_values=odd_values(bundle, side.ranks))
    found = rank_suspects(facts)
    global_recent = [ln.text for ln in bundle.global_stream.lines[-12:]] if bundle.global_stream else []
    g_phase = phase_of(scan.global_frames, global_recent)
    signals = {*scan.signals, *side.signals, *found.signals}
    signals.update(f"phase:{p.value}" for p in {*phases.values(), g_phase} if p is not Phase.UNKNOWN)
    is_hang = "hang" in signals
    states = _rank_states(scan, side, phases, recent, found.ranks)
    return HangReport(
        is_hang=is_hang,
        phase=_job_phase(phases, g_phase, found.ranks),
        ranks=tuple(states[:_MAX_RANKS_REPORTED]) if is_hang else (),
        suspects=found.ranks,
        reasons=found.reasons,
        stuck=_stuck(scan, side) or _horovod_stuck(scan),
        world_size=scan.world or None,
        absent=side.absent,
        signals=frozenset(s if s.startswith("phase:") else f"signal:{s}" for s in signals),
        flight_recorder=flight_recorder.to_dict()
        if flight_recorder is not None and hasattr(flight_recorder, "to_dict")
        else None,
        reported_by=scan.reported_by,
    )


# ---- step 2: the ranks side by side


@dataclass(frozen=True)
class _CrossRank:
    """Step 2: the ranks' facts side by side, and the signals only that shows."""

    ranks: tuple[int, ...]  # the ranks that printed lines, ascending
    collectives: dict[int, CollectiveState]  # per rank, the collective its watchdog or heartbeat reported
    collective_states: dict[int, str]  # the ranks whose collective is ahead, behind or mismatched
    parked_at: dict[int, str]  # per rank, the collective call its stack dump waits in ("" outside any)
    never_entered: tuple[int, ...]  # last enqueued work equals last completed while others wait
    waiting: frozenset[int]  # timed out (own watchdog, store, gloo) or reported by a watchdog line
    crashed: frozenset[int]  # raised an exception without waiting
    silent: tuple[int, ...]  # neither, while at least two ranks wait
    absent: tuple[int, ...]  # ranks of the stated world that printed nothing
    signals: frozenset[str]


def _cross_rank(
    bundle: LogBundle, structure: StructureFeatures, scan: StreamScan, flight_recorder: Any | None
) -> _CrossRank:
    """Set the ranks' facts side by side: collectives, stacks, waiting / crashed / silent / absent ranks."""
    ranks = tuple(sorted(k for k in bundle.streams if isinstance(k, int)))
    colls = {k: c for k, c in structure.collectives.items() if isinstance(k, int)}
    parked_at = {k: f.parked for k, f in scan.facts.items() if isinstance(k, int) and f.parked is not None}
    never = _never_entered_ranks(scan)
    waiting = frozenset(k for k in ranks if scan.facts[k].timed_out or k in structure.watchdog_ranks)
    crashed = frozenset(k for k in structure.exception_ranks if isinstance(k, int)) - waiting
    silent = tuple(k for k in ranks if k not in waiting and k not in crashed) if len(waiting) >= 2 else ()
    absent: tuple[int, ...] = ()
    if 0 < scan.world <= 65536 and ranks and max(ranks) < scan.world:
        absent = tuple(r for r in range(scan.world) if r not in bundle.streams)
    signals = {
        *_stack_signals(scan, parked_at),
        *_flight_recorder_signals(flight_recorder),
        *_collective_signals(colls),
        *_frame_signals(scan, ranks),
    }
    if structure.watchdog_ranks:
        signals.add("hang")
    if not structure.exception_ranks and any(f.stack_dumped for f in scan.facts.values()):
        # someone dumped the stacks of a live process and nothing raised: it was stuck (where,
        # and whether inside a collective, the frames tell)
        signals.add("hang")
    if never:
        signals.add("never-entered")
    if silent:
        signals.add("silent-rank")
    if absent and len(absent) < scan.world:
        signals.add("absent-rank")
    return _CrossRank(
        ranks=ranks,
        collectives=colls,
        collective_states=_collective_states(colls),
        parked_at=parked_at,
        never_entered=never,
        waiting=waiting,
        crashed=crashed,
        silent=silent,
        absent=absent,
        signals=frozenset(signals),
    )


def _stack_signals(scan: StreamScan, parked_at: Mapping[int, str]) -> set[str]:
    """Stack dumps side by side: ranks parked in different calls, or one busy outside any."""
    signals: set[str] = set()
    parked = set(parked_at.values())
    if len(parked - {""}) > 1:
        signals.add("stacks-diff-collective")  # ranks wait in different calls
        callers = {f.parked_by for f in scan.facts.values() if f.parked}
        if len(callers) == 1 and None not in callers:
            # ... made from the same function of the program: the ranks disagree at the same point
            signals.update(("same-seq-diff-op", "hang"))
    if "" in parked and len(parked) > 1:
        signals.add("stack-busy-rank")  # one rank is elsewhere while the others wait: it is busy
    return signals


def _flight_recorder_signals(flight_recorder: Any | None) -> set[str]:
    signals: set[str] = set()
    if flight_recorder is not None:
        kinds = {str(f.kind) for f in getattr(flight_recorder, "findings", ())}
        kinds.add(str(getattr(flight_recorder, "kind", None)))
        if "mismatch" in kinds:
            signals.add("flight-recorder-mismatch")
        if "missing-rank" in kinds:
            signals.add("flight-recorder-missing-rank")
        if kinds & {"mismatch", "missing-rank"}:
            signals.add("hang")
    return signals


#: Elements from which an all-gather is a parameter shard's, not a flag's or a metric's.
_PARAM_NUMEL = 1_000_000


def _gathers_params_alone(ops: set[tuple[str, int | None]]) -> bool:
    """At one SeqNum: a large parameter all-gather / reduce-scatter on some ranks, another op on others."""
    names = {op for op, _ in ops}
    return len(names) > 1 and any(PARAM_GATHER_OPS.search(op) and (n or 0) >= _PARAM_NUMEL for op, n in ops)


def _collective_signals(colls: Mapping[int, CollectiveState]) -> set[str]:
    """The ranks' stuck collectives side by side: SeqNums, ops and sizes."""
    signals: set[str] = set()
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
    return signals


def _frame_signals(scan: StreamScan, ranks: Sequence[int]) -> set[str]:
    """All frames of the job together: where a size mismatch arose, a barrier."""
    signals: set[str] = set()
    all_frames = [*scan.global_frames, *(x for k in ranks for x in scan.facts[k].frames)]
    if scan.size_mismatch and gathers_sharded_params(all_frames):
        # the odd size arrived inside a sharded-parameter gather (FSDP unshard, ZeRO-3 fetch):
        # the ranks gather different parameters - divergent models or forwards, not user collectives
        signals.add("mismatch-param-gather")
    elif scan.size_mismatch and exchanges_p2p(all_frames):
        signals.add("mismatch-p2p")  # the receiver posted a buffer of another size than was sent
    if any(x.function == "barrier" or x.function == "monitored_barrier" for x in all_frames):
        signals.add("barrier")
    return signals


def _never_entered_ranks(scan: StreamScan) -> tuple[int, ...]:
    """A rank whose last enqueued work is its last completed never entered the stuck collective:
    beside ranks stuck in it, or alone when it is the only rank the log shows."""
    enq = {
        **scan.text_enqueued,
        **{k: f.enqueued for k, f in scan.facts.items() if isinstance(k, int) and f.enqueued is not None},
    }
    return tuple(
        sorted(k for k, (e, c) in enq.items() if e == c and (len(enq) == 1 or any(e2 > c2 for e2, c2 in enq.values())))
    )


def _collective_states(colls: Mapping[int, CollectiveState]) -> dict[int, str]:
    """The ranks whose collective differs from the most common: ``ahead``, ``behind`` (SeqNum) or
    ``mismatched`` (same SeqNum, another op or size)."""
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
    return state_of


# ---- step 3: what the suspect rules read


def _hang_facts(
    scan: StreamScan, side: _CrossRank, phases: Mapping[int, Phase], flight_recorder: Any | None
) -> HangFacts:
    return HangFacts(
        ranks=side.ranks,
        phases=phases,
        timed_out=frozenset(k for k in side.ranks if scan.facts[k].timed_out),
        mismatch_ranks=scan.mismatch_ranks,
        flight_recorder_blamed=tuple(int(r) for r in getattr(flight_recorder, "blamed_ranks", ()) or ()),
        flight_recorder_evidence=tuple(str(e) for e in getattr(flight_recorder, "evidence", ()) or ()),
        flight_recorder_kind=getattr(flight_recorder, "kind", None),
        desync_ranks=scan.desync_ranks,
        never_entered=side.never_entered,
        waited_for=scan.waited_for,
        ready=scan.ready,
        world=scan.world,
        collective_states=side.collective_states,
        collective_ranks=len(side.collectives),
        parked_at=side.parked_at,
        call_sites={k: f.call_site for k in side.ranks if (f := scan.facts[k]).call_site is not None},
        silent=side.silent,
        dump_firsts=tuple(k for k in side.ranks if scan.facts[k].dump_role == "first"),
    )


# ---- step 4: per-rank states, the job's phase, the collective it is stuck in


def _rank_states(
    scan: StreamScan,
    side: _CrossRank,
    phases: Mapping[int, Phase],
    recent: Mapping[int, list[str]],
    suspects: Sequence[int],
) -> list[RankHangState]:
    """Every rank's state, the suspects first, then the odd ones (neither waiting nor running)."""
    states: list[RankHangState] = []
    for k in side.ranks:
        f = scan.facts[k]
        acts = recent[k]
        coll = side.collectives.get(k)
        states.append(
            RankHangState(
                rank=k,
                state=_rank_state(k, side),
                phase=phases[k],
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
    susp = set(suspects)
    states.sort(key=lambda s: (s.rank not in susp, s.state in ("waiting", "running"), s.rank))
    return states


def _rank_state(k: int, side: _CrossRank) -> str:
    """Its collective's place among the others' when odd, else crashed, waiting, silent or running."""
    odd = side.collective_states.get(k)
    if odd:
        return odd
    if k in side.crashed:
        return "crashed"
    if k in side.waiting:
        return "waiting"
    return "silent" if k in side.silent else "running"


def _job_phase(phases: Mapping[int, Phase], g_phase: Phase, suspects: Sequence[int]) -> Phase:
    """The suspects' phase when it says more than a training step, else the first shown in :data:`PHASES` order."""
    order = list(PHASES)
    cand = [phases[k] for k in suspects if k in phases and phases[k] not in (Phase.UNKNOWN, Phase.TRAINING)]
    if not cand:
        cand = [p for p in (*phases.values(), g_phase) if p is not Phase.UNKNOWN]
    return min(cand, key=order.index) if cand else Phase.UNKNOWN


def _stuck(scan: StreamScan, side: _CrossRank) -> str | None:
    """The collective most ranks are stuck in."""
    if not side.collectives:
        return None
    texts = Counter(_collective_text(c, scan.facts[k].pg) for k, c in side.collectives.items())
    return texts.most_common(1)[0][0]


def _horovod_stuck(scan: StreamScan, max_groups: int = 3) -> str | None:
    """Older Horovod's stall lines: the tensors each group of ranks is ready for (the ranks
    outside a group have not submitted them), e.g. ``HorovodBroadcast_w_0 and 9 more (ranks 4-7
    ready); HorovodAllreduce_g_0 and 9 more (ranks 0-3 ready)``."""
    parts = []
    for ranks, tensors in scan.ready_groups[:max_groups]:
        name = tensors[0] if tensors else "a tensor"
        if (i := name.find("Horovod")) > 0:
            name = name[i:]  # the op and the tensor (HorovodBroadcast_w_0), without the graph's scopes
        name = name if len(name) <= 80 else name[:79] + "…"
        more = f" and {len(tensors) - 1} more" if len(tensors) > 1 else ""
        parts.append(f"{name}{more} ({ranks_text(ranks)} ready)")
    if len(scan.ready_groups) > max_groups:
        parts.append(f"{len(scan.ready_groups) - max_groups} more groups")
    return "; ".join(parts) or None


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
