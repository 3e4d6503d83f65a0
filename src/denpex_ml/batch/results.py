"""One result row per job, and the files they are written to (JSONL, CSV, Parquet).

Rows are written as they arrive and flushed, so an interrupted run keeps every finished job;
``--resume`` reads them back and scores only the rest (error rows are retried).
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

from denpex_ml.errors import InvalidInputError

__all__ = ["FORMATS", "JobResult", "ResultSink", "format_of", "read_results"]

FORMATS = ("jsonl", "csv", "parquet")

#: Columns of CSV and Parquet files, in order (JSONL rows have the same keys).
COLUMNS = (
    "job_id",
    "status",
    "label",
    "title",
    "confidence",
    "abstained",
    "best_guess",
    "alternatives",
    "initiating_rank",
    "initiating_reason",
    "hang_phase",
    "hang_suspects",
    "evidence",
    "ranks",
    "lines",
    "bytes",
    "seconds",
    "warnings",
    "error_type",
    "error",
    "model",
)
_NESTED = ("alternatives", "hang_suspects", "evidence", "warnings")


@dataclass
class JobResult:
    """The outcome of scoring one job: a diagnosis summary, or an error.

    ``status`` is ``"ok"`` or ``"error"``; for errors ``error_type`` is the
    :class:`~denpex_ml.errors.DenpexError` subclass (or ``InternalError``) and ``error`` its
    message, and the diagnosis fields are empty.
    """

    job_id: str
    status: str = "ok"
    label: str | None = None
    title: str | None = None
    confidence: float | None = None
    abstained: bool | None = None
    best_guess: str | None = None
    alternatives: list[dict[str, Any]] = field(default_factory=list)
    initiating_rank: int | None = None
    initiating_reason: str = ""
    hang_phase: str | None = None  #: the phase a hang happened in (hang analysis), else None
    hang_suspects: list[int] = field(default_factory=list)  #: ranks the others waited for
    evidence: list[dict[str, Any]] = field(default_factory=list)
    ranks: int | None = None
    lines: int | None = None
    bytes: int | None = None
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)
    error_type: str | None = None
    error: str | None = None
    model: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> JobResult:
        data: dict[str, Any] = {k: row.get(k) for k in COLUMNS if k in row}
        for k in _NESTED:
            v = data.get(k)
            if isinstance(v, str):
                data[k] = json.loads(v) if v else []
            elif v is None:
                data[k] = []
        for k in ("confidence", "seconds"):
            if data.get(k) in ("", None):
                data[k] = None if k == "confidence" else 0.0
            else:
                data[k] = float(data[k])
        for k in ("initiating_rank", "ranks", "lines", "bytes"):
            data[k] = None if data.get(k) in ("", None) else int(data[k])
        if isinstance(data.get("abstained"), str):
            data["abstained"] = {"True": True, "False": False}.get(data["abstained"])
        for k in ("label", "title", "best_guess", "hang_phase", "error_type", "error", "model"):
            if data.get(k) == "":
                data[k] = None
        data["initiating_reason"] = data.get("initiating_reason") or ""
        return cls(**data)

    @classmethod
    def failed(cls, job_id: str, error_type: str, message: str, seconds: float = 0.0) -> JobResult:
        return cls(job_id=job_id, status="error", error_type=error_type, error=message, seconds=seconds)


def _flat(row: dict[str, Any]) -> dict[str, Any]:
    out = dict(row)
    for k in _NESTED:
        out[k] = json.dumps(out[k], ensure_ascii=False)
    return out


def format_of(path: str | os.PathLike[str], fmt: str | None = None) -> str:
    """The output format: ``fmt`` if given, else from the file suffix."""
    if fmt is None:
        suffix = Path(path).suffix.lower().lstrip(".")
        fmt = {"json": "jsonl", "ndjson": "jsonl", "pq": "parquet"}.get(suffix, suffix)
    if fmt not in FORMATS:
        raise InvalidInputError(
            f"{path}: unknown results format {fmt!r}; use one of {', '.join(FORMATS)} (by suffix or --format)"
        )
    return fmt


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by an interruption: that job is scored again
            if isinstance(row, dict) and "job_id" in row:
                rows.append(row)
    return rows


def _read_csv(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8", newline="") as fh:
        return [row for row in csv.DictReader(fh) if row.get("job_id") and row.get("status") in ("ok", "error")]


def read_results(path: str | os.PathLike[str], fmt: str | None = None) -> list[JobResult]:
    """Read a results file written by :class:`ResultSink` (any format)."""
    p = Path(path)
    fmt = format_of(p, fmt)
    if fmt == "jsonl":
        rows = _read_jsonl(p)
    elif fmt == "csv":
        rows = _read_csv(p)
    else:
        import pyarrow.parquet as pq

        rows = pq.read_table(p).to_pylist()
    return [JobResult.from_dict(r) for r in rows]


class ResultSink:
    """Appends result rows to a file, flushing each one.

    Parquet cannot be appended to safely, so rows go to a JSONL journal next to it
    (``OUT.parquet.partial.jsonl``) and the Parquet file is written by :meth:`close`.
    With ``resume=True`` the finished (``ok``) rows already there are kept and their job ids
    are in :attr:`done`; error rows are dropped so that those jobs are tried again.
    """

    def __init__(self, path: str | os.PathLike[str], *, fmt: str | None = None, resume: bool = False) -> None:
        self.path = Path(path)
        self.fmt = format_of(self.path, fmt)
        self.journal = self.path.with_name(self.path.name + ".partial.jsonl") if self.fmt == "parquet" else self.path
        self.path.parent.mkdir(parents=True, exist_ok=True)
        kept: list[dict[str, Any]] = []
        if resume:
            if self.fmt == "parquet" and self.path.exists():
                kept += [r.to_dict() for r in read_results(self.path)]
            if self.journal.exists():
                kept += [r.to_dict() for r in read_results(self.journal, "csv" if self.fmt == "csv" else "jsonl")]
            kept = [r for r in {r["job_id"]: r for r in kept}.values() if r["status"] == "ok"]
        self.done: set[str] = {r["job_id"] for r in kept}
        self._fh: TextIO = self._rewrite(kept)
        self._writer = csv.DictWriter(self._fh, fieldnames=COLUMNS) if self.fmt == "csv" else None
        self.count = len(kept)

    def _rewrite(self, rows: list[dict[str, Any]]) -> TextIO:
        tmp = self.journal.with_name(self.journal.name + ".tmp")
        with tmp.open("w", encoding="utf-8", newline="") as fh:
            if self.fmt == "csv":
                w = csv.DictWriter(fh, fieldnames=COLUMNS)
                w.writeheader()
                w.writerows(_flat(r) for r in rows)
            else:
                fh.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.journal)
        return self.journal.open("a", encoding="utf-8", newline="")

    def write(self, result: JobResult) -> None:
        row = result.to_dict()
        if self._writer is not None:
            self._writer.writerow(_flat(row))
        else:
            self._fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        self._fh.flush()
        self.count += 1

    def close(self, *, finalize: bool = True) -> None:
        """Flush; for Parquet, write the final file and drop the journal (unless ``finalize`` is
        False: an interrupted run keeps its journal for ``--resume``)."""
        if self._fh.closed:
            return
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._fh.close()
        if self.fmt == "parquet" and finalize:
            _write_parquet(self.path, _read_jsonl(self.journal))
            self.journal.unlink()

    def __enter__(self) -> ResultSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _write_parquet(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema(
        [
            ("job_id", pa.string()),
            ("status", pa.string()),
            ("label", pa.string()),
            ("title", pa.string()),
            ("confidence", pa.float64()),
            ("abstained", pa.bool_()),
            ("best_guess", pa.string()),
            ("alternatives", pa.string()),
            ("initiating_rank", pa.int64()),
            ("initiating_reason", pa.string()),
            ("evidence", pa.string()),
            ("ranks", pa.int64()),
            ("lines", pa.int64()),
            ("bytes", pa.int64()),
            ("seconds", pa.float64()),
            ("warnings", pa.string()),
            ("error_type", pa.string()),
            ("error", pa.string()),
            ("model", pa.string()),
        ]
    )
    table = pa.Table.from_pylist([_flat(r) for r in rows], schema=schema)
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)
