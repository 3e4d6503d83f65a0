"""Step 1 of the hang analysis: one pass over every stream's lines, what each says by itself.

For every stream (a rank, a host, the global stream) the scan reads the facts of that stream
(:class:`RankFacts`: its process group, last enqueued/completed work, dump role, whether it timed
out, its stack frames and the collective call they show it parked in), the signals one line shows
(a watchdog timeout, a mismatch or desync report, a store or gloo timeout, the framework in use),
and the ranks a line names (the mismatch check's, the desync report's lagging ranks, the rank the
others wait for in the store, Horovod's ready ranks). :mod:`denpex_ml.hang.analysis` then sets the
streams side by side.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from denpex_ml.hang.frames import (
    Frame,
    collective_call,
    collective_call_site,
    collective_caller,
    live_stacks,
    parse_frames,
)
from denpex_ml.logs.bundle import LogBundle, StreamKey
from denpex_ml.logs.patterns import AsciiScreen

__all__ = ["RankFacts", "StreamScan", "odd_values", "scan_streams"]

_PG = re.compile(r"\[PG (?:ID )?(\d+) (?:PG GUID (\S+?) ?)?\(?(\w*)\)? ?Rank (\d+)\]|\[PG (\d+) Rank (\d+)\]")
_ENQUEUED = re.compile(
    r"Timeout at NCCL work: (-?\d+), last enqueued (?:NCCL )?work: (-?\d+), last completed (?:NCCL )?work: (-?\d+)"
)
_ENQUEUED_SHORT = re.compile(
    r"last enqueued (?:NCCL )?work: (-?\d+), last completed (?:NCCL )?(?:work:?\s*)?(-?\d+)", re.IGNORECASE
)
#: a rank named inside a line no prefix assigned (``[Rank 1] Last enqueued NCCL work: …``)
_RANK_IN_TEXT = re.compile(r"\[Rank (\d+)\]")
#: the rank the others wait for, named by the waiting side: the NCCL unique id it never published
#: in the store, or Horovod's stall inspector listing every rank ready but it
_WAITED_FOR = re.compile(r"retrieving ncclUniqueId from \[(\d+)\]|\[ready ranks: ([\d, ]+)\]")
#: ``monitored_barrier``: "Rank 1 failed to pass monitoredBarrier in 30000 ms", "Ranks 1, 3 failed to pass …"
_MONITORED = re.compile(
    r"Ranks? ([\d, ]+?) failed to pass monitoredBarrier|"
    r"reached monitoredBarrier, but received errors while waiting for send/recv from rank (\d+)"
)
_MISMATCH = re.compile(
    r"Rank (\d+) is running collective: CollectiveFingerPrint\((?:SequenceNumber=(\d+), )?OpType=(\w+)"
    r"(?:, TensorShape=\[([^\]]*)\])?"
)
_DESYNC = re.compile(r"\[([\d, ]+)\] (?:finished collective #\d+, but didn't join|did not join|is not)")
_STORE = re.compile(
    r"waitForInput|[Ss]ocket [Tt]imeout|store->get\(|[Ww]ait timeout|Timed out initializing process group in store|"
    r"store_based_barrier|TCPStore.*[Tt]imed? ?out|DistStoreError|client socket has timed out"
)
_GLOO = re.compile(
    r"gloo.*(?:[Tt]imed out|[Tt]imeout(?!\s*[=:]?\s*\d))|Gloo .*timed out|Timed out waiting \d+ ?ms for (?:recv|send)|"
    r"typically caused by a remote worker (?:hanging|crashing)|Application timeout caused pair closure"
)
#: a peer sent a different number of bytes than this rank expected (gloo's check; NCCL's socket
#: transport: "message truncated : receiving 8 bytes instead of 4")
_SIZE_MISMATCH = re.compile(
    r"Received data size doesn't match expected size|op\.preamble\.length <= op\.nbytes|"
    r"message truncated : receiving \d+ bytes instead of \d+"
)
_WATCHDOG = re.compile(
    r"Watchdog caught collective operation timeout|ProcessGroupNCCL's watchdog got stuck|"
    r"Watchdog caught|[Hh]eartbeat monitor timed out|collective operation timeout"
)
#: a framework's own cross-rank consistency check failed: the ranks built or run different things
#: (DDP's model check, DeepSpeed's ZeRO-3 trace check, TensorFlow's collective shape check and its
#: group-size check, fairseq, JAX's ``sync_global_devices`` name check, Accelerate's debug-mode
#: shape check before a collective, Horovod's coordinator finding ranks that submitted different
#: ops, shapes, types or devices under one tensor name)
_DIVERGED = re.compile(
    r"DDP expects same model across all ranks|[Dd]isagreement (?:on list length )?between rank ?\d+ and rank ?\d+|"
    r"Collective ops is aborted by: Shape mismatch|all_gather_list requires all workers to enter|"
    r"sync_global_devices name mismatch|is joining a group with size \d+, but that group has size \d+|"
    r"Cannot apply desired operation due to shape mismatches|Mismatched [^:]{1,60}: One rank"
)
_DIVERGED_HINTS = (
    "isagreement",
    "same model",
    "Collective ops",
    "all_gather_list",
    "name mismatch",
    "joining a group",
    "shape mismatches",
    "Mismatched",
)
#: a collective's own timeout in other words: the blocking wait of an older c10d ("A call to
#: 'allGather' has taken over 300 seconds. Terminating the distributed job."), NCCL's warning that
#: the program may be hanging around a rank
_BLOCKING_TIMEOUT = re.compile(r"A call to '\w+' has taken over [\d.]+ seconds|NCCL WARN Your program may be hanging")
_BLOCKING_HINTS = ("has taken over", "may be hanging")
#: other hang reports: DeepEP's dispatch/combine receivers timing out, the NCCL watchdog's own frame
_OTHER_HANG = re.compile(
    r"DeepEP (?:dispatch|combine)\b.*\btimeout|DeepEP timeout check failed|DeepEP error: timeout|DeepEP \w+ barrier timeout|"
    r"WorkNCCL::checkTimeout"
)
#: an inference engine's own stall report: vLLM's workers found no free broadcast block for a minute
#: because a peer stopped reading ("some processes are hanging or doing some time-consuming work"),
#: vLLM's engine loop gave up on an iteration (V0) or on a call to its workers (V1's RPC timeout);
#: SGLang's scheduler watchdog found a TP scheduler that stopped making progress, or a rank finished
#: loading weights and waited in vain for the others
_ENGINE_STALL = re.compile(
    r"No available shared memory broadcast block found in \d+ seconds?|Scheduler watchdog timeout \((?:self\.)?watchdog_timeout=|"
    r"Engine iteration timed out|RPC call to \w+ timed out|"
    r"could finish the model loading, but there are other ranks that didn't finish loading"
)
_ENGINE_STALL_HINTS = ("broadcast block", "watchdog_timeout", "iteration timed out", "RPC call", "finish loading")
#: SGLang's wordings among them (the others are vLLM's)
_SGLANG_STALL = ("watchdog_timeout", "finish loading")
#: other stacks' words for a collective or device wait that timed out, or ranks whose collectives
#: disagree: Ascend's stream and AI-core timeouts, TensorFlow's collective executor (its abort at a
#: dataset's "End of sequence" is every finite Keras epoch's end, not a hang, unless a ring
#: collective was aborted by it: one worker ran out of data while the others reduced), HybridEP's
#: timeouts, MPI's truncated message, AWS Neuron's replica groups with different collective ops
_OTHER_STACK_HANG = re.compile(
    r"In the specified timeout waiting event|rtStreamSynchronizeWithTimeout|Vector core execution timed out|"
    r"BaseCollectiveExecutor::StartAbort (?!Out of range)|Aborting Ring\w+ with |"
    r"Collective instance \d+ expected|HYBRID-EP \w+ TIMEOUT|"
    r"MPI_ERR_TRUNCATE|MPI error \d+: Message truncated|mismatching number of cc ops"
)
_OTHER_STACK_HINTS = ("imeout", "timed out", "Collective", "Aborting Ring", "TIMEOUT", "truncat", "TRUNCATE", "cc ops")
#: the top frame (``#0``) of a native thread that waits: a poll, a futex, a yield, a sleep, a blocking
#: read or an MPI progress loop
_NATIVE_WAIT_TOP = re.compile(
    r"^\s*#0\s+(?:0x[0-9a-fA-F]+ in )?(?:__)?(?:GI_)?(?:__)?(?:poll|ppoll|epoll_wait|epoll_pwait|select|pselect\w*|"
    r"futex\w*|do_futex_wait\w*|lll_lock_wait\w*|pthread_cond_\w*wait\w*|sched_yield|nanosleep|clock_nanosleep\w*|"
    r"usleep|sleep|ioctl|syscall|recv\w*|read|accept\w*|MPID\w*[Pp]rogress\w*|\w*progress_wait\w*)\b"
)
#: Horovod's stall inspector lists, after "Missing ranks:" / "Stalled ranks:", one line per rank with
#: the tensors that rank has not submitted (``3: [allreduce.noname.12, broadcast.w_0]``)
#: (a launcher-prefix reader files such a line under rank N, as ``[allreduce.noname.12, …]``)
_STALL_HEAD = re.compile(r"(?:Missing|Stalled) ranks:\s*$")
_STALL_ENTRY = re.compile(r"^\s*(?:\d+: )?\[([^\]]*)\]\s*$")
_READY_RANKS = re.compile(r"(?:([\w./-]+) )?\[ready ranks: ([\d, ]+)\]")
_FIRST_DUMP = "First PG on this rank to signal dumping"
_FOLLOWER = "Observed flight recorder dump signal from another rank"
_DUMPING = "ProcessGroupNCCL preparing to dump debug info"
_NRANKS = re.compile(r"\bnranks (\d+)\b|\bWORLD_SIZE=(\d+)|\bworld[_ ]size[=: ]+(\d+)", re.IGNORECASE)
_CONTEXT = {
    "zero3": re.compile(
        r"zero_optimization.*stage\"?:? ?3|ZeRO[- ]?(?:stage[- ]?)?3|stage3_|partitioned_param|"
        r"fetch_sub_module|zero/partition|deepspeed_zero3|Invalidate trace cache",
        re.IGNORECASE,
    ),
    "fsdp": re.compile(r"\bFSDP|fully_shard|FullyShardedDataParallel|distributed/fsdp/"),
    "moe": re.compile(
        r"\bMoE\b|moe_|/moe/|token_dispatch|expert[_ ]parallel|num_experts|deep_ep|DeepEP", re.IGNORECASE
    ),
    "pipeline": re.compile(
        r"pipeline[_-]model[_-]parallel|PipelineEngine|pipe/engine|p2p_communication|"
        r"pipeline_parallel|\bPP=\d|pp_size|send_forward|recv_forward",
        re.IGNORECASE,
    ),
}
_FRAME_HINT = ('File "', ".py:")
#: a line none of these substrings occurs in can match none of the specific patterns above
_KEYS = re.compile(
    r"atchdog|eartbeat|operation timeout|\[PG |nqueued|First PG|Observed flight|dump debug info|between collectives|"
    r"CollectiveFingerPrint|didn't join|lagging|issing ranks|waitForInput|ocket|ait timeout|imed out|store|Store|"
    r"loo|remote worker|data size|preamble|pair closure|message truncated"
)
_CONTEXT_HINT = re.compile(
    r"zero|stage3|partition|fetch_sub|trace cache|fsdp|fully_?shard|moe|expert|dispatch|"
    r"deep_?ep|pipe|p2p|pp[=_ ]|send_forward|recv_forward",
    re.IGNORECASE,
)
#: the two searches most candidate lines get, RE2 first on ASCII text (Python's case-insensitive
#: alternation costs ~13 us a line, RE2's answer under 1 us)
_KEYS_SCREEN = AsciiScreen(_KEYS)
_CONTEXT_HINT_SCREEN = AsciiScreen(_CONTEXT_HINT)


@dataclass
class RankFacts:
    """What one stream says of itself (filled in as the scan reads it)."""

    frames: list[Frame] = field(default_factory=list)
    parked: str | None = None  # from a stack dump: the collective call it waits in, "" outside any
    parked_by: str | None = None  # the program's function that made that call
    call_site: str | None = None  # file:line of the program's call into the collective it waited in or failed in
    pg: str | None = None
    enqueued: tuple[int, int] | None = None
    dump_role: str | None = None
    timed_out: bool = False
    stack_dumped: bool = False  # a stack dump taken while the process was alive (py-spy, faulthandler on demand)


@dataclass(frozen=True)
class StreamScan:
    """What the lines of all streams say, before they are set side by side."""

    facts: dict[StreamKey, RankFacts]  #: per stream, in the bundle's order
    signals: frozenset[str]  #: the signals lines and stacks show by themselves
    mismatch_ranks: dict[int, tuple[str, str]]  #: rank -> (op, tensor shape) the mismatch check names
    desync_ranks: tuple[int, ...]  #: ranks a desync report or ``monitored_barrier`` names as lagging
    waited_for: tuple[int, ...]  #: ranks the others wait for in the store (their NCCL id)
    ready: frozenset[int]  #: ranks Horovod's stall inspector lists as ready
    text_enqueued: dict[int, tuple[int, int]]  #: (last enqueued, last completed) of a rank a line names
    world: int  #: the largest world size a line states (0: none)
    size_mismatch: bool  #: a transport saw a message of another size than the posted buffer
    global_frames: tuple[Frame, ...]  #: frames of the streams that are no rank's
    reported_by: str | None = None  #: whose own stall check reported the hang (vllm, sglang, horovod, deepep)
    #: older Horovod's stall lines: each distinct set of ready ranks with the tensors it is ready for
    ready_groups: tuple[tuple[frozenset[int], tuple[str, ...]], ...] = ()


def _add_ready_groups(text: str, groups: dict[frozenset[int], list[str]]) -> None:
    """Older Horovod lists each stalled tensor with the ranks ready for it
    (``HorovodAllreduce_grad_0 [ready ranks: 0, 1, 2, 3]``): file this line's tensors under their
    set of ready ranks (every distinct set, first seen first)."""
    for m in _READY_RANKS.finditer(text):
        ranks = frozenset(int(x) for x in m.group(2).replace(" ", "").split(",") if x)
        if ranks:
            names = groups.setdefault(ranks, [])
            if m.group(1) and m.group(1) not in names:
                names.append(m.group(1))


def _ready_sets_disjoint(groups: tuple[tuple[frozenset[int], tuple[str, ...]], ...]) -> bool:
    """Two tensors whose ready ranks share none mean the two halves of the job submitted
    different collectives (a broadcast on some ranks, the gradient all-reduces on the others),
    not that a subset never arrived."""
    sets = [ranks for ranks, _ in groups]
    return any(not (a & b) for i, a in enumerate(sets) for b in sets[i + 1 :])


def _stall_ranks_differ(bundle: LogBundle, ready_groups: tuple[tuple[frozenset[int], tuple[str, ...]], ...]) -> bool:
    """Does a Horovod stall report list ranks waiting for different tensors (the ranks submitted
    different collectives, not merely a subset of ranks the same one)? The report's per-rank lines
    follow its "Missing ranks:" line (a reader may file them under the rank a prefix names); older
    reports give each tensor's ready ranks inline (:func:`_ready_sets_disjoint`)."""
    if _ready_sets_disjoint(ready_groups):
        return True
    heads: list[tuple[str, int]] = []
    for stream in bundle.streams.values():
        heads.extend(
            (line.source, line.lineno)
            for line in stream.lines
            if "ranks:" in line.text and _STALL_HEAD.search(line.text)
        )
    if not heads:
        return False
    entries: dict[tuple[str, int], str] = {}
    for stream in bundle.streams.values():
        for line in stream.lines:
            if line.text.endswith("]") and "[" in line.text:
                m = _STALL_ENTRY.match(line.text)
                if m:
                    entries[(line.source, line.lineno)] = m.group(1).strip()
    for source, at in heads:
        waiting: set[str] = set()
        n = at + 1
        while (source, n) in entries:
            waiting.add(entries[(source, n)])
            n += 1
        if len(waiting) > 1:
            return True
    return False


