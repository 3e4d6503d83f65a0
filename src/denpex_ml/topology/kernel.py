"""Hardware events in a job's kernel, ``nvidia-smi -q`` and DCGM output.

Reads the masked lines ingestion kept from those members
(:attr:`~denpex_ml.logs.bundle.LogBundle.system`) into :class:`HardwareEvent` s: driver Xid
lines (``NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU has fallen off the bus``) as (host, bus
id, Xid, time), a GPU fallen off the bus, NIC link events (``mlx5_core``), NVLink / NVSwitch
errors, PCIe AER errors, ``nvidia-smi -q`` ECC counters and row remapping state (with each
GPU's index from ``Minor Number``), DCGM health findings.

Whether an event points at the hardware is decided by the taxonomy: an event whose line
matches a fingerprint of an entry in a hardware category (``hardware-gpu``,
``hardware-network``) names that entry; ECC / row-remapping counters from ``nvidia-smi`` and
failing DCGM health checks are hardware findings by what they measure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from denpex_ml.logs.patterns import SYSLOG_LINE_TIME
from denpex_ml.logs.system import SystemLine
from denpex_ml.taxonomy import Category, Entry, Taxonomy
from denpex_ml.topology.parse import normalise_bus_id

__all__ = ["HARDWARE_CATEGORIES", "HardwareEvent", "fix_is_on_hardware", "hardware_events"]

#: Taxonomy categories whose fix is on a node or a GPU (drain, reset, ticket), not in the job.
HARDWARE_CATEGORIES = frozenset({Category.HARDWARE_GPU, Category.HARDWARE_NETWORK})

_XID = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9a-fA-F:.]+)\): (\d+),\s*(.*)")
_OFF_BUS = re.compile(r"NVRM: GPU (?:at )?(?:PCI:)?([0-9a-fA-F:.]+)[: ].*fallen off the bus", re.I)
_DMESG_TIME = re.compile(r"^\[\s*(\d+\.\d+)\]")
_SYSLOG = re.compile(
    "^(" + SYSLOG_LINE_TIME + ") "
    r"((?:node|ip)-\d+) \S+?: "
)
_NIC = re.compile(r"\b(mlx5_core|mlx5_\d+|ib\d+|bnxt_re\d*|efa\d*)\b.*?(link (?:is )?down|LinkDown|port (?:state|error)"
                  r"|Port module event\[error\]|PHY|retry exceeded|error)", re.I)  # fmt: skip
_NVLINK = re.compile(r"NVLink|NVSwitch|nvswitch|[Ff]abric [Mm]anager", re.I)
_AER = re.compile(r"(?:pcieport|nvidia) ([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.\d).*(?:PCIe Bus Error|AER)")
_SMI_GPU = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d)\s*$")
_SMI_MINOR = re.compile(r"^\s*Minor Number\s*:\s*(\d+)")
_SMI_ECC = re.compile(r"^\s*((?:\w+ )*(?:Uncorrectable|Double Bit)(?: \w+)*)\s*:\s*([1-9]\d*)\s*$", re.I)
_SMI_REMAP = re.compile(r"^\s*(Remapping Failure Occurred|Pending|Pending Page Blacklist)\s*:\s*Yes\b", re.I)
_DCGM_GPU = re.compile(r"GPU ID:\s*(\d+)\s*\|\s*(Warning|Failure|Fail|Error)\b", re.I)
_DCGM_ON_GPU = re.compile(r"\bon GPU (\d+)\b")


_ORIGIN = {"ecc": "nvidia-smi", "row-remap": "nvidia-smi", "health": "DCGM health"}


@dataclass(frozen=True)
class HardwareEvent:
    """One hardware finding in a host's system output (the host is the job's pseudonym)."""

    kind: str  #: ``xid``, ``fallen-off-bus``, ``ecc``, ``row-remap``, ``nic``, ``nvlink``, ``pcie``, ``health``
    host: str | None
    source: str
    lineno: int
    text: str
    bus_id: str | None = None
    gpu: int | None = None
    xid: int | None = None
    time: str | None = None
    entry: str | None = None  #: the hardware taxonomy entry whose fingerprint the line matches
    hardware: bool = False  #: points at the node or GPU (not at the job's code)

    @property
    def reason(self) -> str:
        what = f"Xid {self.xid}" if self.xid is not None else self.kind
        detail = self.text.strip()[-120:]
        return f"{what} in {self.origin}" + (f" ({self.entry})" if self.entry else "") + f": {detail}"

    @property
    def origin(self) -> str:
        """``kernel log``, ``nvidia-smi`` or ``DCGM health``."""
        return _ORIGIN.get(self.kind, "kernel log")

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "host": self.host,
            "gpu": self.gpu,
            "bus_id": self.bus_id,
            "xid": self.xid,
            "time": self.time,
            "entry": self.entry,
            "hardware": self.hardware,
            "source": self.source,
            "line": self.lineno,
            "text": self.text,
        }


def fix_is_on_hardware(entry: Entry) -> bool:
    """Whether the fix of ``entry`` is on a node or GPU (its category is a hardware one)."""
    return entry.category in HARDWARE_CATEGORIES


def _hardware_entry(text: str, entries: list[Entry]) -> str | None:
    for e in entries:
        if any(fp.search(text) for fp in e.fingerprints):
            return e.id
    return None


def hardware_events(lines: Iterable[SystemLine], taxonomy: Taxonomy) -> list[HardwareEvent]:
    """Every hardware event in the kept system lines, in input order."""
    entries = [e for e in taxonomy.entries.values() if fix_is_on_hardware(e)] if taxonomy else []
    out: list[HardwareEvent] = []
    smi_bus: dict[str, str | None] = {}  # source -> the GPU section being read
    smi_index: dict[tuple[str | None, str], int] = {}  # (host, bus id) -> GPU index
    for s in lines:
        text = s.text
        host, when = s.host, None
        m = _SYSLOG.match(text)
        if m:
            when, host = m.group(1), m.group(2)
        else:
            t = _DMESG_TIME.match(text)
            when = t.group(1) if t else None
        found: tuple[str, bool, dict[str, Any]] | None = None
        if s.kind == "nvidia-smi":
            g = _SMI_GPU.match(text.strip())
            mm = _SMI_MINOR.match(text)
            if g:
                smi_bus[s.source] = normalise_bus_id(g.group(1))
            elif mm and smi_bus.get(s.source) is not None:
                smi_index[(host, str(smi_bus[s.source]))] = int(mm.group(1))
            elif _SMI_ECC.match(text):
                found = ("ecc", True, {"bus_id": smi_bus.get(s.source)})
            elif _SMI_REMAP.match(text):
                found = ("row-remap", True, {"bus_id": smi_bus.get(s.source)})
        elif s.kind == "dcgm":
            d = _DCGM_GPU.search(text) or _DCGM_ON_GPU.search(text)
            if d:
                found = ("health", True, {"gpu": int(d.group(1))})
        else:
            found = _kernel_event(text)
        if found is not None:
            kind, hardware, kw = found
            entry = _hardware_entry(text, entries)
            out.append(
                HardwareEvent(
                    kind,
                    host,
                    s.source,
                    s.lineno,
                    text,
                    time=when,
                    entry=entry,
                    hardware=hardware or entry is not None,
                    **kw,
                )
            )
    if smi_index:  # nvidia-smi names each GPU's index once per section: give it to its events
        out = [
            e if e.gpu is not None or e.bus_id is None or (e.host, e.bus_id) not in smi_index
            else _with_gpu(e, smi_index[(e.host, e.bus_id)])
            for e in out
        ]  # fmt: skip
    return out


def _kernel_event(text: str) -> tuple[str, bool, dict[str, Any]] | None:
    """``(kind, points at hardware by itself, fields)`` of a kernel log line, or None."""
    x = _XID.search(text)
    if x:
        return "xid", False, {"bus_id": normalise_bus_id(x.group(1)), "xid": int(x.group(2))}
    f = _OFF_BUS.search(text)
    if f:
        return "fallen-off-bus", True, {"bus_id": normalise_bus_id(f.group(1)), "xid": 79}
    a = _AER.search(text)
    if a:
        return "pcie", False, {"bus_id": normalise_bus_id(a.group(1))}
    if _NVLINK.search(text) and re.search(r"(?i)error|fail|fatal|down", text):
        return "nvlink", False, {}
    if _NIC.search(text):
        return "nic", False, {}
    return None


def _with_gpu(e: HardwareEvent, gpu: int) -> HardwareEvent:
    return replace(e, gpu=gpu)
