"""Finding the jobs of a batch: a directory or an archive holding many failed jobs.

Rules (also in ``docs/batch-scoring.md``):

* **Directory** — every top-level entry is one job: a log file (plain or ``.gz``), a folder of
  per-rank logs (read recursively), or an archive. Hidden entries (``.name``) and entries
  matching ``exclude`` globs are skipped. Symbolic links are not followed: such an entry is an
  error row.
* **Archive** (``.tar``, ``.tar.gz``/``.tgz``, ``.tar.bz2``, ``.tar.xz``, ``.zip``) — the same
  rule applied to the paths inside it; when every member sits under one top-level folder
  (``tar czf jobs.tar.gz jobs/``) that folder is looked through. Members are read into memory
  (never extracted); a member with an absolute path, ``..``, a link or a device makes its job an
  error row and the rest of the batch goes on.
* **Pattern** — for other layouts, ``pattern`` maps relative file paths to job ids, e.g.
  ``{cluster}/{date}/{job}/*.log``: ``{name}`` matches one path component and names a part of
  the job id (the parts joined by ``/``), ``*`` matches within a component, ``**`` across
  components. Files that do not match are ignored (and counted).
"""

from __future__ import annotations

import errno
import fnmatch
import os
import re
import stat
import tarfile
import zipfile
import zlib
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import BinaryIO

import re2

from denpex_ml.errors import (
    ArchiveError,
    DenpexError,
    InputTooLargeError,
    InvalidInputError,
    LogNotFoundError,
)
from denpex_ml.logs.archives import (
    MemberCheck,
    check_tar_member,
    check_zip_member,
    is_archive_name,
    open_tar_stream,
    open_zip,
    read_zip_member,
    source_kind,
    tar_infos,
)
from denpex_ml.logs.limits import IngestLimits
from denpex_ml.logs.metered import ReadBudget
from denpex_ml.logs.names import check_member_name

__all__ = ["Batch", "BatchLimits", "Job", "JobPattern", "discover_jobs"]


@dataclass(frozen=True)
class BatchLimits:
    """Limits of reading a batch archive (each job's own reading uses :class:`IngestLimits`).

    Parameters
    ----------
    max_job_bytes:
        Most uncompressed bytes of one job held in memory when it comes from an archive (a
        larger job is an error row; score it alone with ``denpex-ml classify``).
    max_total_bytes, max_members, max_compression_ratio:
        Bounds on the whole archive (bombs and runaway inputs).
    """

    max_job_bytes: int = 1024**3
    max_total_bytes: int = 4 * 1024**4
    max_members: int = 10_000_000
    max_compression_ratio: float = IngestLimits.max_compression_ratio  #: same bound as one job's reading

    def ingest_limits(self) -> IngestLimits:
        return IngestLimits(
            max_total_bytes=self.max_total_bytes,
            max_members=self.max_members,
            max_compression_ratio=self.max_compression_ratio,
        )


@dataclass
class Job:
    """One job of a batch, in one of three forms.

    Attributes
    ----------
    id:
        The job id (directory entry name, archive path, or pattern parts).
    path:
        A file or folder the worker reads itself (directory batches).
    files:
        ``(relative name, path)`` pairs grouped by a pattern (directory batches).
    members:
        ``(relative name, raw bytes)`` read from an archive.
    error:
        ``(error type, message)`` when the job could not be read; it becomes an error row.
    """

    id: str
    path: Path | None = None
    files: list[tuple[str, Path]] = field(default_factory=list)
    members: list[tuple[str, bytes]] = field(default_factory=list)
    error: tuple[str, str] | None = None
    size: int = 0

    @property
    def source(self) -> str:
        return str(self.path) if self.path is not None else self.id


