"""Cross-rank structure of a job: who timed out in which collective, who crashed, how.

Hang classes share the same loud symptom (watchdog timeouts on the waiting ranks); what
separates them is the pattern across ranks: the same SeqNum with a different op or size
(mismatched collectives, divergent forward), some ranks one or two SeqNums ahead (a
subset of ranks reached a collective the others never called), or one rank silent or
crashed while the others wait.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import re2

from denpex_ml.features.select import is_error_line
from denpex_ml.logs.bundle import LogBundle, LogLine, StreamKey

__all__ = ["FEATURE_NAMES", "OP_TYPES", "CollectiveState", "StructureFeatures", "analyse_structure"]

_WORK = re.compile(
    r"WorkNCCL\(SeqNum=(\d+), OpType=(\w+)(?:, NumelIn=(-?\d+), NumelOut=(-?\d+))?(?:, Timeout\(ms\)=(\d+))?"
)
_ENQUEUED = re.compile(r"last enqueued (?:NCCL )?work: (-?\d+), last completed (?:NCCL )?work: (-?\d+)")
_EXIT = re.compile(
    r"exit ?code\s*[:=]?\s*(-?\d+)|exited with (?:exit )?code (-?\d+)|returned non-zero exit status (-?\d+)"
)
_SIGNAL = re.compile(r"\b(SIGKILL|SIGBUS|SIGSEGV|SIGABRT|SIGTERM|SIGINT|SIGHUP|SIGFPE|SIGILL)\b")
_WATCHDOG = "Watchdog caught collective operation timeout"
_EXC_NAME = re.compile(r"\b([A-Z]\w*(?:Error|Exception))\b")
# The words an error line uses, by what they are about, for the failures no fingerprint has met
# yet: another stack's start-up failure speaks of connecting, binding, resolving and waiting for
# peers; another accelerator's allocator speaks of device memory. One screen per salient line (most
# hold none of these words; RE2, 16 times faster than ``re`` on this many alternatives), then
# whether the line reports a failure, then the word classes.
_VOCAB_SCREEN = re2.compile(r"(?i)connect|refused|bind|bound|address|host|resolv|reach|port\b|socket|endpoint|rendezvous|"
                           r"bootstrap|handshake|interface|peer|memory|alloc|\boom\b")
# ... on a line that reports something going wrong (not NCCL's "Bootstrap : Using eth0")
_FAILING = re2.compile(
    r"(?i)\b(?:fail\w*|error|refused|cannot|can't|unable|not enough|insufficient|exceed\w*|timed? ?out|abort\w*|"
    r"fatal|retry|not ready|still waiting|overflow|exhausted|out of memory)\b"
)
_STARTUP_WORDS = re.compile(
    r"(?i)\b(?:connect(?:ion|ed|ing)?|refused|bind|bound|address|hostname|resolv\w*|unreachable|port|socket|"
    r"endpoint|rendezvous|bootstrap|handshake|interface|peers?)\b"
)
_DEVICE_MEMORY = re.compile(
    r"(?i)\b(?:device|gpu|hbm|dram|vram|npu|xpu|tpu|hpu|ipu|metal|cuda|tile)\b[^\n]{0,80}?\b(?:memory|alloc\w*)\b"
    r"|\b(?:memory|alloc\w*)\b[^\n]{0,80}?\b(?:device|gpu|hbm|dram|vram|npu|xpu|tpu|hpu|ipu|metal|cuda|tile)\b"
)
_OUT_OF_MEMORY = re.compile(
    r"(?i)\bout[ -]of[ -]memory\b|\b(?:insufficient|not enough|ran out of|exhausted)\b[^\n]{0,20}\bmemory\b"
    r"|\bmemory\b[^\n]{0,20}\b(?:is overflow|exhausted|not enough)\b|\boom\b"
)

OP_TYPES = (
    "ALLREDUCE", "ALLTOALL", "ALLGATHER", "_ALLGATHER_BASE", "REDUCE_SCATTER", "BROADCAST",
    "SEND", "RECV", "BARRIER", "COALESCED", "GATHER", "SCATTER",
)  # fmt: skip
_SIGNALS = ("SIGKILL", "SIGBUS", "SIGSEGV", "SIGABRT", "SIGTERM")
_EXITS = (-9, -7, -11, -6, 1)

FEATURE_NAMES: tuple[str, ...] = (
    "log_ranks",
    "log_streams",
    "no_rank_info",
    "log_lines",
    "any_watchdog",
    "frac_ranks_watchdog",
    "seq_same",
    "seq_spread_small",
    "seq_spread_large",
    "same_seq_diff_op",
    "numel_small",
    "log_timeout_s",
    "enqueued_ahead",
    *(f"op_{op.lower()}" for op in OP_TYPES),
    "has_traceback",
    "log_exception_types",
    "frac_ranks_exception",
    "one_rank_exception",
    "silent_rank",
    *(f"signal_{s.lower()}" for s in _SIGNALS),
    *(f"exit_{c}".replace("-", "m") for c in _EXITS),
    "launcher_summary",
    "has_timestamps",
    "error_words_startup",
    "error_words_device_memory",
    "error_words_out_of_memory",
)


@dataclass
class CollectiveState:
    """The last collective a rank reported in a watchdog/heartbeat line."""

    seq: int
    op: str
    numel_in: int | None = None
    numel_out: int | None = None
    timeout_ms: int | None = None


@dataclass
class StructureFeatures:
    """Numeric features (see :data:`FEATURE_NAMES`) plus per-rank facts for the initiator."""

    vector: np.ndarray
    collectives: dict[StreamKey, CollectiveState] = field(default_factory=dict)
    exception_ranks: dict[StreamKey, str] = field(default_factory=dict)
    watchdog_ranks: set[StreamKey] = field(default_factory=set)
    first_error_ts: dict[StreamKey, float] = field(default_factory=dict)


def _op_family(op: str) -> str:
    op = op.upper()
    if op.startswith("_REDUCE_SCATTER") or op.startswith("REDUCE_SCATTER"):
        return "REDUCE_SCATTER"
    if op.startswith("ALLTOALL"):
        return "ALLTOALL"
    return op


def analyse_structure(bundle: LogBundle) -> StructureFeatures:
    """Compute the cross-rank features of one job."""
    collectives: dict[StreamKey, CollectiveState] = {}
    exception_ranks: dict[StreamKey, str] = {}
    watchdog: set[StreamKey] = set()
    first_error_ts: dict[StreamKey, float] = {}
    ops: Counter[str] = Counter()
    signals: set[str] = set()
    exits: set[int] = set()
    exc_types: set[str] = set()
    has_tb = False
    enqueued_ahead = False
    timeouts: list[int] = []
    has_ts = False
    vocab_startup = vocab_device = vocab_oom = False

    def note_collective(key: StreamKey, text: str) -> None:
        m = _WORK.search(text)
        if m is None:
            return
        seq, op = int(m.group(1)), m.group(2)
        ops[_op_family(op)] += 1
        state = CollectiveState(
            seq,
            op,
            int(m.group(3)) if m.group(3) else None,
            int(m.group(4)) if m.group(4) else None,
            int(m.group(5)) if m.group(5) else None,
        )
        if state.timeout_ms:
            timeouts.append(state.timeout_ms)
        prev = collectives.get(key)
        if prev is None or seq >= prev.seq:
            collectives[key] = state

    # A watchdog report broken over lines: "[rank6] Watchdog caught collective operation timeout:"
    # with "WorkNCCL(SeqNum=…, OpType=…," and "NumelIn=…, Timeout(ms)=…)" on the next lines,
    # which carry no rank prefix and so sit in another stream. They are joined back by position.
    wrapped: dict[tuple[str, int], StreamKey] = {}  # (source, line) of a rank's report without its WorkNCCL
    details: list[tuple[StreamKey, LogLine]] = []  # lines that start with WorkNCCL(
    rest_of: dict[tuple[str, int], str] = {}  # lines that may end a wrapped WorkNCCL(...)
    for key, stream in bundle.streams.items():
        for line in stream.lines:
            text = line.text
            if ("NumelIn=" in text or "Timeout(ms)=" in text) and "WorkNCCL(" not in text:
                rest_of[(line.source, line.lineno)] = text
            if not line.salient:
                continue
            if _WATCHDOG in text or "WorkNCCL(" in text:
                if _WATCHDOG in text:
                    watchdog.add(key)
                    if "WorkNCCL(" not in text and isinstance(key, int):
                        wrapped[(line.source, line.lineno)] = key
                        continue
                elif text.lstrip().startswith("WorkNCCL("):
                    details.append((key, line))
                    continue
                note_collective(key, text)
                continue
            m2 = _ENQUEUED.search(text)
            if m2 and int(m2.group(1)) - int(m2.group(2)) > 1:
                enqueued_ahead = True
            if "Traceback" in text:
                has_tb = True
            for s in _SIGNAL.findall(text):
                signals.add(s)
            for m3 in _EXIT.finditer(text):
                code = next(g for g in m3.groups() if g is not None)
                exits.add(int(code))
            em = _EXC_NAME.search(text)
            if em and "DistBackendError" not in text and "ChildFailedError" not in text:
                exc_types.add(em.group(1))
                if key not in exception_ranks and "Timeout" not in em.group(1):
                    exception_ranks[key] = text
            if _VOCAB_SCREEN.search(text) and _FAILING.search(text):
                vocab_startup = vocab_startup or _STARTUP_WORDS.search(text) is not None
                vocab_device = vocab_device or _DEVICE_MEMORY.search(text) is not None
                vocab_oom = vocab_oom or _OUT_OF_MEMORY.search(text) is not None
            if is_error_line(text):
                ts = line.timestamp
                if ts is not None:
                    has_ts = True
                    if key not in first_error_ts:
                        first_error_ts[key] = ts
    for key, line in details:
        owner = wrapped.get((line.source, line.lineno - 1))
        text = line.text
        if owner is not None:
            key = owner
            tail = rest_of.get((line.source, line.lineno + 1)) if "Timeout(ms)=" not in text else None
            if tail is not None:
                text = f"{text.rstrip()} {tail.strip()}"
        note_collective(key, text)
    ranks = bundle.ranks
    seqs = [c.seq for c in collectives.values()]
    spread = (max(seqs) - min(seqs)) if seqs else -1
    by_seq: dict[int, set[tuple[str, int | None]]] = {}
    for c in collectives.values():
        by_seq.setdefault(c.seq, set()).add((_op_family(c.op), c.numel_in))
    same_seq_diff = any(len(v) > 1 for v in by_seq.values())
    numel_small = any(c.numel_in is not None and c.numel_in <= 1 for c in collectives.values())
    rank_keys = [k for k in bundle.streams if isinstance(k, int)]
    exc_ranks_int = [k for k in exception_ranks if isinstance(k, int)]
    silent = 0.0
    if watchdog and rank_keys:
        silent = float(any(k not in watchdog and k not in exception_ranks for k in rank_keys))
    launcher = bundle.launcher
    if launcher and launcher.root_cause:
        if launcher.root_cause.signal:
            signals.add(launcher.root_cause.signal)
        if launcher.root_cause.exitcode is not None:
            exits.add(launcher.root_cause.exitcode)
    values: list[float] = [
        math.log1p(len(ranks)),
        math.log1p(len(bundle.streams)),
        float(not ranks),
        math.log1p(bundle.n_lines) / 10.0,
        float(bool(watchdog)),
        len([k for k in watchdog if isinstance(k, int)]) / max(len(rank_keys), 1),
        float(spread == 0),
        float(0 < spread <= 2),
        float(spread > 2),
        float(same_seq_diff),
        float(numel_small),
        math.log10(max(timeouts) / 1000.0) / 4.0 if timeouts else 0.0,
        float(enqueued_ahead),
        *(float(ops[op] > 0) for op in OP_TYPES),
        float(has_tb),
        math.log1p(len(exc_types)),
        len(exc_ranks_int) / max(len(rank_keys), 1),
        float(len(exception_ranks) == 1),
        silent,
        *(float(s in signals) for s in _SIGNALS),
        *(float(c in exits) for c in _EXITS),
        float(launcher is not None),
        float(has_ts),
        float(vocab_startup),
        float(vocab_device),
        float(vocab_oom),
    ]
    vec = np.asarray(values, dtype=np.float32)
    assert vec.shape[0] == len(FEATURE_NAMES)
    return StructureFeatures(vec, collectives, exception_ranks, watchdog, first_error_ts)
