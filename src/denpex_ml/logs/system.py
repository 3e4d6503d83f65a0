"""Kernel and system logs of a job's hosts, and Slurm job metadata, recognised at ingress.

A job directory may hold, next to the ranks' output, what the operator collected from each
host: ``dmesg`` / ``journalctl -k`` (driver Xid lines, NIC link events), ``nvidia-smi -q``
(ECC counters, row remapping, bus ids), DCGM health output, and the job's Slurm metadata
(``sacct -P`` output or a node list file). This module recognises such members by name or
content, learns the host they belong to *before* their text is masked (so the host becomes a
pseudonym like every other), keeps their hardware-related lines masked in
:attr:`~denpex_ml.logs.bundle.LogBundle.system`, and reads Slurm node lists into
:attr:`~denpex_ml.logs.bundle.LogBundle.job_hosts` (pseudonyms, in node order).

Kernel, nvidia-smi and DCGM members are also ingested as ordinary lines (the taxonomy has
fingerprints for them); Slurm metadata is not (a node list is names, not log text).
Parsing what the kept lines say is :mod:`denpex_ml.topology.kernel`'s job: this floor only
reads and masks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import re2

from denpex_ml.logs.patterns import HOSTNAME, SYSLOG_LINE_TIME

__all__ = [
    "JOB_METADATA_KINDS",
    "MAX_SYSTEM_LINES",
    "SYSTEM_KINDS",
    "SystemLine",
    "expand_hostlist",
    "host_from_name",
    "learn_system_hosts",
    "metadata_hosts",
    "syslog_hosts",
    "system_kind",
]

#: Kinds of system members; the last two are job metadata, not log text.
SYSTEM_KINDS = ("kernel", "nvidia-smi", "dcgm", "sacct", "nodelist")
JOB_METADATA_KINDS = frozenset({"sacct", "nodelist"})
#: Kept hardware lines per job (every system member together).
MAX_SYSTEM_LINES = 4000
#: Largest Slurm metadata member read (bytes).
MAX_METADATA_BYTES = 1 << 20
#: Most hosts a node list may expand to (a larger range is cut there).
MAX_NODELIST_HOSTS = 65536


@dataclass(frozen=True, slots=True)
class SystemLine:
    """One masked line of a system member: its kind, the host (pseudonym) of the member, where."""

    kind: str
    host: str | None
    source: str
    lineno: int
    text: str


# -- recognising a member ------------------------------------------------------------------------
_NAME_KINDS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(?:^|[._-])(?:nvidia[-_]?smi|nvsmi)(?:$|[._-])", re.I), "nvidia-smi"),
    (re.compile(r"(?:^|[._-])dcgmi?(?:$|[._-])", re.I), "dcgm"),
    (re.compile(r"(?:^|[._-])(?:dmesg|kern|kernel|journal|journalctl|syslog)(?:$|[._-])", re.I), "kernel"),
    (re.compile(r"(?:^|[._-])sacct(?:$|[._-])", re.I), "sacct"),
    (re.compile(r"^(?:nodelist|node[-_]list|hostfile|hostlist|slurm[-_]job[-_]nodelist)(?:$|[._-])", re.I), "nodelist"),
)
_KIND_WORDS = re.compile(
    r"(?:^|[._-])(?:nvidia[-_]?smi|nvsmi|dcgmi?|dmesg|kern|kernel|journalctl|journal|syslog|sacct|health|diag|q|"
    r"log|txt|out|gz|xz|bz2)(?=$|[._-])",
    re.I,
)
# RE2 (linear time: a member's first bytes are read for every member of every job)
_HEAD_NVSMI = re2.compile(rb"(?m)=+\s*NVSMI LOG\s*=+|^GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:")
_HEAD_DCGM = re2.compile(rb"(?i)Health Monitor Report|DCGM Diagnostic|dcgmi ")
_HEAD_KERNEL = re2.compile(rb"(?m)^(?:\[ *\d+\.\d+\] |\S.{0,40} kernel: )(?:NVRM|nvidia|mlx5|pcieport|mce|ib)")
_HEAD_SACCT = re2.compile(rb"(?mi)^JobID\|(?:[^\n|]*\|)*?NodeList\b")
#: the same four in one set, in the order they are tried
_HEAD_KINDS = ("nvidia-smi", "sacct", "dcgm", "kernel")
_HEAD_SET = re2.Set.SearchSet()
for _rx in (_HEAD_NVSMI, _HEAD_SACCT, _HEAD_DCGM, _HEAD_KERNEL):
    _HEAD_SET.Add(_rx.pattern)
_HEAD_SET.Compile()


def system_kind(name: str, head: bytes = b"") -> str | None:
    """The kind of system member ``name`` is (one of :data:`SYSTEM_KINDS`), or None.

    By file name first (``dmesg-gpu7.log``, ``node-a/nvidia-smi.txt``, ``sacct.txt``,
    ``nodelist``), then by the first bytes (an ``NVSMI LOG`` banner, a DCGM report, kernel
    ``NVRM:`` lines, a ``sacct -P`` header).

    >>> system_kind("logs/gpu-a17/dmesg.txt")
    'kernel'
    >>> system_kind("rank3.log", b"[  12.5] NVRM: Xid (PCI:0000:3b:00): 79, pid=1")
    'kernel'
    >>> system_kind("rank3.log", b"[rank3]: step 1") is None
    True
    """
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    for rx, kind in _NAME_KINDS:
        if rx.search(base):
            return kind
    found = _HEAD_SET.Match(head)  # the four head patterns by one scan; the first in this order wins
    if not found:
        return None
    return next(kind for i, kind in enumerate(_HEAD_KINDS) if i in found)


_HOSTLIKE = re.compile(HOSTNAME)
_NOT_HOST_DIR = re.compile(
    r"(?:rank|worker|proc|process|task|node_rank|local_rank|attempt|job|run|step|array|logs?|kernel|system|sys|"
    r"hosts?|nodes?|hardware|dmesg|journal|nvidia[-_]?smi|dcgm|slurm|out|err|stdout|stderr)[_.-]?\d*|"
    r"\d{4}-\d\d-\d\d.*|.*\.(?:log|txt|out|err|gz)",
    re.I,
)


def _hostlike(part: str) -> str | None:
    part = part.strip("._-")
    if not part or not _HOSTLIKE.fullmatch(part) or _NOT_HOST_DIR.fullmatch(part) or len(part) > 253:
        return None
    return part


def host_from_name(name: str) -> str | None:
    """The host a system member belongs to, from its name: the file name without its kind words
    (``dmesg-gpu-a17.log``, ``gpu-a17.nvidia-smi.txt``), else its folder (``gpu-a17/dmesg``).
    None when neither looks like a host name (``rank3``, ``logs``, a date are not).

    >>> host_from_name("dmesg-gpu-a17.log"), host_from_name("job/gpu-a17/nvidia-smi-q.txt")
    ('gpu-a17', 'gpu-a17')
    >>> host_from_name("rank3/dmesg.log") is None
    True
    """
    parts = [p for p in name.replace("\\", "/").split("/") if p]
    if not parts:
        return None
    rest = _KIND_WORDS.sub("-", parts[-1])
    host = _hostlike(rest)
    if host is not None:
        return host
    return _hostlike(parts[-2]) if len(parts) >= 2 else None


_SYSLOG_HOST = re2.compile(
    b"(?m)^"
    + SYSLOG_LINE_TIME.encode()
    + rb" ([A-Za-z][A-Za-z0-9_.-]*) (?:kernel|nvidia[\w-]*|nv-[\w-]+|dcgm\w*|systemd|nv-hostengine)(?:\[\d+\])?: "
)


def syslog_hosts(raw: bytes) -> list[str]:
    """Host names in the host field of syslog / ``journalctl`` lines (``Mar 03 10:00:01 gpu-a17
    kernel: ...``), sorted (the same pseudonyms on every run)."""
    return sorted({m.decode("utf-8", "replace") for m in _SYSLOG_HOST.findall(raw)})


#: Lines of a system member worth keeping for attribution (kernel, nvidia-smi, DCGM).
HARDWARE_LINE = re2.compile(
    rb"NVRM|Xid|XID|fallen off the bus|NVLink|NVSwitch|nvswitch|[Ff]abric [Mm]anager|mlx5|\bib\d|[Ll]ink (?:is )?down|"
    rb"LinkDown|port (?:state|error)|PCIe Bus Error|AER|[Mm]achine [Cc]heck|\bmce:|ECC|[Uu]ncorrectable|Double Bit|"
    rb"Remap|Pending|Retired|Minor Number|Bus Id|(?m:^)GPU [0-9A-Fa-f]{4,8}:|GPU ID|on GPU \d|Health|Warning|Fail|"
    rb"Error|[Tt]hrottl|[Tt]emperature"
)


def expand_hostlist(text: str, limit: int = MAX_NODELIST_HOSTS) -> list[str]:
    """Host names of a Slurm host list, in order: ``gpu-[001-003,7],login1`` -> ``gpu-001``,
    ``gpu-002``, ``gpu-003``, ``gpu-7``, ``login1``. Whitespace also separates names.

    >>> expand_hostlist("gpu-[01-03,7] login1")
    ['gpu-01', 'gpu-02', 'gpu-03', 'gpu-7', 'login1']
    """
    out: list[str] = []
    for token in _split_top(text):
        m = re.fullmatch(r"([^\[\]]*)\[([0-9,\-]+)\]([^\[\]]*)", token)
        if m is None:
            if "[" not in token and "]" not in token:
                out.append(token)
            continue
        pre, ranges, post = m.groups()
        for part in ranges.split(","):
            lo, _, hi = part.partition("-")
            if not lo.isdigit() or (hi and not hi.isdigit()):
                continue
            width = len(lo)
            for i in range(int(lo), int(hi or lo) + 1):
                out.append(f"{pre}{i:0{width}d}{post}")
                if len(out) >= limit:
                    return out
    return out


def _split_top(text: str) -> list[str]:
    """Split at commas and whitespace outside brackets."""
    tokens: list[str] = []
    depth = 0
    cur: list[str] = []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        if depth == 0 and (ch == "," or ch.isspace()):
            if cur:
                tokens.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if cur:
        tokens.append("".join(cur))
    return [t for t in tokens if t and len(t) <= 253]


def metadata_hosts(kind: str, text: str) -> tuple[list[str], dict[str, Any]]:
    """Hosts of the job (in node order) and other fields (``state``, ``start``, ``end``) from a
    ``sacct -P`` output or a node list file (one list, or one host per line, ``#`` comments)."""
    if kind == "nodelist":
        hosts: list[str] = []
        for line in text.splitlines():
            line = line.split("#", 1)[0].strip()
            if line.startswith(("SLURM_JOB_NODELIST=", "SLURM_NODELIST=")):
                line = line.split("=", 1)[1].strip("\"'")
            # a hostfile line: "gpu-a17 slots=8"
            line = re.sub(r"\s+(?:slots|max_slots|max-slots)=\d+\s*$", "", line)
            hosts += expand_hostlist(line)
        return _unique(hosts), {}
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines or "|" not in lines[0]:
        return [], {}
    header = [h.strip().lower() for h in lines[0].split("|")]
    if "nodelist" not in header:
        return [], {}
    col = header.index("nodelist")
    meta: dict[str, Any] = {}
    hosts = []
    for line in lines[1:]:
        cells = line.split("|")
        if len(cells) <= col:
            continue
        if not hosts and cells[col].strip() not in ("", "None assigned"):
            hosts = expand_hostlist(cells[col].strip())
        for key in ("state", "start", "end", "elapsed"):
            if key in header and key not in meta and header.index(key) < len(cells):
                meta[key] = cells[header.index(key)].strip()
    return _unique(hosts), meta


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def learn_system_hosts(masker: Any, name: str, text: str) -> str:
    """For readers that keep whole files (the incident store): teach ``masker`` the hosts a
    system member names structurally (its folder or file name, syslog host fields, a Slurm node
    list), and return the text to keep. Slurm metadata comes back with its node lists replaced by
    pseudonyms; other members unchanged (mask them with ``masker`` afterwards)."""
    kind = system_kind(name, text[:8192].encode("utf-8", "replace"))
    if kind is None:
        return text
    if kind in JOB_METADATA_KINDS:
        hosts, _ = metadata_hosts(kind, text)
        pseudonyms = [masker.host_pseudonym(h) for h in hosts]
        if kind == "nodelist":
            return ",".join(pseudonyms) + "\n"
        lines = text.splitlines()
        header = [h.strip().lower() for h in lines[0].split("|")] if lines else []
        col = header.index("nodelist") if "nodelist" in header else -1
        out = lines[:1]
        for line in lines[1:]:
            cells = line.split("|")
            if 0 <= col < len(cells):
                cells[col] = ",".join(masker.host_pseudonym(h) for h in expand_hostlist(cells[col].strip()))
            out.append("|".join(cells))
        return "\n".join(out) + "\n"
    named = host_from_name(name)
    if named:
        masker.host_pseudonym(named)
    masker.learn_hosts(syslog_hosts(text.encode("utf-8", "replace")))
    return text
