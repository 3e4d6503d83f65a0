"""Bad nodes across an archive: which hosts and GPUs the jobs of one run blame.

Pseudonyms are per job (``node-1`` of one job is not ``node-1`` of the next), so a batch run
gives each real host one run-wide name, ``host-1``, ``host-2``... in order of first blame
(:class:`HostRegistry`: the real names stay in this process's memory). :class:`NodeSummary`
counts, per host and per GPU, the jobs that implicate it, how many of them with proof from the
host's own system output (kernel log, nvidia-smi, DCGM), the taxonomy entries and the job ids;
a node blamed by several jobs comes first: a drain candidate.

>>> summary = NodeSummary()
>>> summary.add("job-1", summary.registry.publish([{"host": "node-2", "gpu": 3, "basis": "kernel"}], {"node-2": "gpu-a17"}))
>>> summary.rows()[0]["host"], summary.rows()[0]["jobs"]
('host-1', 1)
"""

from __future__ import annotations

import csv
import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from denpex_ml.errors import OutputWriteError
from denpex_ml.topology.reveal import PRIVATE_MODE

__all__ = ["NODE_COLUMNS", "HostRegistry", "NodeSummary", "compact_suspects"]

#: Columns of the node summary file, in order (``host_name`` only when revealed).
NODE_COLUMNS = ("host", "gpu", "level", "jobs", "confirmed_jobs", "entries", "xids", "reasons", "job_ids")
#: Suspects kept per batch row, and ranks per suspect.
ROW_SUSPECTS = 4
ROW_RANKS = 8


