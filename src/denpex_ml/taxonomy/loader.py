"""Loading taxonomy YAML files into a validated, immutable :class:`Taxonomy`."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

import yaml
from pydantic import ValidationError

from denpex_ml.errors import TaxonomyError, UnknownLabelError
from denpex_ml.taxonomy.schema import UNKNOWN_ID, Entry

__all__ = ["Taxonomy", "bundled_taxonomy_dir", "load_taxonomy"]

_SUFFIXES = (".yaml", ".yml")
#: libyaml's safe loader when PyYAML was built with it (~10x faster), else the pure-Python one;
#: both construct only plain YAML types
_SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def bundled_taxonomy_dir() -> Path:
    """Directory of the taxonomy shipped with the package.

    A wheel carries it as ``denpex_ml/data/taxonomy``; a source checkout (editable
    install) keeps it in the repository's top-level ``data/taxonomy``.
    """
    packaged = Path(str(resources.files("denpex_ml"))) / "data" / "taxonomy"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[3] / "data" / "taxonomy"


def _format_validation_error(path: Path, exc: ValidationError) -> str:
    lines = [f"{path}: invalid taxonomy entry"]
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(entry)"
        got = err.get("input")
        got_text = repr(got) if not isinstance(got, dict) else "a mapping"
        if len(got_text) > 80:
            got_text = got_text[:77] + "..."
        lines.append(f"  field {loc}: {err['msg']} (got {got_text})")
    return "\n".join(lines)


def _load_file(path: Path) -> Entry:
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=_SafeLoader)
    except OSError as exc:
        raise TaxonomyError(f"{path}: cannot read taxonomy file: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise TaxonomyError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise TaxonomyError(f"{path}: expected a mapping of entry fields, found {type(raw).__name__}")
    try:
        entry = Entry.model_validate(raw)
    except ValidationError as exc:
        raise TaxonomyError(_format_validation_error(path, exc)) from None
    if entry.id != path.stem:
        raise TaxonomyError(f"{path}: field id: expected the file name stem {path.stem!r}, found {entry.id!r}")
    return entry


def _entry_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        raise TaxonomyError(f"{directory}: taxonomy directory does not exist")
    return sorted(p for p in directory.iterdir() if p.suffix in _SUFFIXES and p.is_file())


@dataclass(frozen=True)
class Taxonomy:
    """An immutable, validated set of entries keyed by id (``unknown`` always included)."""

    entries: dict[str, Entry]
    sources: dict[str, Path] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if UNKNOWN_ID not in self.entries:
            raise TaxonomyError(f"taxonomy has no {UNKNOWN_ID!r} entry")
        for entry in self.entries.values():
            for rel in entry.related:
                if rel.id not in self.entries:
                    where = self.sources.get(entry.id, entry.id)
                    raise TaxonomyError(f"{where}: field related: id {rel.id!r} is not in the taxonomy")

    def to_json(self) -> str:
        """The entries as JSON (what a model directory carries; see :meth:`from_json`)."""
        import json

        return json.dumps({"entries": [e.model_dump(mode="json") for e in self]}, indent=1, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str | bytes, *, where: str = "taxonomy.json") -> Taxonomy:
        """Entries written by :meth:`to_json`, validated like YAML entries.

        Raises :class:`~denpex_ml.errors.TaxonomyError` naming the entry and field."""
        import json

        try:
            doc = json.loads(text)
        except (ValueError, UnicodeDecodeError) as exc:
            raise TaxonomyError(f"{where}: not JSON ({exc})") from None
        raw = doc.get("entries") if isinstance(doc, dict) else None
        if not isinstance(raw, list):
            raise TaxonomyError(f"{where}: expected an object with a list of 'entries'")
        entries: dict[str, Entry] = {}
        for i, item in enumerate(raw):
            try:
                entry = Entry.model_validate(item)
            except ValidationError as exc:
                first = exc.errors()[0]
                field_ = ".".join(str(x) for x in first["loc"]) or "(entry)"
                raise TaxonomyError(f"{where}: entry {i}: field {field_}: {first['msg']}") from None
            if entry.id in entries:
                raise TaxonomyError(f"{where}: entry id {entry.id!r} appears twice")
            entries[entry.id] = entry
        return cls(entries)

    def __contains__(self, entry_id: object) -> bool:
        return entry_id in self.entries

    def __iter__(self) -> Iterator[Entry]:
        return iter(self.entries[k] for k in self.ids)

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def ids(self) -> list[str]:
        """Entry ids, sorted, with ``unknown`` last."""
        return sorted(self.entries, key=lambda i: (i == UNKNOWN_ID, i))

    @property
    def label_ids(self) -> list[str]:
        """Ids a classifier predicts (all but ``unknown``)."""
        return [i for i in self.ids if i != UNKNOWN_ID]

    def get(self, entry_id: str) -> Entry:
        """Entry by id; raises :class:`UnknownLabelError` naming close matches."""
        try:
            return self.entries[entry_id]
        except KeyError:
            import difflib

            close = difflib.get_close_matches(entry_id, self.entries, n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise UnknownLabelError(f"unknown failure id {entry_id!r}{hint}") from None

    def search(self, query: str, limit: int = 10) -> list[Entry]:
        """Entries ranked by how many query words occur in their text (id, title, tags, symptoms)."""
        words = [w for w in re.findall(r"[\w.-]+", query.lower()) if len(w) > 1]
        if not words:
            return []
        scored: list[tuple[int, str]] = []
        for entry in self:
            haystack = entry.text_for_search().lower()
            score = sum(haystack.count(w) for w in words) + 5 * sum(w in entry.id for w in words)
            if score:
                scored.append((-score, entry.id))
        return [self.entries[i] for _, i in sorted(scored)[:limit]]

    def fingerprint_hash(self) -> str:
        """Stable hash of the ids and their fingerprints (what a model depends on)."""
        h = hashlib.sha256()
        for entry in self:
            h.update(entry.id.encode())
            for fp in entry.fingerprints:
                h.update(f"|{fp.kind.value}|{fp.role.value}|{fp.weight}|{fp.pattern}".encode())
            if entry.hang_signals:
                h.update(("|hang:" + ",".join(entry.hang_signals)).encode())
            for b in entry.benign:
                h.update(f"|benign|{b.kind.value}|{b.pattern}".encode())
            h.update(b"\n")
        return h.hexdigest()[:16]


@lru_cache(maxsize=8)
def _load_cached(dirs: tuple[str, ...]) -> Taxonomy:
    entries: dict[str, Entry] = {}
    sources: dict[str, Path] = {}
    for d in dirs:
        for path in _entry_files(Path(d)):
            entry = _load_file(path)
            entries[entry.id] = entry  # later directories override earlier ones
            sources[entry.id] = path
    return Taxonomy(entries=entries, sources=sources)


def load_taxonomy(
    extra_dirs: Iterable[str | os.PathLike[str]] | None = None, *, include_bundled: bool = True
) -> Taxonomy:
    """Load the bundled taxonomy, then ``extra_dirs`` in order (adding or overriding entries).

    Raises :class:`~denpex_ml.errors.TaxonomyError` naming the file and field of any bad entry.
    """
    dirs: list[str] = [str(bundled_taxonomy_dir())] if include_bundled else []
    dirs += [str(Path(d).resolve()) for d in (extra_dirs or ())]
    if not dirs:
        raise TaxonomyError("no taxonomy directory given")
    return _load_cached(tuple(dirs))


def _ids(dirs: Sequence[Path]) -> list[str]:  # pragma: no cover - debugging helper
    return [p.stem for d in dirs for p in _entry_files(d)]