class JobPattern:
    """A path template with ``{name}`` fields that names the job a file belongs to."""

    def __init__(self, pattern: str) -> None:
        if not pattern or pattern.startswith("/") or ".." in PurePosixPath(pattern).parts:
            raise InvalidInputError(f"job pattern {pattern!r}: must be a relative path template without '..'")
        self.pattern = pattern
        self.fields: list[str] = []
        out = []
        for tok in re.split(r"(\{[A-Za-z_][A-Za-z0-9_]*\}|\*\*/?|\*|\?)", pattern):
            if not tok:
                continue
            if tok.startswith("{"):
                name = tok[1:-1]
                if name in self.fields:
                    raise InvalidInputError(f"job pattern {pattern!r}: field {{{name}}} appears twice")
                self.fields.append(name)
                out.append(f"(?P<{name}>[^/]+)")
            elif tok.startswith("**"):
                out.append("(?:.*/)?" if tok.endswith("/") else ".*")
            elif tok == "*":
                out.append("[^/]*")
            elif tok == "?":
                out.append("[^/]")
            else:
                out.append(re.escape(tok))
        if not self.fields:
            raise InvalidInputError(
                f"job pattern {pattern!r}: needs at least one {{field}} naming the job, e.g. {{job}}"
            )
        self._re = re2.compile("".join(out))

    def job_id(self, rel: str) -> str | None:
        """The job id of relative path ``rel``, or None when it does not match."""
        m = self._re.fullmatch(rel)
        if m is None:
            return None
        return "/".join(m.group(f) for f in self.fields)


# -- directories --------------------------------------------------------------------------------
def _excluded(name: str, exclude: Sequence[str]) -> bool:
    hidden = name.startswith(".") and name not in (".", "..")  # '..' is refused, not hidden
    return hidden or any(fnmatch.fnmatch(name, g) for g in exclude)


def _dir_jobs(root: Path, exclude: Sequence[str]) -> Iterator[Job]:
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError as exc:
        raise LogNotFoundError(
            f"{root}: cannot list directory ({exc.strerror or exc})", filename=str(root), errno=exc.errno
        ) from None
    for entry in entries:
        if _excluded(entry.name, exclude):
            continue
        if entry.is_symlink():
            yield Job(entry.name, error=("UnsafeArchiveMemberError", f"{entry.name}: symbolic link, not followed"))
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError as exc:
            yield Job(entry.name, error=("LogNotFoundError", f"{entry.name}: cannot access ({exc.strerror or exc})"))
            continue
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
            yield Job(entry.name, error=("LogNotFoundError", f"{entry.name}: not a regular file or directory"))
            continue
        yield Job(entry.name, path=Path(entry.path), size=st.st_size if stat.S_ISREG(st.st_mode) else 0)


def _dir_pattern_jobs(root: Path, pattern: JobPattern, exclude: Sequence[str], skipped: list[str]) -> Iterator[Job]:
    groups: dict[str, list[tuple[str, Path]]] = defaultdict(list)
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not _excluded(d, exclude))
        for fname in sorted(filenames):
            if _excluded(fname, exclude):
                continue
            full = Path(dirpath) / fname
            rel = full.relative_to(root).as_posix()
            job_id = pattern.job_id(rel)
            if job_id is None:
                skipped.append(rel)
                continue
            groups[job_id].append((rel, full))
    for job_id in sorted(groups):
        files = groups[job_id]
        links = [rel for rel, p in files if p.is_symlink()]
        if links:
            yield Job(job_id, error=("UnsafeArchiveMemberError", f"{links[0]}: symbolic link, not followed"))
        else:
            yield Job(job_id, files=files, size=sum(p.stat().st_size for _, p in files))


# -- archives -----------------------------------------------------------------------------------
@dataclass
class _Entry:
    name: str  # normalised relative path (or the raw name when unsafe)
    problem: tuple[str, str] | None = None
    is_file: bool = True


def _entry(check: MemberCheck) -> _Entry:
    """An archive member as the batch sees it: a refused member is its job's error row."""
    problem = None if check.problem is None else (type(check.problem).__name__, str(check.problem))
    return _Entry(check.name, problem, check.is_file)


