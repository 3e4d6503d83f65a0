"""Writing result rows (:class:`ResultSink`: JSONL, CSV, Parquet) and checking where they go.

Rows are written as they arrive, one whole row per flush, so an interrupted run keeps every
finished job (Parquet goes through a JSONL journal and is written whole at the end).
:func:`check_output_path` refuses, before any work, an output that cannot be written or that is
(or lies inside) the input.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from denpex_ml.batch.jobs import _excluded
from denpex_ml.batch.results import (
    STDOUT,
    JobResult,
    csv_text,
    format_of,
    read_results_file,
    utf8_bytes,
)
from denpex_ml.errors import OutputPathError, OutputWriteError

__all__ = ["ResultSink", "check_output_path", "sidecar_paths"]

log = logging.getLogger(__name__)


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
                self._emit(csv_text([], header=True))
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
                read = read_results_file(p, fmt)
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
            data = utf8_bytes(csv_text(rows, header=True))
        else:
            data = b"".join(utf8_bytes(json.dumps(r, ensure_ascii=False) + "\n") for r in rows)
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
        text = csv_text([row]) if self.fmt == "csv" else json.dumps(row, ensure_ascii=False) + "\n"
        if self.to_stdout:
            self._emit(text.encode("utf-8", "backslashreplace").decode("utf-8"))
            self.count += 1
            return
        data = utf8_bytes(text)
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
            _write_parquet(self.path, (r.to_dict() for r in read_results_file(self.journal, "jsonl").rows))
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
            ("outside_probability", pa.float64()),
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
        return utf8_bytes(value).decode("utf-8")
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
