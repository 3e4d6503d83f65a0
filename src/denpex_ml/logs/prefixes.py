"""Launcher formats: how a log line or a file name says which rank wrote it.

Each launcher format is a small parser registered by name in :data:`LINE_FORMATS`; the
registry is closed (a name maps to one parser) and the order is the order of trial.
A parser gets one line and returns a :class:`Prefix` (rank, host, process id, the rest of
the line) or ``None``. Formats can nest (``node-a: [rank3]: ...``); :func:`parse_prefix`
peels at most three layers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import NamedTuple

from denpex_ml.logs.patterns import (
    CTIME_TIMESTAMP,
    HOST_PREFIX,
    ISO_TIMESTAMP,
    NCCL_HOST,
    RANK_TAG,
    SYSLOG_TIMESTAMP,
)

__all__ = [
    "LINE_FORMATS",
    "Prefix",
    "bracket_hosts",
    "discover_hosts",
    "may_name_rank",
    "message_rank",
    "nccl_debug_prefix",
    "parse_prefix",
    "rank_from_path",
]


class Prefix(NamedTuple):
    """What a line prefix says about its writer. ``rest`` is the line without the prefix."""

    format: str
    rest: str
    rank: int | None = None
    host: str | None = None
    pid: str | None = None
    local_rank: int | None = None


_TORCHRUN = re.compile(r"\[(?:rank|default)(\d{1,6})\]:[ ]?")
#: Open MPI's --tag-output "[jobid,rank]<stderr>:", and horovodrun's own "[rank]<stderr>:"
_MPI = re.compile(r"\[(?:\d+,)?(\d{1,6})\]<std(?:out|err)>:[ ]?")
_SRUN = re.compile(r"[ ]{0,5}(\d{1,6}): ")
_RAY = re.compile(r"\(([A-Za-z_][\w.]*) pid=(\d+)(?:, ip=([\w.:<>-]+))?(?:, [^)]*)?\)[ ]?")
_UCX = re.compile(r"\[([A-Za-z0-9][\w.-]*):(\d+) *:\d+:\d+\] *")
# pdsh / DeepSpeed / mpirun --tag-output host prefixes: "node-a: ...", "10.0.0.1: ...", "gpu017: ...".
# A name holds a digit before its first dot, or is hyphenated. Possessive runs (never given back:
# what follows them cannot be part of them) keep a long name without ": " linear, not quadratic.
_HOST = re.compile("(" + HOST_PREFIX + "): ")
_NOT_HOST_SUFFIX = ("error", "exception", "warning", "warn", "info", "debug", "note")
_NCCL_DEBUG = re.compile("(" + NCCL_HOST + r"):(\d+):(\d+) \[(\d+)\] (?=NCCL|[\w/.-]+:\d+ NCCL)")
_MSG_RANK = re.compile(
    # ``[Rank 3]`` (ProcessGroupNCCL), ``[rank: 3]`` (Lightning's rank-tagged logger)
    r"\[(?:Rank|RANK|rank)(?:[ =]|: )?(\d{1,6})\]|\brank (\d{1,6}) nranks \d|\[PG ID \d+ [^\]]{0,80}?\bRank (\d{1,6})\]"
    # SGLang's "[2025-09-15 14:16:24 TP2] ...": the tensor-parallel rank, when no data- or
    # pipeline-parallel index stands beside it (then the global rank is not in the tag); with the
    # timestamp already split off, the line starts "TP2] "
    r"|^(?:\[\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)? )?TP(\d{1,6})(?: EP\d{1,6})?\] "
)
_RANK_PATH = re.compile(
    r"(?:^|[/_.-])(?:rank|worker|proc|process|task|node_rank|local_rank|gpu)[_.-]?(\d{1,6})(?=$|[/_.-])"
    r"|(?:^|/)attempt_\d+/(\d{1,6})/(?:stdout|stderr|error)"
    r"|(?:^|/)(?:stdout|stderr|out|err|log)[_.-](\d{1,6})(?=$|[._])",
    re.IGNORECASE,
)


def _torchrun(line: str) -> Prefix | None:
    m = _TORCHRUN.match(line)
    return Prefix("torchrun", line[m.end() :], rank=int(m.group(1))) if m else None


def _mpirun(line: str) -> Prefix | None:
    m = _MPI.match(line)
    return Prefix("mpirun", line[m.end() :], rank=int(m.group(1))) if m else None


def _srun(line: str) -> Prefix | None:
    m = _SRUN.match(line)
    return Prefix("srun", line[m.end() :], rank=int(m.group(1))) if m else None


#: vLLM's tensor-parallel worker processes name their rank (``(Worker_TP2 pid=…)``); with pipeline
#: or data parallelism (``Worker_PP1_TP0``, ``Worker_DP1_TP0``) the global rank is not in the name
_VLLM_TP_WORKER = re.compile(r"(?:Vllm)?Worker_TP(\d{1,6})")


def _ray(line: str) -> Prefix | None:
    m = _RAY.match(line)
    if not m:
        return None
    tp = _VLLM_TP_WORKER.fullmatch(m.group(1)) if "_TP" in m.group(1) else None
    rank = int(tp.group(1)) if tp else None
    return Prefix("ray", line[m.end() :], rank=rank, host=m.group(3), pid=m.group(2))


def _ucx(line: str) -> Prefix | None:
    m = _UCX.match(line)
    return Prefix("ucx", line[m.end() :], host=m.group(1), pid=m.group(2)) if m else None


def _nccl_debug(line: str) -> Prefix | None:
    m = _NCCL_DEBUG.match(line)
    if not m:
        return None
    return Prefix("nccl", line, host=m.group(1), pid=m.group(2), local_rank=int(m.group(4)))


def _pdsh(line: str) -> Prefix | None:
    m = _HOST.match(line)
    if not m:
        return None
    host = m.group(1)
    if host.lower().endswith(_NOT_HOST_SUFFIX) or host.endswith(".py"):
        return None
    return Prefix("pdsh", line[m.end() :], host=host)


_JSON_MSG_KEYS = ("message", "msg", "log", "textPayload", "line")
_JSON_RANK_KEYS = ("rank", "RANK", "global_rank", "process_index")
_JSON_POD_KEYS = ("pod", "pod_name", "kubernetes.pod_name", "host", "hostname", "instance")


def _jsonl(line: str) -> Prefix | None:
    if not line.startswith("{") or not line.rstrip().endswith("}"):
        return None
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    flat: dict[str, object] = dict(obj)
    for k, v in obj.items():  # one level of nesting, e.g. {"kubernetes": {"pod_name": ...}}
        if isinstance(v, dict):
            flat.update({f"{k}.{kk}": vv for kk, vv in v.items()})
    msg = next((flat[k] for k in _JSON_MSG_KEYS if isinstance(flat.get(k), str)), None)
    if msg is None:
        return None
    rank: int | None = None
    for k in _JSON_RANK_KEYS:
        v = flat.get(k)
        if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
            rank = v
            break
        if isinstance(v, str) and v.isdigit():
            rank = int(v)
            break
    pod = next((flat[k] for k in _JSON_POD_KEYS if isinstance(flat.get(k), str)), None)
    text = str(msg).rstrip("\n")
    if rank is None:
        inner = _torchrun(text)  # a pod runs several ranks: the message's own prefix names the rank
        if inner is not None and inner.rank is not None:
            rank, text = inner.rank, inner.rest
    if rank is None and isinstance(pod, str):
        rank = rank_from_path(pod)
    host = pod if isinstance(pod, str) else None
    return Prefix("jsonl", text, rank=rank, host=host)


#: Closed registry of line formats, in the order they are tried.
LINE_FORMATS: dict[str, Callable[[str], Prefix | None]] = {
    "torchrun": _torchrun,
    "mpirun": _mpirun,
    "jsonl": _jsonl,
    "ray": _ray,
    "ucx": _ucx,
    "nccl": _nccl_debug,
    "srun": _srun,
    "pdsh": _pdsh,
}

_FIRST_CHARS: dict[str, tuple[str, ...]] = {
    "[": ("torchrun", "mpirun", "ucx"),
    "{": ("jsonl",),
    "(": ("ray",),
}


_FAST = re.compile(r"\[(?:rank|default)(\d{1,6})\]:[ ]?|\[(?:\d+,)?(\d{1,6})\]<std(?:out|err)>:[ ]?")


def _maybe_prefixed(text: str) -> bool:
    if not text:
        return False
    if text[0] in "[({":
        return True
    colon = text.find(":", 0, 256)
    return colon > 0 and text.find(" ", 0, colon) < 0


_LEADING_TS = re.compile(
    r"(?:\[?" + ISO_TIMESTAMP + r"\]?:?|" + SYSLOG_TIMESTAMP + r")[ \t]+|" + CTIME_TIMESTAMP + r"[ \t]*"
)


def parse_prefix(line: str) -> Prefix | None:
    """Launcher prefixes of ``line``, also behind a leading timestamp (kubectl --timestamps, syslog).

    The timestamp stays at the start of ``rest`` so that events can still be ordered.
    """
    first = line[:1]
    if first.isdigit() or first == "[" or first.isupper():
        m = _LEADING_TS.match(line)
        if m is not None:
            inner = _parse_prefix(line[m.end() :])
            if inner is None:
                return None
            ts = line[: m.end()]
            return inner._replace(rest=ts + inner.rest if ts[-1:] in (" ", "\t") else f"{ts} {inner.rest}")
    return _parse_prefix(line)


def _parse_prefix(line: str) -> Prefix | None:
    """Launcher prefixes of ``line`` (fast path for torchrun/mpirun, else :func:`parse_prefixes`)."""
    if line[:1] == "[":
        m = _FAST.match(line)
        if m is not None:
            rest = line[m.end() :]
            rank = int(m.group(1) or m.group(2))
            fmt = "torchrun" if m.group(1) else "mpirun"
            if _maybe_prefixed(rest):
                inner = parse_prefixes(rest)
                if inner is not None:
                    return Prefix(fmt, inner.rest, rank, inner.host, inner.pid, inner.local_rank)
            return Prefix(fmt, rest, rank)
    if not _maybe_prefixed(line) and line[:1] not in " 0123456789":
        return None
    return parse_prefixes(line)


def parse_prefixes(line: str) -> Prefix | None:
    """Peel launcher prefixes off ``line`` (up to three nested layers) and merge what they say.

    >>> p = parse_prefix("node-a: [rank3]: RuntimeError: boom")
    >>> (p.rank, p.host, p.rest)
    (3, 'node-a', 'RuntimeError: boom')
    """
    result: Prefix | None = None
    text = line
    for _ in range(3):
        found = _try_formats(text, nested=result is not None)
        if found is None:
            break
        if result is None:
            result = found
        else:
            result = Prefix(
                format=result.format,
                rest=found.rest,
                # srun's "N: " labels a task (often one per node running torchrun); a torchrun
                # "[rankM]:" inside it is the global rank
                rank=found.rank
                if found.rank is not None and (result.rank is None or (result.format == "srun" and found.format == "torchrun"))
                else result.rank,
                host=result.host or found.host,
                pid=result.pid or found.pid,
                local_rank=result.local_rank if result.local_rank is not None else found.local_rank,
            )
        if found.format == "nccl" or found.rest == text:
            break
        text = found.rest
    return result


def _try_formats(text: str, *, nested: bool) -> Prefix | None:
    if not text:
        return None
    first = text[0]
    names: tuple[str, ...]
    if first in _FIRST_CHARS:
        names = _FIRST_CHARS[first]
    else:
        # host- and NCCL-style prefixes need a ':' before the first space
        colon = text.find(":", 0, 256)
        space = text.find(" ", 0, colon) if colon > 0 else -1
        hostlike = colon > 0 and space < 0
        if first.isdigit() or first == " ":
            names = ("nccl", "srun", "pdsh") if hostlike else ("srun",)
        elif hostlike:
            names = ("nccl", "pdsh")
        else:
            return None
    for name in names:
        if nested and name in ("srun", "jsonl"):
            continue
        p = LINE_FORMATS[name](text)
        if p is not None:
            return p
    return None


def nccl_debug_prefix(text: str) -> Prefix | None:
    """Parse NCCL's ``host:pid:tid [localrank] NCCL ...`` debug prefix anywhere at line start."""
    return _nccl_debug(text)