def _tar_stream(path: Path, budget: ReadBudget) -> tuple[BinaryIO, tarfile.TarFile]:
    raw = path.open("rb")
    try:  # decompressed bytes are counted as they stream (size and ratio: bombs are refused early)
        return raw, open_tar_stream(raw, path.name, budget)
    except BaseException:
        raw.close()
        raise


def _tar_entries(path: Path, budget: ReadBudget) -> list[_Entry]:
    raw, tf = _tar_stream(path, budget)
    out: list[_Entry] = []
    try:
        for info in tar_infos(tf, path.name):
            budget.add_member(info.name)
            out.append(_entry(check_tar_member(path.name, info)))
    finally:
        tf.close()
        raw.close()
    return out


class _Grouper:
    """Maps member paths to job ids (top-level entry below a common root, or a pattern)."""

    def __init__(self, entries: list[_Entry], pattern: JobPattern | None, exclude: Sequence[str]) -> None:
        self.pattern = pattern
        self.exclude = exclude
        self.root = ""
        firsts = {PurePosixPath(e.name).parts[0] for e in entries if e.name and PurePosixPath(e.name).parts}
        nested = [e for e in entries if e.is_file and len(PurePosixPath(e.name).parts) > 1]
        if (
            pattern is None
            and len(firsts) == 1
            and nested
            and all(len(PurePosixPath(e.name).parts) > 1 for e in entries if e.is_file)
        ):
            self.root = firsts.pop() + "/"

    def job_id(self, name: str) -> str | None:
        rel = name[len(self.root) :] if self.root and name.startswith(self.root) else name
        if not rel:
            return None
        parts = PurePosixPath(rel).parts
        if any(_excluded(p, self.exclude) for p in parts):
            return None
        if self.pattern is not None:
            return self.pattern.job_id(rel)
        return parts[0]

    def member_name(self, job_id: str, name: str) -> str:
        rel = name[len(self.root) :] if self.root and name.startswith(self.root) else name
        if self.pattern is None:
            inner = rel[len(job_id) + 1 :]
            return inner or rel  # a job that is one file keeps its file name
        return rel


def _plan(
    entries: list[_Entry], grouper: _Grouper, skipped: list[str]
) -> tuple[list[str], dict[str, int], dict[str, tuple[str, str]]]:
    order: list[str] = []
    expected: dict[str, int] = {}
    errors: dict[str, tuple[str, str]] = {}
    for e in entries:
        if not e.is_file and not e.problem:
            continue  # folders make no job by themselves
        job_id = grouper.job_id(e.name)
        if job_id is None:
            skipped.append(e.name)
            continue
        if job_id not in expected:
            order.append(job_id)
            expected[job_id] = 0
        if e.problem and job_id not in errors:
            errors[job_id] = e.problem
        if e.is_file and not e.problem:
            expected[job_id] += 1
    return order, expected, errors


@dataclass
class _Plan:
    grouper: _Grouper
    order: list[str]
    expected: dict[str, int]
    errors: dict[str, tuple[str, str]]


def _tar_plan(
    path: Path, limits: BatchLimits, pattern: JobPattern | None, exclude: Sequence[str], skipped: list[str]
) -> _Plan:
    budget = ReadBudget(limits.ingest_limits(), path.name)
    entries = _tar_entries(path, budget)  # pass 1: headers only (the job list, unsafe members)
    grouper = _Grouper(entries, pattern, exclude)
    order, expected, errors = _plan(entries, grouper, skipped)
    return _Plan(grouper, order, expected, errors)