def scan_streams(bundle: LogBundle) -> StreamScan:
    """Read every stream's lines once (the specific patterns only on the few candidate lines)."""
    signals: set[str] = set()
    facts: dict[StreamKey, RankFacts] = {}
    mismatch_ranks: dict[int, tuple[str, str]] = {}
    desync_ranks: list[int] = []
    waited_for: list[int] = []
    ready: set[int] = set()
    ready_sets: dict[frozenset[int], list[str]] = {}  # older Horovod's stall lines, by set of ready ranks
    text_enqueued: dict[int, tuple[int, int]] = {}
    world = 0
    size_mismatch = False  # a transport saw a message of another size than the posted buffer
    global_frames: list[Frame] = []
    reported_by: str | None = None
    for key, stream in bundle.streams.items():
        f = facts.setdefault(key, RankFacts())
        frame_lines: list[str] = []
        interrupted = False  # the user stopped the run (Ctrl-C): its traceback shows where it waited
        fatal = False  # faulthandler printed the stacks because of a crash (a signal), not a stall
        for line in stream.lines:
            text = line.text
            if "KeyboardInterrupt" in text:
                interrupted = True
            elif (
                "Fatal Python error" in text
                or "received signal SIG" in text
                or "Segmentation fault" in text
                or "<signal handler called>" in text
            ):
                fatal = True  # the stacks below were printed by a crash, not taken of a waiting process
            stripped = text.lstrip()
            if (
                any(h in text for h in _FRAME_HINT)
                or stripped.startswith("Thread ")
                or (stripped[:1] == "#" and stripped[1:2].isdigit())  # gdb's native frames
            ):
                frame_lines.append(text)
            if (
                not line.salient
                and "nranks" not in text
                and "WORLD_SIZE" not in text
                and "nqueued" not in text
                and "ready ranks" not in text
                and "Stalled ops" not in text
                and "by subset of ranks" not in text
                and "monitoredBarrier" not in text
                and "DeepEP" not in text
                and "checkTimeout" not in text
                and "broadcast block" not in text
                and "joining a group" not in text
            ):
                continue
            if "nranks" in text or "orld" in text:
                m = _NRANKS.search(text)
                if m:
                    world = max(world, int(next(g for g in m.groups() if g)))
            if _KEYS_SCREEN.search(text):  # one cheap pass; the specific patterns only on candidate lines
                if _WATCHDOG.search(text):
                    f.timed_out = True
                    signals.add("hang")
                pm = _PG.search(text)
                if pm:
                    f.pg = pm.group(1) or pm.group(5)
                em = _ENQUEUED.search(text) or _ENQUEUED_SHORT.search(text)
                if em:
                    g = em.groups()
                    f.enqueued = (int(g[-2]), int(g[-1]))
                    rm = _RANK_IN_TEXT.search(text) if not isinstance(key, int) else None
                    if rm:
                        text_enqueued[int(rm.group(1))] = f.enqueued
                if _FIRST_DUMP in text:
                    f.dump_role = "first"
                    signals.update(("own-watchdog-first", "hang"))
                elif _FOLLOWER in text and f.dump_role is None:
                    f.dump_role = "follower"
                    signals.add("hang")  # another rank's watchdog timed out and asked every rank to dump
                if _DUMPING in text:
                    signals.add("hang")  # the Flight Recorder is dumped when a collective timed out
                if "mismatch between collectives" in text or "CollectiveFingerPrint(" in text:
                    signals.update(("mismatch-report", "hang"))
                    for mm in _MISMATCH.finditer(text):
                        mismatch_ranks[int(mm.group(1))] = (mm.group(3), mm.group(4) or "")
                if "didn't join" in text or "lagging/dead/mismatched" in text or "missing ranks" in text:
                    signals.update(("desync-report", "hang"))
                    dm = _DESYNC.search(text)
                    if dm:
                        desync_ranks.extend(int(x) for x in dm.group(1).replace(" ", "").split(",") if x)
                if _STORE.search(text):
                    signals.update(("store-timeout", "hang"))
                    f.timed_out = True
                if _GLOO.search(text):
                    signals.update(("gloo-timeout", "hang"))
                    f.timed_out = True
                if _SIZE_MISMATCH.search(text):
                    signals.update(("same-seq-diff-op", "hang"))
                    size_mismatch = True
            if "ready ranks:" in text or "Stalled ops" in text or "by subset of ranks" in text:
                signals.add("hang")  # Horovod's stall inspector: ranks wait for the rest
                reported_by = reported_by or "horovod"
            elif "Horovod has been shut down" in text:
                signals.add("hang")  # a rank left while the others still issued collectives
            if any(h in text for h in _DIVERGED_HINTS) and _DIVERGED.search(text):
                signals.update(("rank-divergence", "hang"))
            if any(h in text for h in _BLOCKING_HINTS) and _BLOCKING_TIMEOUT.search(text):
                signals.add("hang")
                f.timed_out = True
            if any(h in text for h in _OTHER_STACK_HINTS) and _OTHER_STACK_HANG.search(text):
                signals.add("hang")
            if any(h in text for h in _ENGINE_STALL_HINTS) and _ENGINE_STALL.search(text):
                reported_by = reported_by or ("sglang" if any(h in text for h in _SGLANG_STALL) else "vllm")
                signals.add("hang")  # the engine reports its own stall (a peer stopped reading, a stuck scheduler)
            if ("DeepEP" in text or "checkTimeout" in text) and _OTHER_HANG.search(text):
                signals.add("hang")
                if "DeepEP" in text:
                    signals.update(("alltoall", "moe"))
                    reported_by = reported_by or "deepep"
            if "monitoredBarrier" in text:
                mb = _MONITORED.search(text)
                if mb:  # torch's monitored_barrier names the ranks that never arrived
                    signals.update(("desync-report", "barrier", "hang"))
                    desync_ranks.extend(int(x) for x in re.findall(r"\d+", mb.group(1) or mb.group(2)))
            if "ncclUniqueId from [" in text or "ready ranks:" in text:
                wm = _WAITED_FOR.search(text)
                if wm and wm.group(1) is not None:
                    waited_for.append(int(wm.group(1)))
                elif wm:
                    ready.update(int(x) for x in wm.group(2).replace(" ", "").split(",") if x)
                if "ready ranks:" in text:
                    _add_ready_groups(text, ready_sets)
            if _CONTEXT_HINT_SCREEN.search(text):
                for name, rx in _CONTEXT.items():
                    if name not in signals and rx.search(text):
                        signals.add(name)
        fr = parse_frames(frame_lines)
        if fr:
            if not any(_NATIVE_WAIT_TOP.match(t) for t in frame_lines if "#0 " in t):
                # gdb's stacks of a core dump look like those of a live process, but no thread of a
                # process taken while it waited sits anywhere but in a wait at the top of its stack
                fr_live = [x for x in fr if x.kind != "native"]
            else:
                fr_live = fr
            _read_stacks(key, f, fr, fr_live, signals, interrupted=interrupted, fatal=fatal)
        if isinstance(key, int):
            f.frames = fr
        else:
            global_frames.extend(fr)
    ready_groups = tuple((ranks, tuple(names)) for ranks, names in ready_sets.items())
    if _stall_ranks_differ(bundle, ready_groups):
        signals.update(("same-seq-diff-op", "hang"))
    return StreamScan(
        facts=facts,
        signals=frozenset(signals),
        mismatch_ranks=mismatch_ranks,
        desync_ranks=tuple(desync_ranks),
        waited_for=tuple(waited_for),
        ready=frozenset(ready),
        text_enqueued=text_enqueued,
        world=world,
        size_mismatch=size_mismatch,
        global_frames=tuple(global_frames),
        reported_by=reported_by,
        ready_groups=ready_groups,
    )


