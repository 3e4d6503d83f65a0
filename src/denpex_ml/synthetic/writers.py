"""Writing incidents: JSON Lines, one folder per job, or an archive of job folders.

Archives are built in memory (``tarfile``/``zipfile`` over ``io.BytesIO`` members), so
nothing is extracted or staged in temporary directories.
"""

from __future__ import annotations

import io
import json
import os
import tarfile
import time
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from denpex_ml.errors import DatasetError

__all__ = ["job_files", "write_archive", "write_job_dirs", "write_jsonl"]


def _safe_rel(name: str, record_id: str) -> str:
    rel = PurePosixPath(name)
    if rel.is_absolute() or ".." in rel.parts or not rel.parts:
        raise DatasetError(f"record {record_id!r}: field logs: unsafe file name {name!r}")
    return rel.as_posix()


def job_files(incident: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(relative path, text) of one job folder: per-rank files, or ``job.log``; plus ``incident.json``."""
    rid = str(incident.get("id", "?"))
    if "logs" in incident:
        for name, text in incident["logs"].items():
            yield _safe_rel(str(name), rid), text
    elif "log" in incident:
        yield "job.log", incident["log"]
    else:
        raise DatasetError(f"record {rid!r}: expected field 'log' or 'logs', found neither")
    info = {k: v for k, v in incident.items() if k not in ("log", "logs")}
    yield "incident.json", json.dumps(info, indent=2, ensure_ascii=False) + "\n"


def _dir_name(incident: dict[str, Any]) -> str:
    rid = str(incident.get("id", ""))
    if not rid or "/" in rid or rid in (".", ".."):
        raise DatasetError(f"record id: expected a non-empty name without '/', found {rid!r}")
    return rid


def write_jsonl(incidents: Iterable[dict[str, Any]], path: str | os.PathLike[str]) -> int:
    """Write one JSON object per line; returns the number of records written."""
    n = 0
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        for inc in incidents:
            fh.write(json.dumps(inc, ensure_ascii=False) + "\n")
            n += 1
    return n


def write_job_dirs(incidents: Iterable[dict[str, Any]], out_dir: str | os.PathLike[str]) -> list[Path]:
    """One folder per job under ``out_dir``; returns the folders written."""
    root = Path(out_dir)
    root.mkdir(parents=True, exist_ok=True)
    written = []
    for inc in incidents:
        job = root / _dir_name(inc)
        for rel, text in job_files(inc):
            target = job / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8", newline="")
        written.append(job)
    return written


def write_archive(incidents: Iterable[dict[str, Any]], path: str | os.PathLike[str]) -> int:
    """A ``.tar.gz``/``.tgz`` or ``.zip`` of job folders; returns the number of jobs."""
    p = str(path)
    n = 0
    now = time.time()
    if p.endswith((".tar.gz", ".tgz")):
        with tarfile.open(p, "w:gz") as tar:
            for inc in incidents:
                base = _dir_name(inc)
                for rel, text in job_files(inc):
                    data = text.encode("utf-8")
                    info = tarfile.TarInfo(f"{base}/{rel}")
                    info.size = len(data)
                    info.mtime = int(now)
                    info.mode = 0o644
                    tar.addfile(info, io.BytesIO(data))
                n += 1
        return n
    if p.endswith(".zip"):
        with zipfile.ZipFile(p, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for inc in incidents:
                base = _dir_name(inc)
                for rel, text in job_files(inc):
                    zf.writestr(f"{base}/{rel}", text.encode("utf-8"))
                n += 1
        return n
    raise DatasetError(f"{p}: archive name must end with .tar.gz, .tgz or .zip")
