"""One result row per job (:class:`JobResult`), its columns and formats (JSONL, CSV, Parquet),
and reading result files back: ``--resume`` reads them, drops rows cut by an interruption and
scores only the rest (error rows are retried). Writing them is :mod:`denpex_ml.batch.output`.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import logging
import os
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from denpex_ml.errors import InvalidInputError
from denpex_ml.logs.masking import Masker

__all__ = [
    "COLUMNS",
    "FORMATS",
    "STDOUT",
    "JobResult",
    "ResultsRead",
    "csv_text",
    "format_of",
    "public_job_id",
    "public_result",
    "read_results",
    "read_results_file",
    "utf8_bytes",
]

log = logging.getLogger(__name__)

FORMATS = ("jsonl", "csv", "parquet")
#: The output path that means standard output.
STDOUT = "-"

#: Columns of CSV and Parquet files, in order (JSONL rows have the same keys).
COLUMNS = (
    "job_id",
    "status",
    "label",
    "title",
    "confidence",
    "abstained",
    "best_guess",
    "outside_taxonomy",
    "outside_probability",
    "alternatives",
    "initiating_rank",
    "initiating_reason",
    "hang_phase",
    "hang_suspects",
    "suspects",
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
_NESTED = ("alternatives", "hang_suspects", "suspects", "evidence", "warnings")


def public_job_id(job_id: str) -> str:
    """The job id as results show it: masked like log text (e-mails, tokens, IPs, user names in
    paths), with a short hash of the original appended when masking changed it, so two jobs never
    share an id and ``--resume`` recognises the job again.

    >>> public_job_id("run-42")
    'run-42'
    >>> public_job_id("alice@example.com-run").startswith("<masked:email>-run~")
    True
    """
    masked = Masker().mask(job_id)
    if masked == job_id:
        return job_id
    digest = hashlib.sha256(job_id.encode("utf-8", "surrogateescape")).hexdigest()[:8]
    return f"{masked}~{digest}"


def public_result(result: JobResult) -> JobResult:
    """``result`` with its job id made public (:func:`public_job_id`), its error message masked
    (the raw job id inside it replaced by the public one) and no real host name left in memory."""
    pub = public_job_id(result.job_id)
    error = result.error
    if error:
        error = Masker().mask(error.replace(result.job_id, pub) if pub != result.job_id else error)
    if pub == result.job_id and error == result.error and not result.host_names:
        return result
    return replace(result, job_id=pub, error=error, host_names={})


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
    #: for ``unknown``: the failure known to lie outside the taxonomy that the log shows, in words
    outside_taxonomy: str = ""
    #: P(the failure lies outside the taxonomy) by the model's learned detector; None without one
    outside_probability: float | None = None
    alternatives: list[dict[str, Any]] = field(default_factory=list)
    initiating_rank: int | None = None
    initiating_reason: str = ""
    hang_phase: str | None = None  #: the phase a hang happened in (hang analysis), else None
    hang_suspects: list[int] = field(default_factory=list)  #: ranks the others waited for
    #: nodes / GPUs to act on (:func:`denpex_ml.topology.nodes.compact_suspects`): ``host`` is the
    #: run-wide name (``host-N``, as in the node summary), ``node`` the job's own pseudonym
    suspects: list[dict[str, Any]] = field(default_factory=list)
    evidence: list[dict[str, Any]] = field(default_factory=list)
    ranks: int | None = None
    lines: int | None = None
    bytes: int | None = None
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)
    error_type: str | None = None
    error: str | None = None
    model: str | None = None
    #: pseudonym -> real name of the suspects' hosts, in memory only between a worker and the
    #: scoring loop (which turns them into run-wide names); never in :meth:`to_dict` or a file
    host_names: dict[str, str] = field(default_factory=dict, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        row = asdict(self)
        del row["host_names"]
        return row

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> JobResult:
        data: dict[str, Any] = {k: row.get(k) for k in COLUMNS if k in row}
        for k in _NESTED:
            v = data.get(k)
            if isinstance(v, str):
                data[k] = json.loads(v) if v else []
            elif v is None:
                data[k] = []
        for k in ("confidence", "outside_probability", "seconds"):
            if data.get(k) in ("", None):
                data[k] = 0.0 if k == "seconds" else None
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
        data["outside_taxonomy"] = data.get("outside_taxonomy") or ""
        return cls(**data)

    @classmethod
    def failed(cls, job_id: str, error_type: str, message: str, seconds: float = 0.0) -> JobResult:
        return cls(job_id=job_id, status="error", error_type=error_type, error=message, seconds=seconds)


def _flat(row: dict[str, Any]) -> dict[str, Any]:
    out = dict(row)
    for k in _NESTED:
        out[k] = json.dumps(out[k], ensure_ascii=False)
    return out


def utf8_bytes(text: str) -> bytes:
    """UTF-8 bytes of a row; a lone surrogate (a file name that is not UTF-8) becomes a ``\\udcXX``
    escape, which is valid JSON and reads back as the same surrogate."""
    return text.encode("utf-8", "backslashreplace")


def format_of(path: str | os.PathLike[str], fmt: str | None = None) -> str:
    """The output format: ``fmt`` if given, else from the file suffix (``-``, stdout: JSONL)."""
    if fmt is None:
        if str(path) == STDOUT:
            return "jsonl"
        suffix = Path(path).suffix.lower().lstrip(".")
        fmt = {"json": "jsonl", "ndjson": "jsonl", "pq": "parquet"}.get(suffix, suffix)
    if fmt not in FORMATS:
        raise InvalidInputError(
            f"{path}: unknown results format {fmt!r}; use one of {', '.join(FORMATS)} (by suffix or --format)"
        )
    return fmt


# -- reading (and what --resume keeps) -----------------------------------------------------------
@dataclass
class ResultsRead:
    """Rows read back from a results file: the valid ones, how many were dropped, and whether
    the file looks like something else than a results file."""

    rows: list[JobResult] = field(default_factory=list)
    dropped: int = 0
    foreign: bool = False


def _valid(row: object, *, csv_row: bool = False) -> JobResult | None:
    """The row as a :class:`JobResult`, or None when it is incomplete or malformed."""
    if not isinstance(row, dict) or not row.get("job_id") or row.get("status") not in ("ok", "error"):
        return None
    if csv_row and (None in row or any(row.get(k) is None for k in COLUMNS)):
        return None  # fewer fields than columns: a row cut by an interruption (or more: not ours)
    try:
        result = JobResult.from_dict(row)
    except (ValueError, TypeError, RecursionError):
        return None
    if not isinstance(result.job_id, str) or (result.ok and not result.label):
        return None
    return result


def _complete_lines(path: Path) -> Iterator[tuple[bool, str]]:
    """``(complete, text)`` per line; only the last line can be incomplete (no newline: cut)."""
    with path.open("rb") as fh:
        for raw in fh:
            yield raw.endswith(b"\n"), raw.decode("utf-8", "replace")


def _read_jsonl(path: Path) -> ResultsRead:
    out = ResultsRead()
    complete_lines = 0
    for complete, line in _complete_lines(path):
        if not line.strip():
            continue
        if not complete:  # cut by an interruption: that job is scored again
            out.dropped += 1
            continue
        complete_lines += 1
        try:
            row = json.loads(line)
        except (ValueError, RecursionError):
            row = None
        result = _valid(row)
        if result is None:
            out.dropped += 1
        else:
            out.rows.append(result)
    out.foreign = complete_lines > 0 and not out.rows
    return out


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as fh:
        fh.seek(0, os.SEEK_END)
        if fh.tell() == 0:
            return True
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) == b"\n"


def _read_csv(path: Path) -> ResultsRead:
    out = ResultsRead()
    with path.open(encoding="utf-8", errors="replace", newline="") as fh:
        reader = csv.DictReader(fh)
        try:
            parsed = list(reader)
        except csv.Error:
            parsed = []
            out.dropped += 1
        if reader.fieldnames is not None and list(reader.fieldnames) != list(COLUMNS):
            with path.open("rb") as raw:
                first = raw.readline()
            if csv_text([], header=True).encode().startswith(first):
                return ResultsRead(dropped=1)  # a header cut short: nothing to keep
            return ResultsRead(dropped=len(parsed), foreign=True)
    if parsed and not _ends_with_newline(path):
        parsed.pop()  # the tail row was cut by an interruption: score that job again
        out.dropped += 1
    for row in parsed:
        result = _valid(row, csv_row=True)
        if result is None:
            out.dropped += 1
        else:
            out.rows.append(result)
    return out


def _read_parquet(path: Path) -> ResultsRead:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        rows = pq.read_table(path).to_pylist()
    except (OSError, ValueError, pa.ArrowException):
        return ResultsRead(foreign=True, dropped=1)
    out = ResultsRead()
    for row in rows:
        result = _valid(row)
        if result is None:
            out.dropped += 1
        else:
            out.rows.append(result)
    out.foreign = bool(rows) and not out.rows
    return out


def read_results_file(path: Path, fmt: str) -> ResultsRead:
    """Every row of a results file in format ``fmt``, with what was dropped and whether the file
    looks like a results file at all (what ``--resume`` needs; :func:`read_results` keeps the rows)."""
    if fmt == "jsonl":
        return _read_jsonl(path)
    if fmt == "csv":
        return _read_csv(path)
    return _read_parquet(path)


def read_results(path: str | os.PathLike[str], fmt: str | None = None) -> list[JobResult]:
    """Read a results file written by :class:`~denpex_ml.batch.output.ResultSink` (any format).

    Incomplete rows (cut by an interruption) and malformed rows are skipped, never raised on.
    """
    p = Path(path)
    return read_results_file(p, format_of(p, fmt)).rows


def csv_text(rows: Iterable[dict[str, Any]], *, header: bool = False) -> str:
    """Rows as CSV text in :data:`COLUMNS` order (nested fields as JSON), with the header if asked."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS)
    if header:
        w.writeheader()
    w.writerows(_flat(r) for r in rows)
    return buf.getvalue()
