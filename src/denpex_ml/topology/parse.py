"""Where each rank ran: host, local rank, GPU index and PCI bus id, from a job's masked logs.

Every source a log may carry is read, the most direct first: launcher host prefixes
(``node-b: [rank6]:``), NCCL ``comm 0x... rank N nranks M cudaDev D [nvmlDev G] busId B``
lines (with their ``host:pid:tid [dev]`` prefix), ``CUDA_VISIBLE_DEVICES`` / ``LOCAL_RANK`` /
``SLURM_LOCALID`` / ``SLURMD_NODENAME`` dumps, ``srun: error: host: task N`` lines, Ray Train's
``world_rank=, local_rank=, node_rank=`` table, DeepSpeed's ``global_rank_mapping`` and the
torchelastic failure summary. A Slurm node list (:attr:`LogBundle.job_hosts`) fills the hosts
of the remaining ranks when the ranks are laid out contiguously (torchrun's default), and
says so. Hosts are the job's pseudonyms: this module never sees a real name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from denpex_ml.logs.bundle import LogBundle
from denpex_ml.logs.patterns import NCCL_COMM

__all__ = ["RankPlace", "Topology", "normalise_bus_id", "parse_topology"]

_NCCL_COMM = re.compile(NCCL_COMM)
_NCCL_PREFIX = re.compile(r"^(?:\S+ )?([A-Za-z][\w.-]*):\d+:\d+ \[(\d+)\] ")
_CVD = re.compile(r"\bCUDA_VISIBLE_DEVICES['\"]?\s*[=:]\s*['\"]?(\d+(?:\s*,\s*\d+)*)")
_LOCAL = re.compile(r"\b(?:LOCAL_RANK|SLURM_LOCALID|local_rank)['\"]?\s*[=:]\s*['\"]?(\d+)\b")
_NODENAME = re.compile(r"\bSLURMD?_(?:NODENAME|TOPOLOGY_ADDR)['\"]?\s*[=:]\s*['\"]?((?:node|ip)-\d+)\b")
_SRUN = re.compile(r"srun: error: ((?:node|ip)-\d+): tasks? (\d+(?:[-,]\d+)*): ")
_RAY_TRAIN = re.compile(r"\bip=((?:node|ip)-\d+)\b[^\n]*?\bworld_rank=(\d+), local_rank=(\d+)(?:, node_rank=(\d+))?")
_DS_MAPPING = re.compile(r"'((?:node|ip)-\d+)': \[(\d+(?:, \d+)*)\]")
_WORLD = re.compile(r"\b(?:WORLD_SIZE|world_size|dist_world_size)['\"]?\s*[=:]\s*['\"]?(\d+)\b")
_PSEUDONYM = re.compile(r"(?:node|ip)-\d+")


def normalise_bus_id(text: str) -> str | None:
    """A PCI bus id as ``dddd:bb:dd`` (domain, bus, device; function dropped), from any spelling:
    NCCL's ``3b000``, ``0000:3b:00.0``, nvidia-smi's ``00000000:3B:00.0``, the kernel's
    ``PCI:0000:3b:00``. None when it is not one.

    >>> normalise_bus_id("3b000"), normalise_bus_id("00000000:3B:00.0"), normalise_bus_id("PCI:0000:3b:00")
    ('0000:3b:00', '0000:3b:00', '0000:3b:00')
    """
    s = text.strip().lower().removeprefix("pci:").rstrip(":.")
    try:
        if ":" not in s:
            if not re.fullmatch(r"[0-9a-f]{5,13}", s):
                return None
            domain, bus, dev = int(s[:-5] or "0", 16), int(s[-5:-3], 16), int(s[-3:-1], 16)
        else:
            parts = s.split(":")
            dev = int(parts[-1].split(".")[0], 16)
            bus = int(parts[-2], 16)
            domain = int(parts[-3], 16) if len(parts) >= 3 else 0
    except (ValueError, IndexError):
        return None
    if bus > 0xFF or dev > 0x1F or domain > 0xFFFFFFFF:
        return None
    return f"{domain & 0xFFFF:04x}:{bus:02x}:{dev:02x}"


@dataclass
class RankPlace:
    """Where one rank ran, and which log lines said so (``basis``)."""

    rank: int
    host: str | None = None
    local_rank: int | None = None
    gpu: int | None = None  #: physical GPU index on the host (what ``nvidia-smi -i`` takes)
    cuda_device: int | None = None  #: the CUDA device as the process numbered it
    bus_id: str | None = None
    basis: list[str] = field(default_factory=list)

    def _note(self, what: str) -> None:
        if what not in self.basis:
            self.basis.append(what)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "host": self.host,
            "local_rank": self.local_rank,
            "gpu": self.gpu,
            "bus_id": self.bus_id,
            "basis": list(self.basis),
        }


@dataclass
class Topology:
    """Rank -> host / GPU of one job (hosts are the job's pseudonyms)."""

    ranks: dict[int, RankPlace] = field(default_factory=dict)
    world_size: int | None = None
    hosts: list[str] = field(default_factory=list)

    @property
    def is_empty(self) -> bool:
        return not any(p.host is not None or p.gpu is not None or p.bus_id is not None for p in self.ranks.values())

    def place(self, rank: int) -> RankPlace | None:
        return self.ranks.get(rank)

    def ranks_on(self, host: str | None, *, bus_id: str | None = None, gpu: int | None = None) -> list[int]:
        """Ranks that ran on ``host`` on the GPU with ``bus_id`` (or index ``gpu``)."""
        out = []
        for r, p in sorted(self.ranks.items()):
            if host is not None and p.host != host:
                continue
            if bus_id is not None and p.bus_id is not None:
                if p.bus_id == bus_id:
                    out.append(r)
            elif gpu is not None and p.gpu == gpu:
                out.append(r)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "world_size": self.world_size,
            "hosts": list(self.hosts),
            "ranks": [p.to_dict() for _, p in sorted(self.ranks.items()) if p.host or p.gpu is not None or p.bus_id],
        }