def _read_stacks(
    key: StreamKey,
    f: RankFacts,
    fr: list[Frame],
    fr_live: list[Frame],
    signals: set[str],
    *,
    interrupted: bool,
    fatal: bool,
) -> None:
    """What one stream's stack frames say: where the rank is parked, and the signals they show
    (``fr_live``: the frames that may come from a dump of a live process)."""
    signals.add("frames")
    dumped = live_stacks(fr_live, interrupted=interrupted, fatal=fatal)
    f.stack_dumped = f.stack_dumped or any(x.kind != "traceback" for x in dumped)
    if dumped:
        waits_in = collective_call(dumped)
        if waits_in is not None:
            signals.add("hang")  # a stack dump shows the rank waiting in a collective
        if isinstance(key, int):
            f.parked = waits_in or ""
            f.parked_by = collective_caller(dumped)
    elif f.timed_out and isinstance(key, int):
        # a rank whose collective timed out raised from inside it: the traceback names the call
        raised = [x for x in fr if x.kind == "traceback"]
        f.parked = collective_call(raised)
        f.parked_by = collective_caller(raised)
    if isinstance(key, int):
        # where the program entered the collective: from a stack dump, else from a raised traceback
        # (a fatal signal's faulthandler dump and a raised traceback still show where it entered)
        kinds = (dumped, [x for x in fr if x.kind == "traceback"], [x for x in fr if x.kind == "faulthandler"])
        f.call_site = next((s for s in map(collective_call_site, kinds) if s is not None), None)
    if any(x.kind == "py-spy" for x in fr):
        signals.add("py-spy")
    for x in fr:
        for name, rx in _CONTEXT.items():
            if name not in signals and rx.search(x.file + " " + x.function):
                signals.add(name)


