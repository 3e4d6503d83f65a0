"""One result row per job, and the files they are written to (JSONL, CSV, Parquet).

Rows are written as they arrive, one whole row per flush, so an interrupted run keeps every
finished job; ``--resume`` reads them back, drops rows cut by the interruption and scores
only the rest (error rows are retried). :func:`check_output_path` refuses, before any work,
an output that cannot be written or that is (or lies inside) the input.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import logging
import os
import sys
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from denpex_ml.batch.jobs import _excluded
from denpex_ml.errors import InvalidInputError, OutputPathError, OutputWriteError
from denpex_ml.logs.masking import Masker

__all__ = [
    "FORMATS",
    "STDOUT",
    "JobResult",
    "ResultSink",
    "check_output_path",
    "format_of",
    "read_results",
    "sidecar_paths",
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


def _utf8(text: str) -> bytes:
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
class _Read:
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


def _read_jsonl(path: Path) -> _Read:
    out = _Read()
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


def _read_csv(path: Path) -> _Read:
    out = _Read()
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
            if _csv_text([], header=True).encode().startswith(first):
                return _Read(dropped=1)  # a header cut short: nothing to keep
            return _Read(dropped=len(parsed), foreign=True)
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


def _read_parquet(path: Path) -> _Read:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        rows = pq.read_table(path).to_pylist()
    except (OSError, ValueError, pa.ArrowException):
        return _Read(foreign=True, dropped=1)
    out = _Read()
    for row in rows:
        result = _valid(row)
        if result is None:
            out.dropped += 1
        else:
            out.rows.append(result)
    out.foreign = bool(rows) and not out.rows
    return out


def _read(path: Path, fmt: str) -> _Read:
    if fmt == "jsonl":
        return _read_jsonl(path)
    if fmt == "csv":
        return _read_csv(path)
    return _read_parquet(path)


def read_results(path: str | os.PathLike[str], fmt: str | None = None) -> list[JobResult]:
    """Read a results file written by :class:`ResultSink` (any format).

    Incomplete rows (cut by an interruption) and malformed rows are skipped, never raised on.
    """
    p = Path(path)
    return _read(p, format_of(p, fmt)).rows


# -- output paths --------------------------------------------------------------------------------
def sidecar_paths(path: str | os.PathLike[str], fmt: str | None = None) -> list[Path]:
    """Every file a :class:`ResultSink` on ``path`` may write: the file, its journal, temporaries."""
    p = Path(path)
    fmt = format_of(p, fmt)
    journal = p.with_name(p.name + ".partial.jsonl") if fmt == "parquet" else p
    out = [p, journal.with_name(journal.name + ".tmp")]
    if fmt == "parquet":
        out += [journal, p.with_name(p.name + ".tmp")]
    return out


def _inside(path: Path, root: Path) -> tuple[str, ...] | None:
    try:
        return path.relative_to(root).parts
    except ValueError:
        return None


def check_output_path(
    path: str | os.PathLike[str],
    *,
    fmt: str | None = None,
    source: str | os.PathLike[str] | None = None,
    exclude: Sequence[str] = (),
    resume: bool = False,
) -> None:
    """Refuse an output path that cannot be written or would destroy the input, before any work.

    Checks, without writing anything but a probe file that is removed at once:

    * ``-`` (stdout) is JSONL or CSV and cannot be resumed;
    * the output is not a directory nor another non-regular file, and its nearest existing
      ancestor is a directory we can create files in (missing folders are created later);
    * neither the output nor its journal and temporaries is the input ``source`` or lies inside
      the input directory where it would be read as a job (inside a hidden or ``exclude``-d
      entry is fine: those are never read).

    Raises
    ------
    OutputPathError
        Naming the path and what is wrong.
    """
    if str(path) == STDOUT:
        fmt = format_of(STDOUT, fmt)
        if fmt == "parquet":
            raise OutputPathError("-o -: Parquet cannot be written to stdout; use jsonl or csv (--format)")
        if resume:
            raise OutputPathError("-o -: stdout cannot be resumed; write to a file to use --resume")
        return
    out = Path(path)
    if out.is_dir():
        raise OutputPathError(f"{out}: is a directory; give a results file name (e.g. {out}/results.jsonl)")
    fmt = format_of(out, fmt)
    if out.exists() and not out.is_file():
        raise OutputPathError(f"{out}: not a regular file (use -o - for stdout)")
    ancestor = out.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        if ancestor.is_symlink():
            raise OutputPathError(f"{out}: folder {ancestor} is a broken symbolic link")
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise OutputPathError(f"{out}: {ancestor} is a file, not a directory")
    if source is not None:
        _check_not_input(out, fmt, Path(source), exclude)
    try:
        fd, probe = tempfile.mkstemp(dir=ancestor, prefix=".denpex-probe-")
    except OSError as exc:
        raise OutputPathError(f"{out}: cannot create files in {ancestor} ({exc.strerror or exc})") from None
    os.close(fd)
    os.unlink(probe)


def _check_not_input(out: Path, fmt: str, source: Path, exclude: Sequence[str]) -> None:
    src = source.resolve()
    for p in sidecar_paths(out, fmt):
        rp = p.resolve()
        same = rp == src or (p.exists() and source.exists() and os.path.samefile(p, source))
        if same:
            raise OutputPathError(
                f"{out}: {'is' if p == out else 'would write ' + p.name + ', which is'} the input {source}; "
                "writing it would destroy the input: choose another output path"
            )
        parts = _inside(rp, src) if src.is_dir() else None
        if parts and not any(_excluded(part, exclude) for part in parts):
            raise OutputPathError(
                f"{out}: lies inside the input directory {source}, where it would be read as job {parts[0]!r}; "
                "write it elsewhere (or to a hidden name, or --exclude it)"
            )


# -- writing ----------------------------------------------------------------------------------------
_os_write = os.write  # tests replace it to simulate a full disk


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = _os_write(fd, view)
        view = view[n:]


def _csv_text(rows: Iterable[dict[str, Any]], *, header: bool = False) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS)
    if header:
        w.writeheader()
    w.writerows(_flat(r) for r in rows)
    return buf.getvalue()


class ResultSink:
    """Appends result rows to a file, one whole row per flush.

    Each row is written with one append and flushed; if the write fails (disk full) the file
    is cut back to its last whole row and :class:`~denpex_ml.errors.OutputWriteError` is
    raised, so the file always holds whole rows and ``--resume`` continues it. Parquet cannot
    be appended to safely, so rows go to a JSONL journal next to it
    (``OUT.parquet.partial.jsonl``) and the Parquet file is written by :meth:`close`.
    With ``resume=True`` the finished (``ok``) rows already there are kept and their job ids
    are in :attr:`done`; error rows, cut rows and malformed rows are dropped so that those
    jobs are scored again. ``path="-"`` writes JSONL or CSV to stdout.
    """

    def __init__(self, path: str | os.PathLike[str], *, fmt: str | None = None, resume: bool = False) -> None:
        self.to_stdout = str(path) == STDOUT
        self.path = Path(path)
        self.fmt = format_of(path, fmt)
        self.journal = self.path.with_name(self.path.name + ".partial.jsonl") if self.fmt == "parquet" else self.path
        self.done: set[str] = set()
        self.count = 0
        self._fd = -1
        self._closed = False
        if self.to_stdout:
            check_output_path(STDOUT, fmt=self.fmt, resume=resume)
            if self.fmt == "csv":
                self._emit(_csv_text([], header=True))
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputPathError(f"{self.path}: cannot create its folder ({exc.strerror or exc})") from None
        kept: list[dict[str, Any]] = []
        if resume:
            kept = self._resumable()
        self.done = {r["job_id"] for r in kept}
        self._rewrite(kept)
        self.count = len(kept)

    def _resumable(self) -> list[dict[str, Any]]:
        found: list[JobResult] = []
        sources = [(self.path, self.fmt)] if self.fmt == "parquet" else []
        sources.append((self.journal, "csv" if self.fmt == "csv" else "jsonl"))
        for p, fmt in sources:
            if not p.exists():
                continue
            try:
                read = _read(p, fmt)
            except OSError as exc:
                raise OutputPathError(f"{p}: cannot read it to resume ({exc.strerror or exc})") from None
            if read.foreign:
                raise OutputPathError(
                    f"{p}: does not look like a denpex-ml results file ({fmt}); refusing to rewrite it on --resume"
                )
            if read.dropped:
                log.warning(
                    "%s: %d incomplete or malformed row(s) dropped; those jobs are scored again", p, read.dropped
                )
            found += read.rows
        by_id = {r.job_id: r.to_dict() for r in found}
        return [r for r in by_id.values() if r["status"] == "ok"]

    def _rewrite(self, rows: list[dict[str, Any]]) -> None:
        """Replace the journal with ``rows`` (atomically: a temporary file, then a rename)."""
        tmp = self.journal.with_name(self.journal.name + ".tmp")
        if self.fmt == "csv":
            data = _utf8(_csv_text(rows, header=True))
        else:
            data = b"".join(_utf8(json.dumps(r, ensure_ascii=False) + "\n") for r in rows)
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        except OSError as exc:
            raise OutputPathError(f"{self.journal}: cannot be written ({exc.strerror or exc})") from None
        try:
            try:
                _write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.journal)
            self._fd = os.open(self.journal, os.O_WRONLY | os.O_APPEND)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise OutputWriteError(
                f"{self.journal}: cannot be written ({exc.strerror or exc}); the previous file is unchanged"
            ) from None
        self._size = len(data)

    def _emit(self, text: str) -> None:
        try:
            sys.stdout.write(text)
            sys.stdout.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise OutputWriteError(f"stdout: cannot write results ({exc.strerror or exc})") from None

    def write(self, result: JobResult) -> None:
        """Append one row; on failure the file is cut back to its last whole row.

        Raises
        ------
        OutputWriteError
            The row could not be written (disk full, I/O error).
        """
        row = result.to_dict()
        text = _csv_text([row]) if self.fmt == "csv" else json.dumps(row, ensure_ascii=False) + "\n"
        if self.to_stdout:
            self._emit(text.encode("utf-8", "backslashreplace").decode("utf-8"))
            self.count += 1
            return
        data = _utf8(text)
        try:
            _write_all(self._fd, data)
        except OSError as exc:
            try:
                os.ftruncate(self._fd, self._size)  # no half row for --resume to trip on
            except OSError:
                log.warning("%s: could not cut back a half-written row; --resume skips it", self.journal)
            raise OutputWriteError(
                f"{self.journal}: cannot write results ({exc.strerror or exc}) after {self.count} rows; "
                "those are intact: make room and rerun with --resume"
            ) from None
        self._size += len(data)
        self.count += 1

    def close(self, *, finalize: bool = True) -> None:
        """Flush; for Parquet, write the final file and drop the journal (unless ``finalize`` is
        False: an interrupted run keeps its journal for ``--resume``).

        Raises
        ------
        OutputWriteError
            The data could not be flushed or the Parquet file written; the journal is kept.
        """
        if self._closed:
            return
        self._closed = True
        if self.to_stdout:
            return
        try:
            try:
                os.fsync(self._fd)
            finally:
                os.close(self._fd)
        except OSError as exc:
            raise OutputWriteError(
                f"{self.journal}: cannot flush results ({exc.strerror or exc}); rerun with --resume"
            ) from None
        if self.fmt == "parquet" and finalize:
            _write_parquet(self.path, (r.to_dict() for r in _read_jsonl(self.journal).rows))
            self.journal.unlink()

    def __enter__(self) -> ResultSink:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        self.close(finalize=exc_type is None)


def _arrow_schema() -> Any:
    """Columns as Arrow types: nested fields are lists and structs (queried in place by pandas,
    Polars, DuckDB or Spark), not JSON strings."""
    import pyarrow as pa

    alternative = pa.struct([("label", pa.string()), ("probability", pa.float64())])
    suspect = pa.struct(
        [
            ("host", pa.string()),
            ("gpu", pa.int64()),
            ("bus_id", pa.string()),
            ("ranks", pa.list_(pa.int64())),
            ("reason", pa.string()),
            ("basis", pa.string()),
            ("entry", pa.string()),
            ("xid", pa.int64()),
        ]
    )
    evidence = pa.struct(
        [
            ("rank", pa.int64()),
            ("source", pa.string()),
            ("line", pa.int64()),
            ("text", pa.string()),
            ("why", pa.string()),
        ]
    )
    return pa.schema(
        [
            ("job_id", pa.string()),
            ("status", pa.string()),
            ("label", pa.string()),
            ("title", pa.string()),
            ("confidence", pa.float64()),
            ("abstained", pa.bool_()),
            ("best_guess", pa.string()),
            ("outside_taxonomy", pa.string()),
            ("alternatives", pa.list_(alternative)),
            ("initiating_rank", pa.int64()),
            ("initiating_reason", pa.string()),
            ("hang_phase", pa.string()),
            ("hang_suspects", pa.list_(pa.int64())),
            ("suspects", pa.list_(suspect)),
            ("evidence", pa.list_(evidence)),
            ("ranks", pa.int64()),
            ("lines", pa.int64()),
            ("bytes", pa.int64()),
            ("seconds", pa.float64()),
            ("warnings", pa.list_(pa.string())),
            ("error_type", pa.string()),
            ("error", pa.string()),
            ("model", pa.string()),
        ]
    )


def _arrow_clean(value: Any) -> Any:
    """Arrow strings must be valid UTF-8 (file names that are not become ``\\udcXX`` escapes)."""
    if isinstance(value, str):
        return _utf8(value).decode("utf-8")
    if isinstance(value, list):
        return [_arrow_clean(v) for v in value]
    if isinstance(value, dict):
        return {k: _arrow_clean(v) for k, v in value.items()}
    return value


def _write_parquet(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = _arrow_schema()

    def clean(row: dict[str, Any]) -> dict[str, Any]:
        return {k: _arrow_clean(v) for k, v in row.items()}

    tmp = path.with_name(path.name + ".tmp")
    try:
        table = pa.Table.from_pylist([clean(r) for r in rows], schema=schema)
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise OutputWriteError(
            f"{path}: cannot write the Parquet file ({exc.strerror or exc}); its journal is kept: rerun with --resume"
        ) from None
