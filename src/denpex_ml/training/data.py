"""Training and evaluation data: synthetic splits, real incidents, user incidents."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from denpex_ml.dataset import Incident, load_incidents, source_groups
from denpex_ml.errors import InvalidInputError
from denpex_ml.logs import LogBundle, read_logs
from denpex_ml.synthetic import HELD_OUT_LAUNCHERS, HELD_OUT_MSG_VERSIONS, make_splits
from denpex_ml.taxonomy import Taxonomy
from denpex_ml.training.cache import SplitStore, generator_signature

__all__ = ["Example", "build_data", "data_hash", "incident_bundle", "incident_files"]


@dataclass
class Example:
    """One labelled job ready for featurisation."""

    id: str
    label: str
    group: str  #: source thread (real) or incident (synthetic): never split across folds
    kind: str  #: "synthetic", "real" or "user"
    initiating_rank: int | None
    source: Any  #: str text or mapping name -> text
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def held_out_variant(self) -> bool:
        return bool(
            self.meta.get("launcher") in HELD_OUT_LAUNCHERS or self.meta.get("msg_version") in HELD_OUT_MSG_VERSIONS
        )

    @property
    def confident(self) -> bool:
        """Real labels confirmed by the thread or a maintainer (not 'unconfirmed')."""
        return bool(self.meta.get("label_confidence", "confirmed") != "unconfirmed")


def incident_bundle(source: Any) -> LogBundle:
    return read_logs(source) if isinstance(source, dict) else read_logs(text=source)


def example_from_synthetic(rec: dict[str, Any]) -> Example:
    src = rec.get("logs") or rec["log"]
    # each synthetic incident is generated independently: it is its own group (its
    # ``source`` names the recipe, shared by every incident of the class)
    return Example(
        rec["id"], rec["label"], rec["id"], "synthetic", rec.get("initiating_rank"), src, dict(rec.get("meta", {}))
    )


def example_from_incident(inc: Incident, kind: str, group: str | None = None) -> Example:
    """``inc`` as an example; its group is ``group`` (from :func:`source_groups` over the whole
    set, which joins cross-posted threads) or, without it, the incident's own thread."""
    src: Any = dict(inc.logs) if inc.logs is not None else inc.log
    return Example(
        inc.id, inc.label, inc.source_group if group is None else group, kind, inc.initiating_rank, src, dict(inc.meta)
    )


def examples_from_incidents(incidents: Sequence[Incident], kind: str) -> list[Example]:
    """``incidents`` as examples grouped by :func:`source_groups` over the whole sequence, so
    cross-posted threads share one group."""
    groups = source_groups(incidents)
    return [example_from_incident(i, kind, g) for i, g in zip(incidents, groups, strict=True)]


def build_data(
    *,
    taxonomy: Taxonomy,
    seed: int,
    per_class: tuple[int, int, int],
    real_data: str | Sequence[str] | None,
    extra_data: Iterable[str] = (),
    cache_dir: Path | None = None,
) -> dict[str, list[Example]]:
    """``{"train", "val", "test"}`` synthetic splits, ``"real"`` and ``"user"`` incidents; with
    ``cache_dir`` the generated splits are read from (and saved to) a :class:`SplitStore`."""
    labels = taxonomy.ids
    store = None
    if cache_dir is not None:
        store = SplitStore(cache_dir, generator_signature(taxonomy, per_class, seed))
    splits = store.load() if store is not None else None
    if splits is None:
        splits = make_splits(*per_class, seed=seed, taxonomy=taxonomy)
        if store is not None:
            store.save(splits)
    out: dict[str, list[Example]] = {name: [example_from_synthetic(r) for r in recs] for name, recs in splits.items()}
    real = load_incidents(real_data, labels=labels) if real_data else []
    extra: Sequence[str] = list(extra_data)
    user = load_incidents(extra, labels=labels) if extra else []
    # one grouping over both sets: a user's incident that repeats a held paste shares its group
    groups = source_groups([*real, *user])
    out["real"] = [example_from_incident(i, "real", g) for i, g in zip(real, groups[: len(real)], strict=True)]
    out["user"] = [example_from_incident(i, "user", g) for i, g in zip(user, groups[len(real) :], strict=True)]
    return out


def incident_files(paths: Sequence[str | Path]) -> list[str]:
    """Incident JSONL files or label folders; an incident store directory means its JSONL."""
    out: list[str] = []
    for p in map(Path, paths):
        if not p.exists():
            raise InvalidInputError(f"retrain: incidents {p} do not exist")
        store_file = p / "incidents.jsonl"
        out.append(str(store_file if p.is_dir() and store_file.exists() else p))
    return out


def data_hash(examples: Sequence[Example]) -> str:
    """A short SHA-256 over (id, label, source) of every example, in order: names the data a
    model was trained or evaluated on (manifest, eval report)."""
    h = hashlib.sha256()
    for e in examples:
        h.update(json.dumps([e.id, e.label, e.source], sort_keys=True, default=str).encode())
    return h.hexdigest()[:16]