def may_name_rank(rest: str) -> bool:
    """Whether a line after its timestamp holds one of the marks :func:`message_rank` reads (the
    text form of ``columnar_builder._MSG_RANK_HINT_B``): a cheap screen before the regex."""
    return (
        "[Rank" in rest
        or "[RANK" in rest
        or "[rank" in rest
        or " nranks " in rest
        or "[PG ID" in rest
        or rest.startswith("TP")
    )


def message_rank(text: str) -> int | None:
    """A rank stated inside a message (``[Rank 3]`` from ProcessGroupNCCL, ``rank=3``, SGLang's
    ``[… TP3]``...)."""
    if "ank" not in text and "RANK" not in text and "TP" not in text:
        return None
    m = _MSG_RANK.search(text)
    if not m:
        return None
    return int(next(g for g in m.groups() if g is not None))


def rank_from_path(path: str) -> int | None:
    """Rank encoded in a per-rank file or pod name (rank3.log, worker-3, attempt_0/3/stderr.log)."""
    matches = list(_RANK_PATH.finditer(path))
    if not matches:
        return None
    m = matches[-1]  # the last (innermost) match wins
    return int(next(g for g in m.groups() if g is not None))


_HOST_DISCOVERY = re.compile(
    r"^(?:"
    + RANK_TAG
    + r")?(?:"
    + _HOST.pattern
    + r"|("
    + NCCL_HOST
    + r"):\d+:\d+ \[\d+\] |\[([A-Za-z0-9][\w.-]*):\d+ *:\d+:\d+\])"
    + r"|\b(?:host(?:name)?|node|hostname)\s*[:=]\s*([A-Za-z][\w-]*(?:\.[\w-]+)*)",
    re.MULTILINE,
)


