"""When the log cannot separate the hang classes: name the rivals, what tells them apart,
and the next artefact to collect, with the exact command or environment variable.

The artefacts are the standard ones of the field: a Flight Recorder dump of every rank's
recent collectives, py-spy stacks of the live ranks, PyTorch's collective consistency check,
NCCL's own debug log. Each is suggested only when the job did not already leave it behind.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from denpex_ml.hang.analysis import HangReport
from denpex_ml.hang.phase import Phase
from denpex_ml.hang.suspects import ranks_text
from denpex_ml.taxonomy import Taxonomy
from denpex_ml.taxonomy.groups import HANG_IDS, TRANSPORT_IDS

__all__ = ["Artefact", "HangAdvice", "advise"]


@dataclass(frozen=True)
class Artefact:
    """Something to collect from the next occurrence (or the live job) and how."""

    name: str
    how: str
    why: str

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "how": self.how, "why": self.why}


@dataclass(frozen=True)
class HangAdvice:
    """Competing hang classes, what this log shows that bears on them, how to tell them apart,
    and what to collect next."""

    competing: tuple[tuple[str, float], ...]
    tell_apart: tuple[str, ...]
    collect: tuple[Artefact, ...]
    #: facts read from this log that bear on the rivals (where each rank waits, who never arrived)
    observed: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "competing": [{"label": lab, "probability": round(p, 4)} for lab, p in self.competing],
            "observed": list(self.observed),
            "tell_apart": list(self.tell_apart),
            "collect": [a.to_dict() for a in self.collect],
        }

    def summary_lines(self) -> list[str]:
        out = ["The log cannot fully separate: " + ", ".join(f"{lab} {p:.0%}" for lab, p in self.competing)]
        if self.observed:
            out.append("  This log shows:")
            out += [f"    * {t}" for t in self.observed]
        out += [f"  - {t}" for t in self.tell_apart[:4]]
        if self.collect:
            out.append("Collect next:")
            for a in self.collect:
                out.append(f"  - {a.name}: {a.how}")
                out.append(f"      ({a.why})")
        return out


_FLIGHT_RECORDER = Artefact(
    "Flight Recorder dumps of every rank",
    "TORCH_FR_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1 TORCH_FR_DUMP_TEMP_FILE=/shared/fr/trace_ "
    "(older PyTorch: TORCH_NCCL_TRACE_BUFFER_SIZE / TORCH_NCCL_DEBUG_INFO_TEMP_FILE); put the "
    "trace_<rank> files next to the logs and run denpex-ml classify on the folder",
    "the last collectives of every rank show which rank never joined or issued a different op/size",
)
_PY_SPY = Artefact(
    "stacks of every rank while it hangs",
    "py-spy dump --pid <PID> (each training process; pgrep -f <script>), or "
    "python -X faulthandler + faulthandler.register(signal.SIGUSR1) and kill -USR1 <PID>",
    "the frames say what each rank was doing: generate, evaluate, save_checkpoint, Dataset.map, a barrier",
)
_DETAIL = Artefact(
    "the collective consistency check",
    "TORCH_DISTRIBUTED_DEBUG=DETAIL (reports 'Detected mismatch between collectives' with op, shape and dtype)",
    "tells mismatched collectives from ranks that never arrived",
)
_DESYNC = Artefact(
    "the desync report",
    "TORCH_NCCL_DESYNC_DEBUG=1 (with a shorter timeout: init_process_group(timeout=timedelta(minutes=5)))",
    "names the lagging ranks that did not join the collective",
)
#: an inference engine's workers wait on the engine's own NCCL communicator, custom all-reduce and
#: shared-memory queues, which PyTorch's Flight Recorder and desync report do not record: the
#: artefacts that reach them are the workers' stacks, the engine's own debug log and an isolating rerun
_ENGINE_PY_SPY = Artefact(
    "stacks of the engine's processes while it hangs",
    "py-spy dump --pid <PID> for the engine core / scheduler and every worker process "
    "(pgrep -f 'vllm|sglang'; py-spy dump --native shows a rank parked in an NCCL kernel)",
    "the worker that is not in the same collective or queue read as the others is the one they wait for",
)
_ENGINE_LOGS = {
    "vllm": Artefact(
        "vLLM's debug log",
        "VLLM_LOGGING_LEVEL=DEBUG NCCL_DEBUG=TRACE (VLLM_TRACE_FUNCTION=1 records every call: only for a "
        "short reproduction, it slows start-up a lot)",
        "names the last call each worker entered and separates an NCCL stall from host work in the engine loop",
    ),
    "sglang": Artefact(
        "SGLang's and NCCL's debug log",
        "--log-level debug, NCCL_DEBUG=INFO (and a longer --watchdog-timeout while reproducing)",
        "shows which TP scheduler stopped making progress and whether NCCL reported an error first",
    ),
}
_ENGINE_ISOLATE = Artefact(
    "an isolating rerun",
    "--disable-custom-all-reduce (the engine's own all-reduce over P2P), then CUDA graphs off "
    "(vLLM --enforce-eager, SGLang --disable-cuda-graph); NCCL_P2P_DISABLE=1 as a last check",
    "a hang that goes away names the path: custom all-reduce, graph capture, or intra-node P2P",
)
#: Horovod's ranks negotiate every tensor with its coordinator, outside PyTorch's process groups:
#: its own timeline and stall inspector say which rank never submitted which tensor
_HOROVOD_TIMELINE = Artefact(
    "Horovod's timeline",
    "HOROVOD_TIMELINE=/shared/horovod_timeline.json (open it in chrome://tracing or Perfetto)",
    "each tensor's negotiation per rank: the rank that never submitted a tensor, or submitted another",
)
_HOROVOD_STALL = Artefact(
    "the stall inspector, sooner and fatal",
    "HOROVOD_STALL_CHECK_TIME_SECONDS=60 HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=600",
    "lists the stalled tensors and missing ranks within a minute, then stops the job instead of letting it hang",
)
#: DeepEP's dispatch/combine kernels move tokens over NVLink and RDMA themselves (NVSHMEM), outside
#: NCCL: the artefacts are the ones that narrow a stall inside them to one exchange at one scale
_DEEPEP_SCALE = Artefact(
    "the same steps on a smaller expert-parallel domain",
    "rerun the same data with half the expert-parallel size (--expert-model-parallel-size, --ep-size) "
    "or half the nodes of the NVLink domain; note whether dispatch or combine timed out",
    "completing there and stalling at full scale points at the number of concurrent peer exchanges",
)
_DEEPEP_FALLBACK = Artefact(
    "the general-purpose all-to-all in place of DeepEP",
    "Megatron: --moe-token-dispatcher-type alltoall instead of flex with --moe-enable-deepep; SGLang: "
    "--moe-a2a-backend none instead of deepep (older releases: without --enable-deepep-moe)",
    "a stall that goes away lies in the low-latency dispatch/combine kernels, not in the routing",
)
_NCCL = Artefact(
    "NCCL's own log",
    "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,COLL (and dmesg -T / journalctl -k on the nodes)",
    "separates a transport failure (IB/socket/shm errors) from a rank that never called the collective",
)


def advise(
    alternatives: Sequence[tuple[str, float]],
    report: HangReport,
    taxonomy: Taxonomy,
    *,
    margin: float = 0.35,
    max_competing: int = 3,
) -> HangAdvice | None:
    """Advice when the best answer is a hang class and rivals are close; else ``None``.

    Parameters
    ----------
    alternatives:
        ``(label, probability)`` best first.
    report:
        The job's hang report (what the log already holds).
    margin:
        Rivals within this probability of the best one count as competing.
    """
    if not alternatives or not report.is_hang:
        return None
    best, p_best = alternatives[0]
    family = HANG_IDS | TRANSPORT_IDS
    if best not in family:
        return None
    competing = [(lab, p) for lab, p in alternatives[:6] if lab in family and p >= p_best - margin and p >= 0.05]
    if len(competing) < 2 and p_best >= 0.6:
        return None
    competing = competing[:max_competing]
    ids = {lab for lab, _ in competing}
    tell: list[str] = []
    for lab, _ in competing:
        for rel in taxonomy.get(lab).related:
            if rel.id in ids:
                tell.append(f"{lab} vs {rel.id}: {rel.note}")
    collect: list[Artefact] = []
    sig = report.signals
    seen = observed(report)
    if report.reported_by is not None:
        return HangAdvice(tuple(competing), tuple(tell), _own_stall_artefacts(report, ids), seen)
    if report.flight_recorder is None:
        collect.append(_FLIGHT_RECORDER)
    if "signal:frames" not in sig:
        collect.append(_PY_SPY)
    if "signal:mismatch-report" not in sig and ids & {
        "collective-mismatch",
        "subset-rank-collective-hang",
        "zero3-divergent-forward-hang",
        "fsdp-divergent-init-hang",
    }:
        collect.append(_DETAIL)
    if "signal:desync-report" not in sig and ids & {"subset-rank-collective-hang", "host-work-timeout"}:
        collect.append(_DESYNC)
    if ids & TRANSPORT_IDS:
        collect.append(_NCCL)
    return HangAdvice(tuple(competing), tuple(tell), tuple(collect), seen)


def observed(report: HangReport, limit: int = 4) -> tuple[str, ...]:
    """What this log itself shows that bears on the rival hang classes, in plain words: where the
    ranks wait (different SeqNums: some ranks issued collectives the others never reached; one
    SeqNum with other ops or sizes: different collectives; one and the same collective: the calls
    match), ranks that never entered the stuck collective or printed nothing, what the ranks the
    others wait for were doing, and a stall at the job's first collectives."""
    out: list[str] = []
    sig = report.signals  # the analysis's own reading of the ranks' collectives side by side
    where: dict[str, list[int]] = {}
    for st in report.ranks:
        if st.seq is not None and st.collective:
            where.setdefault(st.collective, []).append(st.rank)
    groups = "; ".join(f"{ranks_text(rs)} in {c}" for c, rs in list(where.items())[:3]) + (
        "; …" if len(where) > 3 else ""
    )
    if len(where) > 1 and "signal:seq-spread" in sig:
        out.append(
            f"the ranks wait at different SeqNums ({groups}): some ranks issued collectives the others never reached"
        )
    elif len(where) > 1 and "signal:same-seq-diff-op" in sig:
        out.append(
            f"the ranks wait at one SeqNum in different ops or sizes ({groups}): they called different collectives"
        )
    elif len(where) == 1 and sum(len(rs) for rs in where.values()) > 1:
        (c,) = where
        out.append(
            f"every rank that reports waits in the same collective ({c}): the calls match; what is missing is a rank that arrives"
        )
    if "signal:never-entered" in sig:
        never = [
            st.rank for st in report.ranks if st.last_enqueued is not None and st.last_enqueued == st.last_completed
        ]
        if never:
            out.append(
                f"{ranks_text(never)} never entered the stuck collective (its last enqueued work is its last completed)"
            )
    waiting = [st.rank for st in report.ranks if st.state == "waiting"]
    quiet = [st.rank for st in report.ranks if st.state in ("running", "silent")]
    if waiting and quiet:
        out.append(
            f"{ranks_text(quiet)} printed no timeout while {ranks_text(waiting)} timed out waiting: the others wait for "
            + ("it" if len(quiet) == 1 else "them")
            + " (busy on the host, or on another code path)"
        )
    if report.absent:
        out.append(f"{ranks_text(report.absent)} printed nothing at all")
    busy = [st for st in report.ranks if st.rank in report.suspects and st.phase is not Phase.UNKNOWN]
    for st in busy[:2]:
        out.append(f"rank {st.rank}, which the others wait for, was in {st.phase.value} when they timed out")
    if "signal:seq-early" in sig:
        out.append(
            "the stuck SeqNum is at most 5: the job hung at its first collectives (set-up, model wrapping, "
            "or the first sync after work one rank does alone, such as tokenising the dataset)"
        )
    return tuple(out[:limit])


def _own_stall_artefacts(report: HangReport, ids: set[str]) -> tuple[Artefact, ...]:
    """What to collect when a serving engine, Horovod or DeepEP reported the stall (PyTorch's
    Flight Recorder and desync report do not see their collectives): for an engine the processes'
    stacks, its debug log and an isolating rerun; for Horovod its timeline, an earlier and fatal
    stall check and the ranks' stacks; for DeepEP a smaller expert-parallel domain and the
    general-purpose all-to-all in its place; NCCL's log when a transport entry competes."""
    out: list[Artefact]
    if report.reported_by == "horovod":
        out = [_HOROVOD_TIMELINE, _HOROVOD_STALL]
        if "signal:frames" not in report.signals:
            out.append(_PY_SPY)
    elif report.reported_by == "deepep":
        out = [_DEEPEP_SCALE, _DEEPEP_FALLBACK]
        if "signal:frames" not in report.signals:
            out.append(_PY_SPY)
    else:
        out = [_ENGINE_PY_SPY]
        if report.reported_by in _ENGINE_LOGS:
            out.append(_ENGINE_LOGS[report.reported_by])
        out.append(_ENGINE_ISOLATE)
    if ids & TRANSPORT_IDS:
        out.append(_NCCL)
    return tuple(out)