# ---- what one rank printed differently from all the others

#: an integer standing alone (not part of a word, a decimal or a dotted version), captured so
#: that ``split`` gives the text around the numbers and the numbers in one pass
_INT = re.compile(r"(?<![\w.])(\d+)(?![\w.]|\.\d)")
#: lines whose numbers are positions or counters of the machinery, read by other rules (frames,
#: NCCL traces, watchdog reports) or vary on their own (progress bars)
#: (read on a line's template, its numbers replaced by ``<n>``)
_NOT_PROGRAM_LINE = re.compile(r'File "|\(\S+\.py:<n>\)\s*$|NCCL|Watchdog|WorkNCCL|SeqNum|<n>%\s*\||<n>/<n> \[')
#: dates, clock times and dotted versions (three or more numbers joined): not values a rank chose
_CLOCK = re.compile(r"\d+(?:[-/:.,]\d+){2,}")
#: the lines read per rank: what a program prints about its own set-up comes first
_ODD_VALUE_LINES = 32
#: ranks that must agree on a value before the one that differs counts as odd
_ODD_VALUE_QUORUM = 3
#: beyond this many ranks the rule is not run (its per-line cost, ~10 us, would grow with the job;
#: the stronger rules read collectives, stacks and dumps at any size)
_ODD_VALUE_MAX_RANKS = 64


