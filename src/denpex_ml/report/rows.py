"""Result rows as the report reads them: a results file (any format) or rows given in Python.

Rows are read with the batch writer's own column rules (:meth:`JobResult.from_dict`), plus the
optional columns a pipeline may add beside them: a job time (``time``, ``started``... as ISO 8601
text or seconds since the epoch) and the nodes a job implicates (``suspects`` or ``nodes``).
Incomplete and malformed rows are counted and skipped, as :func:`~denpex_ml.batch.results.read_results`
does, never raised on.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from denpex_ml.batch.results import COLUMNS, JobResult, format_of
from denpex_ml.errors import InvalidInputError, LogNotFoundError

__all__ = ["TIME_FIELDS", "Rows", "job_nodes", "job_time", "normalise", "read_rows"]

#: Columns read as the job's time, first found wins.
TIME_FIELDS = ("time", "started", "start_time", "submitted", "end_time", "finished", "date", "timestamp")
#: Columns read as the nodes a job implicates (node attribution), first found wins.
NODE_FIELDS = ("suspects", "nodes")
_EXTRA = (*TIME_FIELDS, *NODE_FIELDS)


@dataclass
class Rows:
    """Rows of one results file: dictionaries with the :class:`JobResult` keys plus any extras."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    dropped: int = 0
    source: str = ""


def normalise(row: JobResult | Mapping[str, Any]) -> dict[str, Any] | None:
    """A row as a dictionary with every :class:`JobResult` key (and the extras it carries),
    or None when it is not a valid result row."""
    if isinstance(row, JobResult):
        return _shallow(row)
    if not isinstance(row, Mapping) or not row.get("job_id") or row.get("status") not in ("ok", "error"):
        return None
    try:
        out = _shallow(JobResult.from_dict(dict(row)))
    except (ValueError, TypeError, RecursionError):
        return None
    if not isinstance(out["job_id"], str) or (out["status"] == "ok" and not out["label"]):
        return None
    for key in _EXTRA:
        value = row.get(key)
        if value in (None, ""):
            continue
        if key in NODE_FIELDS and isinstance(value, str):  # CSV / Parquet hold nested values as JSON text
            try:
                value = json.loads(value)
            except ValueError:
                value = [value]
        out[key] = value
    return out


def _shallow(result: JobResult) -> dict[str, Any]:
    """The row's columns, sharing its lists (``to_dict`` deep-copies them: 10x slower on 100k rows)."""
    return {k: getattr(result, k) for k in COLUMNS}


def _json_loader() -> Callable[[bytes], Any]:
    """orjson's parser (the report extra installs it; ~3x faster on a 100k-row archive), else
    the standard library's. Both raise ValueError subclasses on malformed input."""
    try:
        import orjson
    except ImportError:  # pragma: no cover - the report extra brings it
        return json.loads

    def loads(raw: bytes) -> Any:
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:  # e.g. a lone surrogate escape (a name that is not UTF-8)
            return json.loads(raw)

    return loads


def _raw_rows(path: Path, fmt: str) -> Iterator[dict[str, Any] | None]:
    if fmt == "jsonl":
        loads = _json_loader()
        with path.open("rb") as fh:
            for raw in fh:
                if not raw.strip():
                    continue
                if not raw.endswith(b"\n"):  # cut by an interruption
                    yield None
                    continue
                try:
                    yield loads(raw)
                except (ValueError, RecursionError):
                    yield None
    elif fmt == "csv":
        with path.open(encoding="utf-8", errors="replace", newline="") as fh:
            try:
                yield from csv.DictReader(fh)
            except csv.Error:
                yield None
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except (OSError, ValueError, pa.ArrowException) as exc:
            raise InvalidInputError(f"{path}: not a readable Parquet results file ({exc})") from None
        yield from table.to_pylist()


def read_rows(path: str | os.PathLike[str], fmt: str | None = None) -> Rows:
    """Read a results file written by ``denpex-ml score`` (``.jsonl``, ``.csv`` or ``.parquet``).

    Raises
    ------
    LogNotFoundError
        The file does not exist or cannot be read.
    InvalidInputError
        The format is unknown, or no line of the file is a result row.
    """
    p = Path(path)
    fmt = format_of(p, fmt)
    if not p.is_file():
        raise LogNotFoundError(f"{p}: no such results file", filename=str(p))
    out = Rows(source=p.name)
    try:
        for raw in _raw_rows(p, fmt):
            row = normalise(raw) if isinstance(raw, Mapping) else None
            if row is None:
                out.dropped += 1
            else:
                out.rows.append(row)
    except OSError as exc:
        raise LogNotFoundError(f"{p}: cannot read it ({exc.strerror or exc})", filename=str(p)) from None
    if out.dropped and not out.rows:
        raise InvalidInputError(f"{p}: none of its {out.dropped} rows is a denpex-ml result row ({fmt})")
    return out


def job_time(row: Mapping[str, Any]) -> float | None:
    """Seconds since the epoch of the row's time column, or None."""
    for key in TIME_FIELDS:
        value = row.get(key)
        if value is None or value == "":
            continue
        if isinstance(value, datetime):
            return value.timestamp() if value.tzinfo else value.replace(tzinfo=UTC).timestamp()
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                when = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
            except ValueError:
                try:
                    return float(value)
                except ValueError:
                    continue
            return when.timestamp() if when.tzinfo else when.replace(tzinfo=UTC).timestamp()
    return None


def job_nodes(row: Mapping[str, Any]) -> list[str]:
    """The nodes a row implicates: ``suspects`` entries (``{"host": ..., "gpu": ...}`` as batch rows
    write them, or a name), else a ``nodes`` list."""
    for key in NODE_FIELDS:
        value = row.get(key)
        if not value:
            continue
        items: Iterable[Any] = value if isinstance(value, list) else [value]
        names: list[str] = []
        for item in items:
            if isinstance(item, Mapping):
                name = item.get("host") or item.get("node") or item.get("name")  # host: the run-wide name
                gpu = item.get("gpu")
                if name is None:
                    continue
                text = str(name) if gpu in (None, "") else f"{name} gpu {gpu}"
            else:
                text = str(item)
            if text and text not in names:
                names.append(text)
        return names
    return []
