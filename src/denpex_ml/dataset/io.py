"""Reading and writing labelled incidents: JSONL files, label folders, Hugging Face datasets.

Two on-disk forms are read by :func:`load_incidents`:

- **JSONL**: one incident record per line (see ``docs/dataset-format.md``).
- **Label folders**: ``<root>/<label>/<incident>/<files...>`` (each file of the incident
  folder becomes one entry of ``logs``, keyed by its path relative to the folder) and
  ``<root>/<label>/<incident>.<ext>`` (a single-file incident, ``log``). An incident
  folder may hold ``incident.json`` with ``source``, ``initiating_rank`` and ``meta``.

JSONL is parsed with the standard library, not ``datasets``: an Arrow reader neither
reports line numbers nor keeps a wrongly typed value wrong (it casts ``5`` to ``"5"``
or fails on the whole file), and both are needed for errors that name the record and
field. :func:`to_hf_dataset` and :func:`from_hf_dataset` convert to and from a
``datasets.Dataset`` whose columns are exactly the record fields, with ``logs`` and
``meta`` typed ``datasets.Json()`` so ragged mappings survive (``datasets >= 4.7``).
``datasets`` is imported only inside those two functions.
"""

from __future__ import annotations

import glob
import json
import logging
import os
import tempfile
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from denpex_ml.dataset.incident import FIELDS, Incident
from denpex_ml.errors import DatasetError, DatasetLabelError

if TYPE_CHECKING:
    import datasets

__all__ = [
    "SIDECAR_NAME",
    "from_hf_dataset",
    "keep_unique",
    "load_incidents",
    "parse_jsonl",
    "to_hf_dataset",
    "write_jsonl",
]

logger = logging.getLogger(__name__)

#: File in an incident folder holding its ``source``, ``initiating_rank`` and ``meta``.
SIDECAR_NAME = "incident.json"
_SIDECAR_FIELDS = ("source", "initiating_rank", "meta")
#: How many problems one error message lists before it stops.
MAX_REPORTED_PROBLEMS = 50
_NEW_FILE_MODE = 0o644

PathLike = str | os.PathLike[str]


class _Problems:
    """Collects record errors across a load so one error reports them together."""

    def __init__(self) -> None:
        self.messages: list[str] = []
        self.label_only = True

    def add(self, exc: DatasetError) -> None:
        self.messages.append(str(exc))
        self.label_only = self.label_only and isinstance(exc, DatasetLabelError)

    def raise_if_any(self) -> None:
        if not self.messages:
            return
        shown = self.messages[:MAX_REPORTED_PROBLEMS]
        more = len(self.messages) - len(shown)
        head = f"{len(self.messages)} invalid incident record(s):" if len(self.messages) > 1 else ""
        body = "\n".join(shown) + (f"\n... and {more} more" if more > 0 else "")
        error = DatasetLabelError if self.label_only else DatasetError
        raise error(f"{head}\n{body}" if head else body)


def _resolve_labels(labels: Collection[str] | None) -> frozenset[str]:
    if labels is not None:
        return frozenset(labels)
    from denpex_ml.taxonomy import load_taxonomy

    return frozenset(load_taxonomy().ids)


def expand_data_path(path: PathLike) -> list[Path]:
    """A path, or a glob pattern such as ``data/real/*.jsonl`` (sorted matches)."""
    text = os.fspath(path)
    if any(c in text for c in "*?[") and not Path(text).exists():
        matches = sorted(Path(m) for m in glob.glob(text))
        if not matches:
            raise DatasetError(f"{text}: no file matches this pattern")
        return matches
    return [Path(text)]


def data_path_exists(path: PathLike) -> bool:
    """Whether a data path exists, or a glob pattern matches at least one file."""
    text = os.fspath(path)
    return Path(text).exists() or (any(c in text for c in "*?[") and bool(glob.glob(text)))


def _as_paths(path_or_paths: PathLike | Iterable[PathLike]) -> list[Path]:
    if isinstance(path_or_paths, (str, os.PathLike)):
        return expand_data_path(path_or_paths)
    paths = [q for p in path_or_paths for q in expand_data_path(p)]
    if not paths:
        raise DatasetError("load_incidents: no path given")
    return paths