def _tar_jobs(path: Path, limits: BatchLimits, plan: _Plan) -> Iterator[Job]:
    grouper, expected = plan.grouper, dict(plan.expected)
    pending: dict[str, Job] = {}
    done: set[str] = set()
    for job_id in plan.order:  # unreadable jobs are reported first; their bytes are never read
        if job_id in plan.errors:
            done.add(job_id)
            yield Job(job_id, error=plan.errors[job_id])
        elif expected[job_id] == 0:
            done.add(job_id)
            yield Job(job_id, error=("NotALogError", f"{job_id}: no files"))
    budget = ReadBudget(limits.ingest_limits(), path.name)
    raw, tf = _tar_stream(path, budget)  # pass 2: contents, one job at a time
    too_big = f"more than {limits.max_job_bytes} bytes inside the archive (BatchLimits.max_job_bytes)"
    try:
        for info in tar_infos(tf, path.name):
            entry = _entry(check_tar_member(path.name, info))
            found = grouper.job_id(entry.name)
            if found is None:
                continue
            job_id = found
            if job_id in done or entry.problem or not entry.is_file:
                continue
            job = pending.setdefault(job_id, Job(job_id))
            if job.error is None:
                if job.size + info.size > limits.max_job_bytes:
                    job.error = ("InputTooLargeError", f"{job_id}: {too_big}")
                    job.members.clear()
                else:
                    fobj = tf.extractfile(info)
                    data = fobj.read() if fobj is not None else b""
                    job.members.append((grouper.member_name(job_id, entry.name), data))
                    job.size += len(data)
            expected[job_id] -= 1
            if expected[job_id] == 0:
                done.add(job_id)
                yield pending.pop(job_id)
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        if isinstance(exc, DenpexError):
            raise
        raise ArchiveError(f"{path.name}: corrupt or truncated tar archive ({exc})") from None
    finally:
        tf.close()
        raw.close()
    for job_id, job in pending.items():  # only when the archive changed between the passes
        yield Job(job_id, error=job.error or ("ArchiveError", f"{job_id}: members missing on the second read"))


def _zip_plan(
    path: Path, limits: BatchLimits, pattern: JobPattern | None, exclude: Sequence[str], skipped: list[str]
) -> tuple[_Plan, dict[str, list[str]]]:
    budget = ReadBudget(limits.ingest_limits(), path.name)
    with open_zip(path, path.name) as zf:
        infos = zf.infolist()
        entries: list[_Entry] = []
        for info in infos:
            budget.add_member(info.filename)
            entries.append(_entry(check_zip_member(path.name, info, limits.ingest_limits())))
    grouper = _Grouper(entries, pattern, exclude)
    order, expected, errors = _plan(entries, grouper, skipped)
    by_job: dict[str, list[str]] = defaultdict(list)
    for entry, info in zip(entries, infos, strict=True):
        job_id = grouper.job_id(entry.name)
        if job_id is not None and entry.is_file and not entry.problem:
            by_job[job_id].append(info.filename)
    return _Plan(grouper, order, expected, errors), by_job


def _zip_jobs(path: Path, limits: BatchLimits, plan: _Plan, by_job: dict[str, list[str]]) -> Iterator[Job]:
    budget = ReadBudget(limits.ingest_limits(), path.name)
    with open_zip(path, path.name) as zf:
        for job_id in plan.order:
            if job_id in plan.errors:
                yield Job(job_id, error=plan.errors[job_id])
                continue
            infos = [zf.getinfo(n) for n in by_job[job_id]]
            yield _read_zip_job(zf, job_id, infos, plan.grouper, limits, budget)


def _read_zip_job(
    zf: zipfile.ZipFile,
    job_id: str,
    items: list[zipfile.ZipInfo],
    grouper: _Grouper,
    limits: BatchLimits,
    budget: ReadBudget,
) -> Job:
    if not items:
        return Job(job_id, error=("NotALogError", f"{job_id}: no files"))
    if sum(info.file_size for info in items) > limits.max_job_bytes:
        return Job(
            job_id,
            error=(
                "InputTooLargeError",
                f"{job_id}: more than {limits.max_job_bytes} bytes inside the archive (BatchLimits.max_job_bytes)",
            ),
        )
    job = Job(job_id)
    try:
        for info in items:
            data = read_zip_member(zf, info, budget, limits.max_job_bytes - job.size + 1)
            if job.size + len(data) > limits.max_job_bytes:
                return Job(
                    job_id,
                    error=(
                        "InputTooLargeError",
                        f"{job_id}: more than {limits.max_job_bytes} bytes inside the archive (BatchLimits.max_job_bytes)",
                    ),
                )
            name = check_member_name(zf.filename or "zip", info.filename)
            job.members.append((grouper.member_name(job_id, name), data))
            job.size += len(data)
    except (zipfile.BadZipFile, zlib.error, EOFError, RuntimeError, ArchiveError, InputTooLargeError) as exc:
        return Job(
            job_id, error=(type(exc).__name__ if isinstance(exc, DenpexError) else "ArchiveError", f"{job_id}: {exc}")
        )
    return job


