"""The store itself: an ``incidents.jsonl`` in the dataset format, atomic and locked writes."""

from __future__ import annotations

import contextlib
import difflib
import fcntl
import hashlib
import json
import os
import tempfile
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from denpex_ml.dataset.incident import Incident, _check_label, check_log_key
from denpex_ml.dataset.io import keep_unique, parse_jsonl, write_jsonl
from denpex_ml.errors import (
    DatasetError,
    DatasetLabelError,
    DuplicateIncidentError,
    InputTooLargeError,
    InvalidInputError,
    UnknownIncidentError,
)
from denpex_ml.incidents.collect import Collected, LogInput, collect
from denpex_ml.logs.limits import IngestLimits
from denpex_ml.logs.masking import Masker, mask_files, mask_secrets
from denpex_ml.taxonomy import load_taxonomy
from denpex_ml.taxonomy.schema import UNKNOWN_ID

__all__ = [
    "DEFAULT_MAX_BYTES",
    "LOCK_NAME",
    "ORIGIN_USER",
    "RESERVED_META",
    "STORE_NAME",
    "IncidentStore",
    "content_sha256",
]

PathLike = str | os.PathLike[str]

#: Default cap on the masked text of one incident (all files together), in UTF-8 bytes.
DEFAULT_MAX_BYTES = 32 * 1024**2
#: The incident file inside a store directory.
STORE_NAME = "incidents.jsonl"
#: The lock file inside a store directory (held with ``flock`` while writing).
LOCK_NAME = ".incidents.lock"
#: ``meta["origin"]`` of incidents added through the store.
ORIGIN_USER = "user"
#: ``meta`` keys the store sets itself; a caller's ``meta`` may not contain them.
RESERVED_META: tuple[str, ...] = ("added", "content_sha256", "label_history", "origin")

_NEW_FILE_MODE = 0o644


def content_sha256(incident: Incident) -> str:
    """SHA-256 (hex) of an incident's stored log content.

    A single ``log`` hashes as ``[["", text]]``; ``logs`` as its ``[name, text]`` pairs
    sorted by name (JSON, compact, UTF-8). Two incidents with the same hash carry the
    same logs, so the store treats them as duplicates.

    Parameters
    ----------
    incident:
        Any incident (from the store or elsewhere).

    Returns
    -------
    str
        64 lowercase hex digits.
    """
    if incident.logs is not None:
        payload = sorted([name, text] for name, text in incident.logs.items())
    else:
        payload = [["", incident.log or ""]]
    data = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(data.encode("utf-8", errors="surrogatepass")).hexdigest()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class _Snapshot:
    key: tuple[int, int, int, int]
    incidents: tuple[Incident, ...]
    hashes: Mapping[str, str]