# Hosts in bracketed prefixes, "[gpu-node-7:3]" (host:rank) or "[gpu-node-7:12345:0:1]"
# (Open MPI / UCX host:pid), which discover_hosts does not look for. The name must hold a
# digit or '-' (so "[main:0]" is no host); qualified names are masked by the FQDN rule.
_BRACKET_HOST = re.compile(r"^(?:" + RANK_TAG + r")?\[([A-Za-z][\w-]*[\d-][\w.-]*):\d+(?:[ ]*:\d+)*\]", re.MULTILINE)
# "[train_2.py:10]", "[rank3:0]", "[cuda-0:1]" are a source location, a rank or a device, not hosts.
_NOT_BRACKET_HOST = re.compile(
    r"(?i).*\.(?:py|pyx|c|cc|cpp|cxx|h|hh|hpp|cu|cuh|rs|go|java|js|ts|sh|log|txt|so|yaml|yml|json)"
    r"|(?:rank|local_?rank|default|pid|tid|proc(?:ess)?|worker|cuda|device|dev)[-_]?\d*"
)
_NOT_HOSTS = frozenset({"localhost", "unknown", "none", "null", "n/a"})


def bracket_hosts(text: str) -> set[str]:
    """Hostnames of bracketed ``[host:rank]`` / ``[host:pid:...]`` line prefixes (readers that
    keep whole files learn them with :func:`discover_hosts`; see ``masking.mask_files``)."""
    return {
        host
        for host in (m.group(1) for m in _BRACKET_HOST.finditer(text))
        if host.lower() not in _NOT_HOSTS and not _NOT_BRACKET_HOST.fullmatch(host)
    }


def discover_hosts(block: str) -> set[str]:
    """Hostnames in structural positions of a block of lines (prefixes, ``host : name``)."""
    found: set[str] = set()
    for m in _HOST_DISCOVERY.finditer(block):
        host = next((g for g in m.groups() if g), None)
        if not host or host.lower().endswith(_NOT_HOST_SUFFIX) or host.endswith(".py"):
            continue
        if host[0].isdigit() and host.replace(".", "").isdigit():
            continue  # IP addresses are masked by their own rule
        if host.lower() in ("n/a", "none", "null", "localhost", "unknown"):
            continue
        found.add(host)
    return found