def odd_values(bundle: LogBundle, ranks: tuple[int, ...]) -> dict[int, str]:
    """Ranks that printed, in a line every rank printed, a number all the other ranks agree on
    differently (``rank 1: building model with hidden=24`` where three ranks say 16,
    ``rank 3: 25 batches`` where the others say 26): a configuration or data split only that
    rank had. At least :data:`_ODD_VALUE_QUORUM` ranks must agree, and the job has at most
    :data:`_ODD_VALUE_MAX_RANKS` ranks; per odd rank, the first such line, its value and the others'."""
    if not _ODD_VALUE_QUORUM < len(ranks) <= _ODD_VALUE_MAX_RANKS:
        return {}
    per: dict[str, dict[int, tuple[str, ...]]] = {}
    texts: dict[tuple[str, int], str] = {}
    for k in ranks:
        seen: set[str] = set()
        for ln in bundle.streams[k].lines[:_ODD_VALUE_LINES]:
            text = ln.text
            parts = _INT.split(_CLOCK.sub("<t>", text) if ":" in text or "-" in text else text)
            if len(parts) == 1:
                continue
            tpl = "<n>".join(parts[0::2])
            if tpl in seen or _NOT_PROGRAM_LINE.search(tpl):
                continue
            seen.add(tpl)
            per.setdefault(tpl, {})[k] = tuple(parts[1::2])
            texts[tpl, k] = text.strip()
    odd: dict[int, str] = {}
    for tpl, by_rank in per.items():
        if len(by_rank) != len(ranks):
            continue
        for i in range(len(next(iter(by_rank.values())))):
            counts = Counter(v[i] for v in by_rank.values()).most_common()
            if len(counts) == 2 and counts[1][1] == 1 and counts[0][1] >= _ODD_VALUE_QUORUM:
                rank = next(k for k, v in by_rank.items() if v[i] == counts[1][0])
                odd.setdefault(rank, f"'{texts[tpl, rank][:160]}' ({counts[1][0]} where the others print {counts[0][0]})")
    return odd
