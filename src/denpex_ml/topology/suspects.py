"""Which node and GPU to act on: suspects of a hardware or transport failure.

Two kinds of proof, joined through the job's :class:`~denpex_ml.topology.parse.Topology`:

* **system output**: a hardware event in a host's kernel log, ``nvidia-smi -q`` or DCGM output
  (:mod:`denpex_ml.topology.kernel`) blames that host's GPU (by bus id or index) and the ranks
  that ran on it, whatever the diagnosis (63 watchdog timeouts and one Xid 79 are one failure);
* **the job's log**: when the diagnosed entry's fix is on hardware (its taxonomy category), the
  ranks that printed its root cause blame the host and GPU they ran on.

Suspects on the same host and GPU are merged; those confirmed by system output come first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from denpex_ml.logs.bundle import LogBundle
from denpex_ml.taxonomy import Category, Taxonomy
from denpex_ml.topology.kernel import HardwareEvent, fix_is_on_hardware, hardware_events
from denpex_ml.topology.parse import Topology, parse_topology

__all__ = ["Suspect", "attribute", "fill_placeholders", "suspect_lines"]

#: Evidence lines kept per suspect.
MAX_EVIDENCE = 4


@dataclass(frozen=True)
class Suspect:
    """A node (and GPU, when known) to drain, reset or report, with why and the lines that show it."""

    host: str | None
    gpu: int | None
    bus_id: str | None
    ranks: tuple[int, ...]
    reason: str
    basis: str  #: ``kernel``, ``nvidia-smi``, ``dcgm``, ``log``, or several joined by ``+``
    entry: str | None = None
    xid: int | None = None
    evidence: tuple[str, ...] = ()

    def where(self, host_names: dict[str, str] | None = None) -> str:
        """``node-2 GPU 6 (bus 0000:3b:00; rank 6)``; the real name beside the pseudonym when given."""
        host = self.host or "host not shown in the log"
        if host_names and self.host in host_names:
            host = f"{self.host} ({host_names[self.host]})"
        parts = [host]
        if self.gpu is not None:
            parts.append(f"GPU {self.gpu}")
        extra = []
        if self.bus_id:
            extra.append(f"bus {self.bus_id}")
        if self.ranks:
            shown = ", ".join(map(str, self.ranks[:8])) + (", ..." if len(self.ranks) > 8 else "")
            extra.append(f"rank{'s' if len(self.ranks) > 1 else ''} {shown}")
        return " ".join(parts) + (f" ({'; '.join(extra)})" if extra else "")

    def to_dict(self, host_names: dict[str, str] | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "host": self.host,
            "gpu": self.gpu,
            "bus_id": self.bus_id,
            "ranks": list(self.ranks),
            "reason": self.reason,
            "basis": self.basis,
            "entry": self.entry,
            "xid": self.xid,
            "evidence": list(self.evidence),
        }
        if host_names is not None:
            out["host_name"] = host_names.get(self.host) if self.host else None
        return out


def fill_placeholders(command: str, suspect: Suspect, host_names: dict[str, str] | None = None) -> str:
    """A fix command with ``<node>`` and ``<gpu-index>`` filled from ``suspect`` (the pseudonym,
    or the real name when ``host_names`` has it)."""
    if suspect.host:
        command = command.replace("<node>", (host_names or {}).get(suspect.host, suspect.host))
    if suspect.gpu is not None:
        command = command.replace("<gpu-index>", str(suspect.gpu))
    return command


def suspect_lines(suspects: list[Suspect], host_names: dict[str, str] | None = None, limit: int = 4) -> list[str]:
    """The suspects as text lines for a diagnosis summary (empty without suspects)."""
    if not suspects:
        return []
    out = ["Node to act on:" if len(suspects) == 1 else "Nodes to act on (most certain first):"]
    for s in suspects[:limit]:
        out.append(f"  {s.where(host_names)} [{s.basis}]")
        out.append(f"      {s.reason[:300]}")
    if len(suspects) > limit:
        out.append(f"  ... and {len(suspects) - limit} more")
    return out


class _Merge:
    def __init__(self) -> None:
        self.items: dict[tuple[str | None, object], dict[str, Any]] = {}

    def add(
        self,
        host: str | None,
        gpu: int | None,
        bus: str | None,
        ranks: list[int],
        reason: str,
        basis: str,
        entry: str | None,
        xid: int | None,
        evidence: list[str],
    ) -> None:
        key = (host, gpu if gpu is not None else bus)
        it = self.items.get(key)
        if it is None and gpu is None and bus is None:
            key = (host, None)
            it = self.items.get(key)
        if it is None:
            it = self.items[key] = {
                "host": host, "gpu": gpu, "bus": bus, "ranks": [], "reasons": [], "basis": [],
                "entry": entry, "xid": xid, "evidence": [],
            }  # fmt: skip
        it["bus"] = it["bus"] or bus
        it["entry"] = it["entry"] or entry
        it["xid"] = it["xid"] if it["xid"] is not None else xid
        for r in ranks:
            if r not in it["ranks"]:
                it["ranks"].append(r)
        if reason not in it["reasons"]:
            it["reasons"].append(reason)
        if basis not in it["basis"]:
            it["basis"].append(basis)
        for ev in evidence:
            if ev not in it["evidence"] and len(it["evidence"]) < MAX_EVIDENCE:
                it["evidence"].append(ev)

    def suspects(self) -> list[Suspect]:
        out = [
            Suspect(
                it["host"], it["gpu"], it["bus"], tuple(sorted(it["ranks"])), "; ".join(it["reasons"]),
                "+".join(it["basis"]), it["entry"], it["xid"], tuple(it["evidence"]),
            )
            for it in self.items.values()
        ]  # fmt: skip
        return sorted(out, key=lambda s: (s.basis == "log", -len(s.evidence), s.host or "~", s.gpu or 0))


_BASIS = {"kernel log": "kernel", "nvidia-smi": "nvidia-smi", "DCGM health": "dcgm"}


def _event_place(e: HardwareEvent, topo: Topology) -> tuple[str | None, int | None, list[int]]:
    host = e.host
    if host is None and len(topo.hosts) == 1:
        host = topo.hosts[0]  # one host in the job: its system output is that host's
    gpu = e.gpu
    ranks = topo.ranks_on(host, bus_id=e.bus_id, gpu=gpu) if (e.bus_id or gpu is not None) and host else []
    if gpu is None and ranks:
        gpu = next((p.gpu for r in ranks if (p := topo.ranks[r]).gpu is not None), None)
    return host, gpu, ranks


def attribute(
    bundle: LogBundle,
    taxonomy: Taxonomy,
    label: str,
    rank: int | None,
    evidence: list[Any],
) -> tuple[Topology, list[Suspect]]:
    """The job's topology and, for hardware failures, its suspects (see the module docstring).

    ``evidence`` are the diagnosis' :class:`~denpex_ml.model.diagnosis.Evidence` lines (their
    ``rank``, ``source``, ``line``, ``text`` and ``why`` are read).
    """
    topo = parse_topology(bundle)
    merge = _Merge()
    for e in hardware_events(bundle.system, taxonomy):
        if not e.hardware:
            continue
        host, gpu, ranks = _event_place(e, topo)
        merge.add(
            host, gpu, e.bus_id, ranks, e.reason, _BASIS[e.origin], e.entry, e.xid, [f"{e.source}:{e.lineno}: {e.text}"]
        )
    entry = taxonomy.get(label) if label in taxonomy else None
    if entry is not None and fix_is_on_hardware(entry):
        root_ranks = [ev.rank for ev in evidence if ev.rank is not None and ev.why.startswith("root-cause")]
        ranks = list(dict.fromkeys(([rank] if rank is not None else []) + root_ranks))
        network = entry.category is Category.HARDWARE_NETWORK
        for r in ranks:
            p = topo.place(r)
            lines = [f"{ev.source}:{ev.line}: {ev.text}" for ev in evidence if ev.rank == r][:MAX_EVIDENCE]
            if r in root_ranks:
                why = f"rank {r} printed the root cause of {label}" + (" (first failing rank)" if r == rank else "")
            else:
                why = f"rank {r} is the first failing rank of {label}"
            if p is None or p.host is None:
                merge.add(None, None if network or p is None else p.gpu, None, [r], why, "log", label, None, lines)
            elif network:
                merge.add(p.host, None, None, [r], why, "log", label, None, lines)
            else:
                merge.add(p.host, p.gpu, p.bus_id, [r], why, "log", label, None, lines)
    return topo, merge.suspects()
