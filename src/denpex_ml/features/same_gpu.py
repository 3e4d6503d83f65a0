"""Two processes on one GPU, seen across lines: NCCL's communicator summaries side by side.

Every rank's NCCL prints, once its communicator is set up, ``host:pid:tid [dev] NCCL INFO comm
0x… rank R nranks N cudaDev D busId B``. Two *processes* (different pids) on the *same host*
naming the *same bus id* share one GPU: the device mapping put two ranks on one GPU (no
``set_device(local_rank)``, a hard-coded device, identical ``CUDA_VISIBLE_DEVICES``), which is
``duplicate-gpu-assignment`` even when NCCL's own "Duplicate GPU detected" check never printed
(older NCCL, a job that hung or died before it). One process with several communicators
(tensor- and data-parallel groups) prints one line per communicator with its one bus id; the
pid keeps those apart.

No single line shows it, so it is no pattern of the taxonomy's: :func:`same_gpu_hits` turns
it into a root-cause fingerprint hit of ``duplicate-gpu-assignment`` on the second process's
line, evidence and feature like any other.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from denpex_ml.features.fingerprints import FingerprintHit
from denpex_ml.logs.bundle import LogLine
from denpex_ml.logs.patterns import NCCL_COMM
from denpex_ml.taxonomy import Fingerprint, FingerprintKind, FingerprintRole

__all__ = ["SAME_GPU", "same_gpu_hits"]

_ENTRY = "duplicate-gpu-assignment"
#: NCCL's debug prefix (host:pid:tid [dev]) before its communicator summary; the bus id is the last group
_COMM = re.compile(r"(?P<host>[\w.-]+):(?P<pid>\d+):\d+ \[\d+\] NCCL INFO " + NCCL_COMM)

#: The fingerprint the hits carry (its pattern is a description: no line matches it alone).
SAME_GPU = Fingerprint(
    pattern="two processes on one host name the same GPU bus id in their NCCL communicator lines",
    kind=FingerprintKind.LITERAL,
    role=FingerprintRole.ROOT_CAUSE,
    source="nccl",
    weight=0.9,
    note=(
        "Two processes on one host set up their NCCL communicators on the same GPU (the same busId "
        "in NCCL's 'comm ... rank ... busId' lines): two ranks share a device."
    ),
)


def same_gpu_hits(lines: Iterable[LogLine]) -> list[FingerprintHit]:
    """A ``duplicate-gpu-assignment`` hit on each line whose process shares its host and GPU bus
    id with another process's earlier communicator line (at most one per host and bus id)."""
    first: dict[tuple[str, str], str] = {}  # (host, bus id) -> the pid that named it first
    hits: list[FingerprintHit] = []
    flagged: set[tuple[str, str]] = set()
    for line in lines:
        text = line.text
        if "busId" not in text or "NCCL INFO comm" not in text:
            continue
        m = _COMM.search(text)
        if m is None:
            continue
        key = (m.group("host"), m.group(m.re.groups))
        pid = first.setdefault(key, m.group("pid"))
        if pid != m.group("pid") and key not in flagged:
            flagged.add(key)
            hits.append(FingerprintHit(_ENTRY, SAME_GPU, line))
    return hits
