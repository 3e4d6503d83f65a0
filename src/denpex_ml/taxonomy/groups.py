"""Families of taxonomy ids that reports, abstention and hang analysis treat together.

The label contract (``shared/taxonomy-ids.md``) lists ids; some questions are asked of a
*family* of them: "is this a hang?", "what is the accuracy on transport failures?". This
module is the one place that says which id belongs where. Ids a user adds fall into
``crash`` (the everyday majority) unless their entry's category says otherwise.
"""

from __future__ import annotations

from typing import Final

from denpex_ml.taxonomy.schema import UNKNOWN_ID

__all__ = ["GROUPS", "HANG_IDS", "NO_FAILURE_ID", "TRANSPORT_IDS", "group_of"]

#: The verdict for a job whose logs show no failure (healthy, still running, cancelled, preempted).
NO_FAILURE_ID: Final = "no-failure"

#: Hangs and deadlocks: every rank waits; the class is decided by what the ranks were doing.
HANG_IDS: Final = frozenset(
    {
        "collective-mismatch",
        "subset-rank-collective-hang",
        "host-work-timeout",
        "zero3-divergent-forward-hang",
        "fsdp-divergent-init-hang",
        "pipeline-p2p-shape-mismatch",
        "moe-ep-overlap-deadlock",
        "moe-pp-layout-aux-loss-hang",
        "moe-alltoall-nvlink-domain-timeout",
    }
)

#: NCCL transport, bootstrap, shared memory and NVLink failures.
TRANSPORT_IDS: Final = frozenset(
    {
        "nccl-network-error",
        "nccl-init-failure",
        "nccl-shm-p2p-failure",
        "duplicate-gpu-assignment",
        "nvlink-xid74-fabric-manager",
    }
)

#: Report groups, in report order.
GROUPS: Final = ("hang", "transport", "crash", "unknown", "no-failure")


def group_of(label: str) -> str:
    """The report group of a label: ``hang``, ``transport``, ``crash``, ``unknown`` or ``no-failure``."""
    if label == UNKNOWN_ID:
        return "unknown"
    if label == NO_FAILURE_ID:
        return "no-failure"
    if label in HANG_IDS:
        return "hang"
    if label in TRANSPORT_IDS:
        return "transport"
    return "crash"