class _Collector:
    def __init__(self) -> None:
        self.places: dict[int, RankPlace] = {}
        self.cvd: dict[int, list[int]] = {}
        self.world = 0
        self.nccl_unranked: list[tuple[int, int, int, int | None, str | None, str | None]] = []

    def at(self, rank: int) -> RankPlace:
        p = self.places.get(rank)
        if p is None:
            p = self.places[rank] = RankPlace(rank)
        return p

    def host(self, rank: int, host: str | None, basis: str) -> None:
        if host is None or not _PSEUDONYM.fullmatch(host):
            return
        p = self.at(rank)
        if p.host is None:
            p.host = host
            p._note(basis)

    def line(self, rank: int | None, host: str | None, text: str) -> None:
        if rank is not None and host is not None:
            self.host(rank, host, "launcher prefix")
        if "nranks" in text and "busId" in text:
            m = _NCCL_COMM.search(text)
            if m:
                r, n, dev, nvml, bus = int(m[1]), int(m[2]), int(m[3]), m[4], normalise_bus_id(m[5])
                self.world = max(self.world, n)
                pm = _NCCL_PREFIX.match(text)
                nccl_host = pm.group(1) if pm else host
                if rank is not None:
                    self._gpu(rank, dev, int(nvml) if nvml is not None else None, bus, nccl_host)
                else:
                    self.nccl_unranked.append((r, n, dev, int(nvml) if nvml is not None else None, bus, nccl_host))
        if rank is None:
            for m in _SRUN.finditer(text):
                for r in _ranks(m.group(2)):
                    self.host(r, m.group(1), "srun error")
            for m in _RAY_TRAIN.finditer(text):
                r = int(m.group(2))
                self.host(r, m.group(1), "ray train")
                self.at(r).local_rank = int(m.group(3))
            if "rank_mapping" in text or "WORLD INFO DICT" in text:
                for m in _DS_MAPPING.finditer(text):
                    for r in _ranks(m.group(2).replace(" ", "")):
                        self.host(r, m.group(1), "deepspeed rank mapping")
        else:
            # each pattern holds its literal: most lines (all of a training loop's) skip the searches
            m = _CVD.search(text) if "CUDA_VISIBLE_DEVICES" in text else None
            if m:
                self.cvd[rank] = [int(x) for x in m.group(1).replace(" ", "").split(",")]
            m = _LOCAL.search(text) if ("LOCAL" in text or "local_rank" in text) else None
            if m and self.at(rank).local_rank is None:
                self.at(rank).local_rank = int(m.group(1))
            m = _NODENAME.search(text) if "SLURM" in text else None
            if m:
                self.host(rank, m.group(1), "slurm environment")
        m = _WORLD.search(text) if ("world_size" in text or "WORLD_SIZE" in text) else None
        if m:
            self.world = max(self.world, int(m.group(1)))

    def _gpu(self, rank: int, dev: int, nvml: int | None, bus: str | None, host: str | None) -> None:
        p = self.at(rank)
        if p.cuda_device is None:
            p.cuda_device = dev
            if nvml is not None:
                p.gpu = nvml
            p.bus_id = p.bus_id or bus
            p._note("nccl init")
        self.host(rank, host, "nccl debug prefix")