class IncidentStore:
    """Labelled incidents a team diagnosed, in one directory, ready for retraining.

    Parameters
    ----------
    path:
        The store directory. It is created by the first :meth:`add`; until then the
        store is empty. It holds ``incidents.jsonl`` (:data:`STORE_NAME`) and the lock
        file ``.incidents.lock``.
    taxonomy_dirs:
        Extra taxonomy directories merged over the bundled taxonomy; labels given to
        :meth:`add` and :meth:`relabel` must be ids of that merged taxonomy or
        ``unknown``.
    max_bytes:
        Most UTF-8 bytes of masked log text one incident may hold (all files together).
    limits:
        Safety limits for reading files and archives. The default is
        :class:`~denpex_ml.logs.limits.IngestLimits` with ``max_total_bytes`` lowered to
        ``4 * max_bytes``, so an oversized input is refused before it is all read.

    Raises
    ------
    InvalidInputError
        ``max_bytes`` is not a positive integer.
    TaxonomyError
        A taxonomy directory is malformed.

    Notes
    -----
    The store re-reads ``incidents.jsonl`` whenever it changed on disk (another process
    may have written it), and stored labels are not re-validated when reading: a label
    whose taxonomy directory was dropped still loads, and can be fixed with
    :meth:`relabel`. To read the file with :func:`denpex_ml.dataset.load_incidents`
    when it holds ids of an extra taxonomy, pass ``labels=store.allowed_labels``.
    """

    def __init__(
        self,
        path: PathLike,
        *,
        taxonomy_dirs: Sequence[PathLike] = (),
        max_bytes: int = DEFAULT_MAX_BYTES,
        limits: IngestLimits | None = None,
    ) -> None:
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes <= 0:
            raise InvalidInputError(f"IncidentStore: max_bytes must be a positive int, got {max_bytes!r}")
        if isinstance(taxonomy_dirs, (str, os.PathLike)):
            taxonomy_dirs = [taxonomy_dirs]
        self._path = Path(path)
        self._taxonomy_dirs = tuple(Path(d) for d in taxonomy_dirs)
        taxonomy = load_taxonomy(self._taxonomy_dirs)
        self._labels = frozenset([*taxonomy.ids, UNKNOWN_ID])
        self._max_bytes = max_bytes
        if limits is None:
            base = IngestLimits()
            limits = replace(base, max_total_bytes=min(base.max_total_bytes, 4 * max_bytes))
        self._limits = limits
        self._snapshot: _Snapshot | None = None

    # -- properties ------------------------------------------------------------------------
    @property
    def path(self) -> Path:
        """The store directory."""
        return self._path

    @property
    def file(self) -> Path:
        """The incident file, ``<path>/incidents.jsonl`` (absent until the first add)."""
        return self._path / STORE_NAME

    @property
    def allowed_labels(self) -> frozenset[str]:
        """Labels :meth:`add` and :meth:`relabel` accept (taxonomy ids and ``unknown``)."""
        return self._labels

    @property
    def max_bytes(self) -> int:
        """Cap on the masked text of one incident, in UTF-8 bytes."""
        return self._max_bytes

    def __repr__(self) -> str:
        return f"IncidentStore({str(self._path)!r})"

    # -- reading ---------------------------------------------------------------------------
    def _load(self) -> _Snapshot:
        try:
            handle = self.file.open("rb")
        except FileNotFoundError:
            return _Snapshot((0, 0, 0, 0), (), {})
        except OSError as exc:
            raise DatasetError(f"{self.file}: cannot read: {exc.strerror or exc}") from exc
        with handle:
            st = os.fstat(handle.fileno())
            key = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)
            if self._snapshot is not None and self._snapshot.key == key:
                return self._snapshot
            data = handle.read()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DatasetError(f"{self.file}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
        incidents: list[Incident] = []
        problems: list[str] = []
        seen: dict[str, str] = {}

        def problem(exc: DatasetError) -> None:
            problems.append(str(exc))

        for lineno, where, incident in parse_jsonl(text.split("\n"), str(self.file), None, problem):
            keep_unique(incident, where, f"line {lineno}", seen, incidents, problem)
        if problems:
            head = f"{self.file}: {len(problems)} invalid incident record(s):\n" if len(problems) > 1 else ""
            raise DatasetError(head + "\n".join(problems[:50]))
        snapshot = _Snapshot(key, tuple(incidents), {i.id: content_sha256(i) for i in incidents})
        self._snapshot = snapshot
        return snapshot

    def __iter__(self) -> Iterator[Incident]:
        """The stored incidents in insertion order (a snapshot of the file)."""
        return iter(self._load().incidents)

    def __len__(self) -> int:
        return len(self._load().incidents)

    def __contains__(self, incident_id: object) -> bool:
        return any(i.id == incident_id for i in self._load().incidents)

    def _find(self, snapshot: _Snapshot, incident_id: str) -> int:
        for index, incident in enumerate(snapshot.incidents):
            if incident.id == incident_id:
                return index
        ids = [i.id for i in snapshot.incidents]
        if not ids:
            hint = " (the store is empty)"
        else:
            close = difflib.get_close_matches(str(incident_id), ids, n=3, cutoff=0.5)
            hint = (
                f"; did you mean {', '.join(repr(c) for c in close)}?" if close else f" ({len(ids)} incident(s) stored)"
            )
        raise UnknownIncidentError(f"{self.file}: no incident {incident_id!r}{hint}")

    def get(self, incident_id: str) -> Incident:
        """The incident with this id.

        Raises
        ------
        UnknownIncidentError
            No such id; the message lists close ids (also a ``KeyError``).
        """
        snapshot = self._load()
        return snapshot.incidents[self._find(snapshot, incident_id)]

    def labels(self) -> dict[str, int]:
        """How many incidents carry each label, sorted by label."""
        return dict(sorted(Counter(i.label for i in self._load().incidents).items()))

    def fingerprint(self) -> str:
        """SHA-256 (hex) over the sorted ``(id, label, content hash)`` triples.

        It changes when an incident is added, removed or relabelled, or its logs change,
        and not otherwise (metadata and order do not count). A retrain can record it as
        the lineage of its training data.
        """
        snapshot = self._load()
        digest = hashlib.sha256()
        for incident_id, label, content in sorted((i.id, i.label, snapshot.hashes[i.id]) for i in snapshot.incidents):
            digest.update(f"{incident_id}\t{label}\t{content}\n".encode())
        return digest.hexdigest()

    def export(self, out: PathLike) -> Path:
        """Write every stored incident to a JSONL file (atomically); returns its path.

        Raises
        ------
        DatasetError
            The file cannot be written.
        """
        return write_jsonl(list(self), out)

    # -- writing ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        try:
            self._path.mkdir(parents=True, exist_ok=True)
            fd = os.open(self._path / LOCK_NAME, os.O_RDWR | os.O_CREAT, _NEW_FILE_MODE)
        except OSError as exc:
            raise DatasetError(f"{self._path}: cannot create the incident store: {exc.strerror or exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def _write(self, incidents: Sequence[Incident]) -> None:
        """Replace the incident file atomically (caller holds the lock)."""
        target = self.file
        lines = "".join(json.dumps(i.to_dict(), ensure_ascii=False, allow_nan=False) + "\n" for i in incidents)
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{STORE_NAME}.", suffix=".tmp", dir=self._path)
        except OSError as exc:
            raise DatasetError(f"{target}: cannot write: {exc.strerror or exc}") from exc
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
                handle.write(lines)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, target.stat().st_mode & 0o777 if target.exists() else _NEW_FILE_MODE)
            os.replace(tmp, target)
        except OSError as exc:
            Path(tmp).unlink(missing_ok=True)
            raise DatasetError(f"{target}: cannot write: {exc.strerror or exc}") from exc
        with contextlib.suppress(OSError):  # make the rename durable; not possible everywhere
            dir_fd = os.open(self._path, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        self._snapshot = None

    def _check_label(self, label: object) -> str:
        if not isinstance(label, str) or not label:
            raise InvalidInputError(f"label must be a non-empty string, got {label!r}")
        why = _check_label(label, self._labels)
        if why:
            raise DatasetLabelError(f"{self.file}: field label: {why}")
        return label

    def add(
        self,
        source: LogInput,
        *,
        label: str,
        initiating_rank: int | None = None,
        source_url: str | None = None,
        incident_id: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> Incident:
        """Mask a failed job's logs and store them as a labelled incident.

        Parameters
        ----------
        source:
            A log file (plain or ``.gz``), a directory of per-rank files (read
            recursively), an archive (``.tar``, ``.tar.gz``/``.tgz``, ``.tar.bz2``,
            ``.tar.xz``, ``.zip``), or a mapping ``file name or rank -> text``. Files are
            read as streams (archives are never extracted; links, devices and ``..``
            members are refused), decoded as UTF-8 (bad bytes become U+FFFD). A single
            file is stored as ``log``; a directory, archive or mapping as ``logs``, keyed
            by the path inside it (an archive's single top-level folder is dropped, so
            keys read ``rank0.log`` or ``node-a/worker-2.log``). Hidden files are
            skipped; so are empty or binary members of a directory or archive (listed
            in ``meta["skipped"]``).
        label:
            The root cause: a taxonomy id or ``unknown``.
        initiating_rank:
            The global rank that failed first, when known.
        source_url:
            Provenance (an issue or ticket URL); secrets and e-mails in it are masked.
            Default: ``local:<file or directory name>`` (masked), or
            ``local:<incident id>`` for a mapping.
        incident_id:
            Default: ``inc-<UTC date YYYYMMDD>-<first 8 hex digits of the content hash>``.
        meta:
            Extra JSON fields. The store adds ``added`` (UTC ISO time),
            ``content_sha256``, ``label_history`` and ``origin: "user"``; those keys
            (:data:`RESERVED_META`) may not be given.

        Returns
        -------
        Incident
            The stored incident: masked logs, final id and meta.

        Raises
        ------
        DatasetLabelError
            ``label`` is not a taxonomy id (the message suggests close ids).
        NotALogError
            A log is empty or whitespace-only, or a single file is binary (or every
            member of a directory/archive is empty or binary).
        InputTooLargeError
            The masked text exceeds ``max_bytes``, or the input exceeds ``limits``.
        DuplicateIncidentError
            The same content is already stored (the message names its id), or the id is
            taken.
        LogNotFoundError, ArchiveError, UnsafeArchiveMemberError
            The path is missing, or an archive is corrupt or unsafe.
        InvalidInputError, DatasetError
            A malformed argument (``source`` type, ``meta``, log key, id, rank...).
        """
        label = self._check_label(label)
        extra = _caller_meta(meta)
        if source_url is not None and (not isinstance(source_url, str) or not source_url.strip()):
            raise InvalidInputError(f"source_url must be a non-empty string, got {source_url!r}")
        collected = collect(source, self._limits)
        masker = Masker()
        log, logs, skipped = self._masked_logs(source, collected, masker)
        content = content_sha256(Incident(id="x", label=label, source="x", log=log, logs=logs))
        now = _now()
        if incident_id is None:
            incident_id = f"inc-{now[:10].replace('-', '')}-{content[:8]}"
        extra.update(
            {
                "added": now,
                "content_sha256": content,
                "label_history": [{"label": label, "at": now}],
                "origin": ORIGIN_USER,
            }
        )
        if skipped:
            extra.setdefault("skipped", skipped)
        incident = Incident(
            id=incident_id,
            label=label,
            source=_source_text(source_url, collected, masker, incident_id),
            log=log,
            logs=logs,
            initiating_rank=initiating_rank,
            meta=extra,
        )
        self._insert(incident, content, source)
        return incident

    def _masked_logs(
        self, source: LogInput, collected: Collected, masker: Masker
    ) -> tuple[str | None, dict[str, str] | None, list[str]]:
        """``log`` (one file) or ``logs`` (name -> text), masked, and the skipped members, masked;
        refuses text over ``max_bytes`` and names that clash or are unsafe after masking."""
        names, masked = mask_files(masker, collected.files)
        skipped = [masker.mask(s) for s in collected.skipped]
        total = sum(len(t.encode("utf-8")) for t in masked)
        if total > self._max_bytes:
            raise InputTooLargeError(
                f"{self._describe(source)}: {total} bytes of masked log text, more than the store's "
                f"max_bytes={self._max_bytes}"
            )
        if collected.single:
            return masked[0], None, skipped
        logs: dict[str, str] = {}
        for name, text in zip(names, masked, strict=True):
            why = check_log_key(name)
            if why:
                raise DatasetError(f"{self._describe(source)}: field logs: {why}")
            if name in logs:
                raise DatasetError(
                    f"{self._describe(source)}: field logs: two files are both named {name!r} after masking"
                )
            logs[name] = text
        return None, logs, skipped

    def _insert(self, incident: Incident, content: str, source: LogInput) -> None:
        """Append ``incident`` under the lock; refuses the same content or id stored already."""
        with self._locked():
            snapshot = self._load()
            for existing in snapshot.incidents:
                if snapshot.hashes[existing.id] == content:
                    raise DuplicateIncidentError(
                        f"{self._describe(source)}: duplicate: the same logs are already stored as incident "
                        f"{existing.id!r} (label {existing.label!r})",
                        existing.id,
                    )
            if any(existing.id == incident.id for existing in snapshot.incidents):
                raise DuplicateIncidentError(
                    f"{self.file}: field id: incident id {incident.id!r} is already taken", incident.id
                )
            self._write([*snapshot.incidents, incident])

    def relabel(self, incident_id: str, label: str) -> Incident:
        """Change an incident's label; the change is appended to ``meta["label_history"]``.

        Relabelling to the current label changes nothing.

        Raises
        ------
        DatasetLabelError
            ``label`` is not a taxonomy id (the message suggests close ids).
        UnknownIncidentError
            No such incident (the message lists close ids).
        """
        label = self._check_label(label)
        with self._locked():
            snapshot = self._load()
            index = self._find(snapshot, incident_id)
            old = snapshot.incidents[index]
            if old.label == label:
                return old
            meta = dict(old.meta)
            history = meta.get("label_history")
            history = list(history) if isinstance(history, list) else [{"label": old.label, "at": None}]
            history.append({"label": label, "at": _now()})
            meta["label_history"] = history
            new = replace(old, label=label, meta=meta)
            incidents = list(snapshot.incidents)
            incidents[index] = new
            self._write(incidents)
        return new

    def remove(self, incident_id: str) -> Incident:
        """Delete an incident from the store; returns it.

        Raises
        ------
        UnknownIncidentError
            No such incident (the message lists close ids).
        """
        with self._locked():
            snapshot = self._load()
            index = self._find(snapshot, incident_id)
            incidents = list(snapshot.incidents)
            removed = incidents.pop(index)
            self._write(incidents)
        return removed

    # -- input -----------------------------------------------------------------------------
    @staticmethod
    def _describe(source: LogInput) -> str:
        return "log mapping" if isinstance(source, Mapping) else str(source)


def _caller_meta(meta: Mapping[str, Any] | None) -> dict[str, Any]:
    """A copy of the caller's ``meta``; the keys the store sets itself (:data:`RESERVED_META`) are refused."""
    if meta is None:
        return {}
    if not isinstance(meta, Mapping):
        raise InvalidInputError(f"meta must be a mapping, got {type(meta).__name__}")
    reserved = sorted(set(meta) & set(RESERVED_META))
    if reserved:
        raise InvalidInputError(f"meta: {', '.join(reserved)} are set by the incident store; leave them out")
    return dict(meta)


def _source_text(source_url: str | None, collected: Collected, masker: Masker, incident_id: str) -> str:
    """The incident's provenance: the URL with secrets masked, else ``local:<masked file name>``,
    else (a mapping) ``local:<incident id>``."""
    if source_url is not None:
        return mask_secrets(source_url.strip())
    if collected.basename is not None:
        return f"local:{masker.mask(collected.basename)}"
    return f"local:{incident_id}"