def compact_suspects(suspects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Batch-row form of a diagnosis' suspects (``Suspect.to_dict()``): no evidence lines (the row
    has its own), at most :data:`ROW_SUSPECTS`, ranks cut to :data:`ROW_RANKS`."""
    keys = ("host", "gpu", "bus_id", "ranks", "reason", "basis", "entry", "xid")
    out = []
    for s in suspects[:ROW_SUSPECTS]:
        row = {k: s.get(k) for k in keys}
        row["ranks"] = list(s.get("ranks") or [])[:ROW_RANKS]
        row["reason"] = str(s.get("reason") or "")[:240]
        out.append(row)
    return out


class HostRegistry:
    """Run-wide names of real hosts (``host-N``), kept in memory for one batch run."""

    def __init__(self) -> None:
        self._names: dict[str, str] = {}

    def name(self, real: str) -> str:
        """The run-wide name of ``real`` (given on first sight)."""
        n = self._names.get(real)
        if n is None:
            n = self._names[real] = f"host-{len(self._names) + 1}"
        return n

    def reveal_map(self) -> dict[str, str]:
        """``host-N`` -> real name: for the owner only (see :mod:`denpex_ml.topology.reveal`)."""
        return {n: real for real, n in self._names.items()}

    def publish(self, suspects: list[dict[str, Any]], host_names: dict[str, str]) -> list[dict[str, Any]]:
        """``suspects`` of one job with its pseudonym moved to ``node`` and ``host`` set to the
        run-wide name (None when the real name did not reach this process, e.g. from Ray)."""
        out = []
        for s in suspects:
            node = s.get("node", s.get("host"))
            real = host_names.get(node) if node else None
            out.append({**s, "host": self.name(real) if real else None, "node": node})
        return out


@dataclass
class _Tally:
    jobs: list[str] = field(default_factory=list)
    confirmed: set[str] = field(default_factory=set)
    entries: Counter[str] = field(default_factory=Counter)
    xids: Counter[int] = field(default_factory=Counter)
    reasons: Counter[str] = field(default_factory=Counter)

    def add(self, job_id: str, s: dict[str, Any]) -> None:
        if job_id not in self.jobs:
            self.jobs.append(job_id)
            if s.get("entry"):
                self.entries[str(s["entry"])] += 1
        if s.get("basis") and s["basis"] != "log":
            self.confirmed.add(job_id)
        if s.get("xid") is not None:
            self.xids[int(s["xid"])] += 1
        reason = str(s.get("reason") or "").split(": ", 1)[0][:80]
        if reason:
            self.reasons[reason] += 1


class NodeSummary:
    """Hosts and GPUs blamed across the jobs of one run, worst first.

    Fed by :func:`~denpex_ml.batch.score.score_archive` (``nodes=``) with each row's suspects,
    or by :meth:`add`; written by :meth:`write` (``denpex-ml score --nodes FILE``).
    """

    def __init__(self, registry: HostRegistry | None = None) -> None:
        self.registry = registry or HostRegistry()
        self._nodes: dict[str, _Tally] = {}
        self._gpus: dict[tuple[str, int], _Tally] = {}

    def __len__(self) -> int:
        return len(self._nodes)

    def add(self, job_id: str, suspects: list[dict[str, Any]]) -> None:
        """Count the published suspects (run-wide ``host`` names) of one job."""
        for s in suspects:
            host = s.get("host")
            if not host:
                continue
            self._nodes.setdefault(host, _Tally()).add(job_id, s)
            if s.get("gpu") is not None:
                self._gpus.setdefault((host, int(s["gpu"])), _Tally()).add(job_id, s)

    def rows(self, *, reveal: bool = False) -> list[dict[str, Any]]:
        """One row per host (``level`` ``node``), each followed by its GPUs (``gpu``), hosts
        blamed by the most jobs first (then the most confirmed by system output)."""
        names = self.registry.reveal_map() if reveal else {}

        def row(host: str, gpu: int | None, t: _Tally) -> dict[str, Any]:
            out: dict[str, Any] = {
                "host": host,
                "gpu": gpu,
                "level": "node" if gpu is None else "gpu",
                "jobs": len(t.jobs),
                "confirmed_jobs": len(t.confirmed),
                "entries": ";".join(f"{k}:{v}" for k, v in t.entries.most_common()),
                "xids": ";".join(f"{k}:{v}" for k, v in t.xids.most_common()),
                "reasons": ";".join(k for k, _ in t.reasons.most_common(3)),
                "job_ids": ";".join(t.jobs),
            }
            if reveal:
                out["host_name"] = names.get(host)
            return out

        def order(item: tuple[str, _Tally]) -> tuple[int, int, int]:
            host, t = item
            return (-len(t.jobs), -len(t.confirmed), int(host.rsplit("-", 1)[-1]) if host[-1:].isdigit() else 0)

        out = []
        for host, t in sorted(self._nodes.items(), key=order):
            out.append(row(host, None, t))
            gpus = sorted(
                ((g, gt) for (h, g), gt in self._gpus.items() if h == host), key=lambda x: (-len(x[1].jobs), x[0])
            )
            out += [row(host, g, gt) for g, gt in gpus]
        return out

    def write(self, path: str | os.PathLike[str], *, reveal: bool = False) -> Path:
        """Write the rows as CSV (or JSON lines for ``.jsonl``). With ``reveal`` a ``host_name``
        column holds the real names and the file is made readable by its owner only (0600)."""
        p = Path(path)
        rows = self.rows(reveal=reveal)
        columns = (*NODE_COLUMNS[:1], "host_name", *NODE_COLUMNS[1:]) if reveal else NODE_COLUMNS
        try:
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_MODE if reveal else 0o666)
            if reveal:
                os.fchmod(fd, PRIVATE_MODE)
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
                if p.suffix.lower() in (".jsonl", ".json", ".ndjson"):
                    for r in rows:
                        fh.write(json.dumps(r, ensure_ascii=False) + "\n")
                else:
                    w = csv.DictWriter(fh, fieldnames=list(columns))
                    w.writeheader()
                    w.writerows({k: ("" if r.get(k) is None else r[k]) for k in columns} for r in rows)
        except OSError as exc:
            raise OutputWriteError(f"{p}: cannot write the node summary ({exc.strerror or exc})") from None
        return p
