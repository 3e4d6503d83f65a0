"""The labelled incident: one failed job, its logs, its label and where it came from.

An incident is the unit of every dataset in denpex_ml (real, synthetic, user-supplied).
Its on-disk form is one JSON object (see ``docs/dataset-format.md``); this module
holds the in-memory form, :class:`Incident`, the field validation shared by every
reader, and :func:`source_group`, the key that keeps near-duplicates of one source
on one side of a split.

Example
-------
>>> inc = Incident.from_dict(
...     {"id": "ex-1", "label": "cuda-oom", "log": "torch.OutOfMemoryError: CUDA out of memory",
...      "source": "https://github.com/org/repo/issues/12#issuecomment-3"},
...     labels={"cuda-oom"},
... )
>>> inc.source_group
'github.com/org/repo/12'
"""

from __future__ import annotations

import copy
import difflib
import json
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from denpex_ml.errors import DatasetError, DatasetLabelError
from denpex_ml.taxonomy.groups import NO_FAILURE_ID
from denpex_ml.taxonomy.schema import UNKNOWN_ID

__all__ = [
    "FIELDS",
    "SYNTHETIC_PREFIX",
    "Incident",
    "check_log_key",
    "source_group",
]

#: Every top-level field of an incident record, in the order they are written.
FIELDS: tuple[str, ...] = ("id", "label", "log", "logs", "initiating_rank", "source", "meta")
_REQUIRED = ("id", "label", "source")

#: Prefix of sources made by the synthetic generator: ``synthetic:<recipe>:<seed>``.
SYNTHETIC_PREFIX = "synthetic:"

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_INTEGER = re.compile(r"-?[0-9]+")
_URL = re.compile(r"https?://", re.IGNORECASE)
_GITHUB_THREAD_KINDS = frozenset({"issues", "pull", "pulls", "discussions"})


def check_log_key(key: object) -> str | None:
    """Why ``key`` is not a valid key of ``logs``, or ``None`` if it is.

    A key is either a non-negative integer rank written canonically (``"0"``, ``"13"``)
    or a relative file path with forward slashes (``"rank3.log"``,
    ``"node-a/worker-2.log"``) that has no ``..``/``.``/empty component and is not
    absolute.
    """
    if not isinstance(key, str):
        return f"keys must be strings, found {type(key).__name__}"
    if not key or key != key.strip():
        return f"key {key!r} is empty or has surrounding whitespace"
    if _CONTROL.search(key):
        return f"key {key!r} contains a control character"
    if _INTEGER.fullmatch(key):
        if key.startswith("-"):
            return f"rank key {key!r} is negative; ranks are integers >= 0"
        if len(key) > 1 and key.startswith("0"):
            return f"rank key {key!r} has a leading zero; write {str(int(key))!r}"
        return None
    if "\\" in key:
        return f"file key {key!r} contains a backslash; use '/' between folders"
    if key.startswith("/") or re.match(r"[A-Za-z]:", key):
        return f"file key {key!r} is an absolute path; keys are relative to the incident"
    parts = key.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return f"file key {key!r} has an empty, '.' or '..' path component"
    return None


def source_group(source: str) -> str:
    """The split group of a source: incidents of one group never straddle a split.

    - A GitHub thread URL becomes ``github.com/<owner>/<repo>/<number>``: the fragment
      (``#issuecomment-…``), the query and any trailing path (``/files``) are dropped,
      owner and repository are lower-cased, and ``issues``/``pull``/``discussions``
      count as one thread because GitHub numbers them in one sequence.
    - Any other URL becomes ``<host>/<path>`` without scheme, ``www.``, query, fragment.
    - ``synthetic:<recipe>:<seed>[:…]`` becomes ``synthetic:<recipe>:<seed>``: every
      incident drawn from one recipe with one seed is one group.
    - Free text is whitespace-collapsed and lower-cased.

    >>> source_group("https://github.com/NVIDIA/Megatron-LM/pull/516/files#r1")
    'github.com/nvidia/megatron-lm/516'
    >>> source_group("synthetic:nccl-timeout:7:3")
    'synthetic:nccl-timeout:7'
    """
    text = source.strip()
    if text.startswith(SYNTHETIC_PREFIX):
        parts = text.split(":")
        if len(parts) >= 3:
            return f"synthetic:{parts[1]}:{parts[2]}"
        return text
    if _URL.match(text):
        url = urlsplit(text)
        host = (url.hostname or "").lower().removeprefix("www.")
        segments = [s for s in url.path.split("/") if s]
        if (
            host == "github.com"
            and len(segments) >= 4
            and segments[2] in _GITHUB_THREAD_KINDS
            and segments[3].isdigit()
        ):
            owner, repo = segments[0].lower(), segments[1].lower()
            return f"github.com/{owner}/{repo}/{int(segments[3])}"
        return "/".join([host, *segments])
    return " ".join(text.split()).lower()