def load_incidents(
    path_or_paths: PathLike | Iterable[PathLike],
    *,
    labels: Collection[str] | None = None,
) -> list[Incident]:
    """Load and validate incidents from JSONL files and/or label folders.

    Parameters
    ----------
    path_or_paths:
        One path or several. A file is read as JSONL; a directory as the label-folder
        layout described in this module's docstring.
    labels:
        Allowed labels (``unknown`` is always allowed). ``None`` uses the ids of the
        bundled taxonomy (:func:`denpex_ml.taxonomy.load_taxonomy`).

    Returns
    -------
    list[Incident]
        In file order (JSONL) or sorted path order (folders), paths in the order given.

    Raises
    ------
    DatasetError
        A path is missing or unreadable, or records are invalid. Every problem found is
        listed (up to 50), each naming ``file:line`` or the folder, the id and the field.
        Ids must be unique across everything loaded in one call.
    DatasetLabelError
        (a :class:`DatasetError` and :class:`~denpex_ml.errors.UnknownLabelError`)
        when the only problems are labels outside ``labels``.
    """
    allowed = _resolve_labels(labels)
    problems = _Problems()
    seen: dict[str, str] = {}
    incidents: list[Incident] = []
    for path in _as_paths(path_or_paths):
        if path.is_dir():
            found = _read_label_folders(path, allowed, problems)
        elif path.is_file():
            found = _read_jsonl(path, allowed, problems)
        else:
            raise DatasetError(f"{path}: no such file or directory")
        for where, incident in found:
            keep_unique(incident, where, where, seen, incidents, problems.add)
    problems.raise_if_any()
    logger.debug("loaded %d incidents", len(incidents))
    return incidents


def _read_jsonl(path: Path, labels: frozenset[str], problems: _Problems) -> list[tuple[str, Incident]]:
    try:
        handle = path.open(encoding="utf-8")
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    with handle:
        try:
            return [(where, incident) for _, where, incident in parse_jsonl(handle, str(path), labels, problems.add)]
        except UnicodeDecodeError as exc:
            raise DatasetError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc


def keep_unique(
    incident: Incident,
    where: str,
    place: str,
    seen: dict[str, str],
    incidents: list[Incident],
    problem: Callable[[DatasetError], None],
) -> None:
    """Append ``incident`` unless its id was ``seen`` (then a problem naming where it was first
    seen); ``place`` is how a later duplicate names this one (``file:line``, ``row N``, ``line N``)."""
    first = seen.get(incident.id)
    if first is not None:
        problem(DatasetError(f"{where} (id {incident.id!r}): field id: duplicate id, first seen at {first}"))
        return
    seen[incident.id] = place
    incidents.append(incident)


def parse_jsonl(
    lines: Iterable[str],
    name: str,
    labels: frozenset[str] | None,
    problem: Callable[[DatasetError], None],
) -> Iterator[tuple[int, str, Incident]]:
    """``(line number, "name:line", incident)`` of every valid record of incident JSONL lines.

    The one parser of the format (dataset files and the incident store): blank lines are passed
    over; a line that is not JSON or not a valid record goes to ``problem`` (the caller
    collects them) and the next line is read. ``labels=None`` checks no label.
    """
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{name}:{lineno}"
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            problem(DatasetError(f"{where}: bad JSON: {exc.msg} at column {exc.colno}"))
            continue
        try:
            incident = Incident.from_dict(raw, labels=labels, where=where)
        except DatasetError as exc:
            problem(exc)
            continue
        yield lineno, where, incident