# -- entry point --------------------------------------------------------------------------------
def is_archive(path: Path) -> bool:
    """Whether ``path`` is a tar/zip archive (by magic bytes, the name breaking ties)."""
    if not path.is_file():
        return False
    with path.open("rb") as fh:
        head = fh.read(512)
    kind = source_kind(head, path.name)
    if kind in ("tar", "zip"):
        return True
    return kind == "gzip" and is_archive_name(path)


class Batch:
    """The jobs of a batch directory or archive (see the module doc for the rules).

    Building it lists the directory or reads the archive's headers once, so :attr:`total` is
    known before any job is read; iterating reads the jobs one at a time, in a stable order.
    ``skipped`` holds the relative paths that belong to no job (excluded, pattern mismatch).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        pattern: str | JobPattern | None = None,
        exclude: Sequence[str] = (),
        limits: BatchLimits | None = None,
    ) -> None:
        self.path = Path(path)
        self.limits = limits or BatchLimits()
        self.skipped: list[str] = []
        pat = JobPattern(pattern) if isinstance(pattern, str) else pattern
        root = self.path
        self._listed: list[Job] | None = None
        #: Job ids in the order they are read.
        self.ids: list[str] = []
        self._iter: Callable[[], Iterator[Job]]
        if not root.exists() and not root.is_symlink():
            raise LogNotFoundError(f"{root}: no such file or directory", filename=str(root), errno=errno.ENOENT)
        if root.is_dir():
            if pat is None:
                self._listed = list(_dir_jobs(root, exclude))
            else:
                self._listed = list(_dir_pattern_jobs(root, pat, exclude, self.skipped))
            self.kind = "directory"
        elif is_archive(root):
            with root.open("rb") as fh:
                kind = source_kind(fh.read(512), root.name)
            self.kind = f"{kind} archive" if kind != "gzip" else "tar archive"
            if kind == "zip":
                zplan, by_job = _zip_plan(root, self.limits, pat, exclude, self.skipped)
                self._iter = lambda: _zip_jobs(root, self.limits, zplan, by_job)
                self.ids = list(zplan.order)
            else:
                tplan = _tar_plan(root, self.limits, pat, exclude, self.skipped)
                self._iter = lambda: _tar_jobs(root, self.limits, tplan)
                self.ids = list(tplan.order)
        elif root.is_file():  # a single log: a batch of one
            self.kind = "file"
            self._listed = [Job(root.name, path=root, size=root.stat().st_size)]
        else:
            raise LogNotFoundError(f"{root}: not a regular file or directory")
        if self._listed is not None:
            self.ids = [j.id for j in self._listed]
        self.total = len(self.ids)

    def __len__(self) -> int:
        return self.total

    def __iter__(self) -> Iterator[Job]:
        if self._listed is not None:
            return iter(self._listed)
        return self._iter()


def discover_jobs(
    path: str | os.PathLike[str],
    *,
    pattern: str | JobPattern | None = None,
    exclude: Sequence[str] = (),
    limits: BatchLimits | None = None,
) -> Batch:
    """The jobs of a batch directory or archive: a :class:`Batch` (sized, iterable).

    Raises :class:`~denpex_ml.errors.LogNotFoundError` or :class:`~denpex_ml.errors.ArchiveError`
    only for the batch as a whole (missing path, unreadable archive); a bad job is a
    :class:`Job` with ``error`` set.
    """
    return Batch(path, pattern=pattern, exclude=exclude, limits=limits)