def _check_source(source: str) -> str | None:
    if not source.strip():
        return "must not be empty"
    if source.startswith(SYNTHETIC_PREFIX):
        parts = source.split(":")
        if len(parts) < 3 or not parts[1] or not parts[2]:
            return f"synthetic sources are 'synthetic:<recipe>:<seed>', found {source!r}"
    elif _URL.match(source) and not urlsplit(source).hostname:
        return f"URL {source!r} has no host"
    return None


def _check_label(label: str, labels: Collection[str]) -> str | None:
    if label == UNKNOWN_ID or label in labels:
        return None
    close = difflib.get_close_matches(label, list(dict.fromkeys([*labels, UNKNOWN_ID])), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return f"{label!r} is not a taxonomy id{hint}"


def _type_name(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _field_problems(
    *,
    id: object,
    label: object,
    source: object,
    log: object,
    logs: object,
    initiating_rank: object,
    meta: object,
) -> list[tuple[str, str]]:
    """Structural problems of an incident's fields as ``(field, message)`` pairs."""
    problems: list[tuple[str, str]] = []
    for name, value in (("id", id), ("label", label), ("source", source)):
        if not isinstance(value, str):
            problems.append((name, f"expected a string, found {_type_name(value)}"))
    if isinstance(id, str) and (not id or id != id.strip() or _CONTROL.search(id)):
        problems.append(("id", f"must be non-empty without surrounding whitespace or control characters, found {id!r}"))
    if isinstance(label, str) and not label:
        problems.append(("label", "must not be empty"))
    if isinstance(source, str):
        why = _check_source(source)
        if why:
            problems.append(("source", why))

    if log is not None and logs is not None:
        problems.append(("log", "give either 'log' or 'logs', not both"))
    elif log is None and logs is None:
        problems.append(("log", "missing: give 'log' (one text) or 'logs' (name -> text)"))
    elif log is not None:
        if not isinstance(log, str):
            problems.append(("log", f"expected a string, found {_type_name(log)}"))
        elif not log.strip():
            problems.append(("log", "empty log"))
    else:
        if not isinstance(logs, Mapping):
            problems.append(("logs", f"expected an object of name -> text, found {_type_name(logs)}"))
        elif not logs:
            problems.append(("logs", "empty: give at least one log"))
        else:
            for key, text in logs.items():
                why = check_log_key(key)
                if why:
                    problems.append(("logs", why))
                elif not isinstance(text, str):
                    problems.append((f"logs[{key!r}]", f"expected a string, found {_type_name(text)}"))
                elif not text.strip():
                    problems.append((f"logs[{key!r}]", "empty log"))

    if initiating_rank is not None and (
        isinstance(initiating_rank, bool) or not isinstance(initiating_rank, int) or initiating_rank < 0
    ):
        problems.append(("initiating_rank", f"expected an integer >= 0 or null, found {initiating_rank!r}"))
    elif initiating_rank is not None and label == NO_FAILURE_ID:
        problems.append(("initiating_rank", "a 'no-failure' incident has no failing rank: give null"))

    if not isinstance(meta, Mapping):
        problems.append(("meta", f"expected an object, found {_type_name(meta)}"))
    else:
        bad_keys = [k for k in meta if not isinstance(k, str)]
        if bad_keys:
            problems.append(("meta", f"keys must be strings, found {bad_keys[0]!r}"))
        else:
            try:
                json.dumps(meta, allow_nan=False)
            except (TypeError, ValueError) as exc:
                problems.append(("meta", f"must be JSON-serialisable: {exc}"))
    return problems


def _raise(where: str, problems: list[tuple[str, str]], *, label_only: bool = False) -> None:
    lines = [f"{where}: field {name}: {message}" for name, message in problems]
    error = DatasetLabelError if label_only else DatasetError
    raise error("\n".join(lines))


@dataclass(frozen=True)
class Incident:
    """One labelled failed job.

    Exactly one of ``log`` (the job's log as one text) and ``logs`` (file or rank name
    -> text) is set. Mappings are copied at construction; treat them as read-only.
    Instances compare by value and hash by ``(id, label, source)``.

    Attributes
    ----------
    id:
        Unique within a dataset.
    label:
        A taxonomy id or ``unknown``: the root cause on the rank that failed first.
    source:
        Provenance: a URL, ``synthetic:<recipe>:<seed>``, or free text.
    log, logs:
        The log text(s); see :func:`check_log_key` for the keys of ``logs``.
    initiating_rank:
        The global rank that failed first, when known.
    meta:
        Free-form, JSON-serialisable extra fields (title, evidence, ...).
    """

    id: str
    label: str
    source: str
    log: str | None = None
    logs: Mapping[str, str] | None = None
    initiating_rank: int | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        problems = _field_problems(
            id=self.id,
            label=self.label,
            source=self.source,
            log=self.log,
            logs=self.logs,
            initiating_rank=self.initiating_rank,
            meta=self.meta,
        )
        if problems:
            _raise(f"incident {self.id!r}", problems)
        if self.logs is not None:
            object.__setattr__(self, "logs", dict(self.logs))
        object.__setattr__(self, "meta", copy.deepcopy(dict(self.meta)))

    def __hash__(self) -> int:
        return hash((self.id, self.label, self.source))

    @property
    def source_group(self) -> str:
        """The split group of :attr:`source` (see :func:`source_group`)."""
        return source_group(self.source)

    @classmethod
    def from_dict(
        cls,
        raw: Mapping[str, Any],
        *,
        labels: Collection[str] | None = None,
        where: str | None = None,
    ) -> Incident:
        """Validate one record and build the incident.

        Parameters
        ----------
        raw:
            The record. A ``null`` optional field (``log``, ``logs``,
            ``initiating_rank``, ``meta``) counts as absent, as Arrow-based tools
            write missing columns as null.
        labels:
            Allowed labels (``unknown`` is always allowed); ``None`` skips the check.
        where:
            How error messages name the record, e.g. ``"data.jsonl:12"``; the id is
            appended when the record has one.

        Raises
        ------
        DatasetLabelError
            The only problem is a label outside ``labels`` (message suggests close ids).
        DatasetError
            Any other problem; every line names the record and the field.
        """
        rec_id = raw.get("id") if isinstance(raw, Mapping) else None
        name = where or "record"
        if isinstance(rec_id, str) and rec_id:
            name = f"{name} (id {rec_id!r})" if where else f"record {rec_id!r}"
        if not isinstance(raw, Mapping):
            raise DatasetError(f"{name}: expected a JSON object, found {_type_name(raw)}")

        problems: list[tuple[str, str]] = []
        for key in raw:
            if key not in FIELDS:
                close = difflib.get_close_matches(str(key), FIELDS, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                problems.append((str(key), f"unexpected field (allowed: {', '.join(FIELDS)}){hint}"))
        for key in _REQUIRED:
            if raw.get(key) is None:
                problems.append((key, "missing required field"))
        values: dict[str, Any] = {k: raw.get(k) for k in FIELDS}
        if values["meta"] is None:
            values["meta"] = {}
        problems += [
            p
            for p in _field_problems(**values)
            if not (p[1].startswith("expected a string, found null") and p[0] in _REQUIRED)
        ]
        label_problem = None
        if labels is not None and isinstance(values["label"], str) and values["label"]:
            why = _check_label(values["label"], labels)
            if why:
                label_problem = ("label", why)
                problems.append(label_problem)
        if problems:
            _raise(name, problems, label_only=problems == [label_problem])
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """The record as written to JSONL: fields in :data:`FIELDS` order.

        ``log`` or ``logs`` (whichever is set) and ``initiating_rank`` (possibly
        null) are always present; ``meta`` only when non-empty.
        """
        out: dict[str, Any] = {"id": self.id, "label": self.label}
        if self.logs is not None:
            out["logs"] = dict(self.logs)
        else:
            out["log"] = self.log
        out["initiating_rank"] = self.initiating_rank
        out["source"] = self.source
        if self.meta:
            out["meta"] = copy.deepcopy(dict(self.meta))
        return out