def _read_text(path: Path) -> str:
    """A log file as text; undecodable bytes become U+FFFD, NUL bytes mean binary."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    if b"\x00" in data:
        raise DatasetError(f"{path}: binary file (contains NUL bytes), expected a text log")
    return data.decode("utf-8", errors="replace").removeprefix("\ufeff")


def _visible(entries: Iterable[Path]) -> list[Path]:
    return sorted(p for p in entries if not p.name.startswith("."))


def _read_label_folders(root: Path, labels: frozenset[str], problems: _Problems) -> list[tuple[str, Incident]]:
    found: list[tuple[str, Incident]] = []
    for label_dir in _visible(root.iterdir()):
        if not label_dir.is_dir():
            if not label_dir.name.upper().startswith("README"):
                problems.add(
                    DatasetError(f"{label_dir}: expected a label folder (<root>/<label>/<incident>), found a file")
                )
            continue
        for entry in _visible(label_dir.iterdir()):
            try:
                if entry.is_dir():
                    record = _folder_record(entry, label_dir.name)
                elif entry.is_file():
                    record = {
                        "id": entry.stem,
                        "label": label_dir.name,
                        "log": _read_text(entry),
                        "source": f"dir:{label_dir.name}/{entry.stem}",
                    }
                else:
                    raise DatasetError(f"{entry}: neither a file nor a folder")
                found.append((str(entry), Incident.from_dict(record, labels=labels, where=str(entry))))
            except DatasetError as exc:
                problems.add(exc)
    return found


def _folder_record(folder: Path, label: str) -> dict[str, Any]:
    record: dict[str, Any] = {"id": folder.name, "label": label, "source": f"dir:{label}/{folder.name}"}
    sidecar = folder / SIDECAR_NAME
    if sidecar.is_file():
        try:
            extra = json.loads(sidecar.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise DatasetError(f"{sidecar}: cannot read as JSON: {exc}") from exc
        if not isinstance(extra, dict):
            raise DatasetError(f"{sidecar}: expected a JSON object, found {type(extra).__name__}")
        unexpected = sorted(set(extra) - set(_SIDECAR_FIELDS))
        if unexpected:
            raise DatasetError(
                f"{sidecar}: field {unexpected[0]}: unexpected (allowed: {', '.join(_SIDECAR_FIELDS)}; "
                "id and label come from the folder names)"
            )
        record.update(extra)
    logs: dict[str, str] = {}
    for file in sorted(folder.rglob("*")):
        rel = file.relative_to(folder)
        if any(part.startswith(".") for part in rel.parts) or file == sidecar:
            continue
        if file.is_symlink():
            raise DatasetError(f"{file}: symbolic links are not read in incident folders")
        if file.is_file():
            logs[rel.as_posix()] = _read_text(file)
    if not logs:
        raise DatasetError(f"{folder}: field logs: incident folder has no log files")
    record["logs"] = logs
    return record


def write_jsonl(incidents: Iterable[Incident], path: PathLike) -> Path:
    """Write incidents as JSONL, one record per line, UTF-8, ``\\n`` line ends.

    The output is deterministic (field order of :data:`FIELDS`, keys of ``logs`` and
    ``meta`` in their stored order) and written atomically: a temporary file in the
    same folder is renamed over ``path``.

    Raises
    ------
    DatasetError
        Two incidents share an id, or the file cannot be written.
    """
    target = Path(path)
    lines: list[str] = []
    seen: set[str] = set()
    for incident in incidents:
        if incident.id in seen:
            raise DatasetError(f"{target}: field id: duplicate id {incident.id!r} in the incidents to write")
        seen.add(incident.id)
        lines.append(json.dumps(incident.to_dict(), ensure_ascii=False, allow_nan=False))
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    except OSError as exc:
        raise DatasetError(f"{target}: cannot write: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write("".join(line + "\n" for line in lines))
        # mkstemp creates 0600; give the file the mode an ordinary new file would have.
        os.chmod(tmp, target.stat().st_mode & 0o777 if target.exists() else _NEW_FILE_MODE)
        os.replace(tmp, target)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise DatasetError(f"{target}: cannot write: {exc.strerror or exc}") from exc
    return target


def _hf_features() -> datasets.Features:
    import datasets

    if not hasattr(datasets, "Json"):
        raise DatasetError(f"datasets {datasets.__version__} has no Json feature type; install datasets>=4.7")
    return datasets.Features(
        {
            "id": datasets.Value("string"),
            "label": datasets.Value("string"),
            "log": datasets.Value("string"),
            "logs": datasets.Json(),
            "initiating_rank": datasets.Value("int64"),
            "source": datasets.Value("string"),
            "meta": datasets.Json(),
        }
    )


def to_hf_dataset(incidents: Sequence[Incident]) -> datasets.Dataset:
    """The incidents as a ``datasets.Dataset`` with one column per record field.

    ``log`` is null where ``logs`` is set and vice versa; ``logs`` and ``meta`` are
    ``datasets.Json()`` columns, so each row keeps its own keys (no null-filled union
    of all keys). ``Dataset.to_json(path)`` of the result is a valid incident file.
    """
    import datasets

    rows = []
    for incident in incidents:
        row = dict.fromkeys(FIELDS)
        row.update(incident.to_dict())
        rows.append(row)
    return datasets.Dataset.from_list(rows, features=_hf_features())


def _strip_nulls(value: Any) -> Any:
    """Drop null values from a mapping (what a struct column adds for absent keys)."""
    if isinstance(value, Mapping):
        return {k: v for k, v in value.items() if v is not None}
    return value


def from_hf_dataset(
    dataset: datasets.Dataset | Iterable[Mapping[str, Any]],
    *,
    labels: Collection[str] | None = None,
) -> list[Incident]:
    """Incidents from the rows of a ``datasets.Dataset`` (or any iterable of rows).

    Accepts the output of :func:`to_hf_dataset` and of
    ``datasets.load_dataset("json", data_files=..., split="train")`` on an incident
    file. When ``datasets`` inferred ``logs`` as a struct (all rows sharing their keys,
    or older versions), keys a row does not have come back as null: they are removed.

    Raises
    ------
    DatasetError
        As :func:`load_incidents`; records are named ``row N``.
    """
    allowed = _resolve_labels(labels)
    problems = _Problems()
    seen: dict[str, str] = {}
    incidents: list[Incident] = []
    for index, row in enumerate(dataset):
        where = f"row {index}"
        record = dict(row)
        if "logs" in record:
            record["logs"] = _strip_nulls(record["logs"])
        try:
            incident = Incident.from_dict(record, labels=allowed, where=where)
        except DatasetError as exc:
            problems.add(exc)
            continue
        keep_unique(incident, where, where, seen, incidents, problems.add)
    problems.raise_if_any()
    return incidents