def _ranks(spec: str) -> list[int]:
    out: list[int] = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        if lo.isdigit() and (not hi or hi.isdigit()):
            out += range(int(lo), min(int(hi or lo), int(lo) + 4096) + 1)
    return out


def parse_topology(bundle: LogBundle) -> Topology:
    """The topology of one job from its (masked) bundle.

    >>> from denpex_ml.logs import read_logs
    >>> b = read_logs(text="gpu-a17: [rank6]: NCCL INFO comm 0x5f rank 6 nranks 8 cudaDev 6 busId 3b000 - Init COMPLETE\\n")
    >>> parse_topology(b).place(6).to_dict()
    {'rank': 6, 'host': 'node-1', 'local_rank': None, 'gpu': 6, 'bus_id': '0000:3b:00', 'basis': ['launcher prefix', 'nccl init', 'device index (CUDA_VISIBLE_DEVICES not shown)']}
    """
    c = _Collector()
    for ln in bundle.iter_lines():
        c.line(ln.rank, ln.host, ln.text)
    if c.world and c.nccl_unranked:  # a stream named by host:pid: the world communicator's rank is global
        for r, n, dev, nvml, bus, host in c.nccl_unranked:
            if n == c.world:
                c._gpu(r, dev, nvml, bus, host)
    summary = bundle.launcher
    if summary is not None:
        for rec in ([summary.root_cause] if summary.root_cause else []) + list(summary.failures):
            if rec.rank is not None and rec.rank >= 0:
                c.host(rec.rank, rec.host, "torchelastic summary")
                if rec.local_rank is not None and c.at(rec.rank).local_rank is None:
                    c.at(rec.rank).local_rank = rec.local_rank
    world = c.world or (max(bundle.ranks) + 1 if bundle.ranks else 0)
    _fill_from_nodelist(c, bundle.job_hosts, world)
    for rank, p in c.places.items():
        _resolve_gpu(p, c.cvd.get(rank))
    hosts = list(bundle.job_hosts)
    for p in sorted(c.places.values(), key=lambda p: p.rank):
        if p.host is not None and p.host not in hosts:
            hosts.append(p.host)
    return Topology(c.places, world or None, hosts)


def _fill_from_nodelist(c: _Collector, job_hosts: list[str], world: int) -> None:
    """Hosts of ranks no line placed, from the node list, when ranks are contiguous per node and
    every rank placed directly agrees with that layout."""
    if not job_hosts or not world or world % len(job_hosts):
        return
    per_node = world // len(job_hosts)
    for r, p in c.places.items():
        if p.host is not None and (r >= world or job_hosts[r // per_node] != p.host):
            return
    for r in range(world):
        p = c.at(r)
        if p.host is None:
            p.host = job_hosts[r // per_node]
            p._note("slurm node list (contiguous ranks assumed)")
        if p.local_rank is None:
            p.local_rank = r % per_node


def _resolve_gpu(p: RankPlace, cvd: list[int] | None) -> None:
    if p.gpu is not None:
        return
    if cvd:
        if p.cuda_device is not None and p.cuda_device < len(cvd):
            p.gpu = cvd[p.cuda_device]
        elif len(cvd) == 1:
            p.gpu = cvd[0]
        elif p.local_rank is not None and p.local_rank < len(cvd):
            p.gpu = cvd[p.local_rank]
        if p.gpu is not None:
            p._note("CUDA_VISIBLE_DEVICES")
            return
    if p.cuda_device is not None:
        p.gpu = p.cuda_device
        p._note("device index (CUDA_VISIBLE_DEVICES not shown)")
    elif p.local_rank is not None and p.host is not None:
        p.gpu = p.local_rank
        p._note("local rank (device = local rank assumed)")
