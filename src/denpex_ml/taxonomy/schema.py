"""Schema of one failure-taxonomy entry (one YAML file under ``data/taxonomy/``).

The schema is a pydantic model: every YAML file is validated against it at load, and
a bad file fails with the file name, the field path and what was expected.
"""

from __future__ import annotations

import re
from enum import StrEnum
from functools import cached_property
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator

__all__ = [
    "UNKNOWN_ID",
    "BenignMessage",
    "Category",
    "Entry",
    "Fingerprint",
    "FingerprintKind",
    "FingerprintRole",
    "FixStep",
    "Reference",
    "RelatedEntry",
]

UNKNOWN_ID = "unknown"

_ID_RE = r"^[a-z0-9]+(-[a-z0-9]+)*$"
EntryId = Annotated[str, StringConstraints(pattern=_ID_RE, min_length=2, max_length=64)]
NonEmpty = Annotated[str, StringConstraints(min_length=1, strip_whitespace=True)]


class Category(StrEnum):
    """Broad family of a failure; drives grouping in reports."""

    HARDWARE_NETWORK = "hardware-network"
    HARDWARE_GPU = "hardware-gpu"
    DISTRIBUTED = "distributed"
    MODEL = "model"
    CONFIGURATION = "configuration"
    RESOURCES = "resources"
    NUMERICS = "numerics"
    ENVIRONMENT = "environment"
    APPLICATION = "application"
    NONE = "none"


class FingerprintKind(StrEnum):
    LITERAL = "literal"  #: case-sensitive substring
    REGEX = "regex"  #: Python ``re`` pattern, searched per line


class FingerprintRole(StrEnum):
    ROOT_CAUSE = "root-cause"  #: printed by the rank/process where the failure starts
    SYMPTOM = "symptom"  #: downstream consequence, printed by ranks left waiting
    CONTEXT = "context"  #: configuration/environment line that makes the cause plausible


def _check_pattern(kind: FingerprintKind, pattern: str) -> None:
    """A regex pattern must compile (a literal is any text)."""
    if kind is FingerprintKind.REGEX:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"pattern is not a valid regular expression ({exc}): {pattern!r}") from exc


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)


class Fingerprint(_Strict):
    """A log signature of one failure."""

    pattern: NonEmpty
    kind: FingerprintKind = FingerprintKind.LITERAL
    role: FingerprintRole
    source: NonEmpty = Field(
        description="framework/launcher/component that prints it, e.g. nccl, pytorch, megatron, kernel"
    )
    weight: float = Field(default=1.0, gt=0.0, le=1.0, description="how specific the signal is for this entry")
    ignore_case: bool = False
    note: str | None = None

    @model_validator(mode="after")
    def _regex_compiles(self) -> Fingerprint:
        _check_pattern(self.kind, self.pattern)
        return self

    @property
    def meaning(self) -> str:
        """What the fingerprint says, in words (for a reader of the evidence): the note's first
        sentence, the literal message it matches, or where such messages come from - never the
        raw regular expression."""
        if self.note:
            first = re.split(r"(?<=[.;])\s", self.note.strip(), maxsplit=1)[0].rstrip(".;")
            return first if len(first) <= 160 else first[:157] + "..."
        if self.kind is FingerprintKind.LITERAL:
            return f'the {self.source} message "{self.pattern[:100]}"'
        return f"a known {self.source} message of this failure"

    @cached_property
    def regex(self) -> re.Pattern[str]:
        """Compiled form (literal patterns are escaped)."""
        text = self.pattern if self.kind is FingerprintKind.REGEX else re.escape(self.pattern)
        return re.compile(text, re.IGNORECASE if self.ignore_case else 0)

    def search(self, line: str) -> re.Match[str] | None:
        return self.regex.search(line)


class BenignMessage(_Strict):
    """A normal message that reads like an error (NCCL falling back to its internal network
    plugin, to sockets when no InfiniBand library is installed): a line it matches is evidence
    of nothing, so no fingerprint fires on it and it is not an error line."""

    pattern: NonEmpty
    kind: FingerprintKind = FingerprintKind.LITERAL
    source: NonEmpty
    note: str | None = None

    @model_validator(mode="after")
    def _regex_compiles(self) -> BenignMessage:
        _check_pattern(self.kind, self.pattern)
        return self


class FixStep(_Strict):
    """One step of the fix; ``commands`` holds exact flags, env vars or shell commands."""

    step: NonEmpty
    commands: list[NonEmpty] = Field(default_factory=list)


class RelatedEntry(_Strict):
    id: EntryId
    note: NonEmpty = Field(description="how to tell this entry apart from the related one")


class Reference(_Strict):
    url: Annotated[str, StringConstraints(pattern=r"^https?://\S+$")]
    title: NonEmpty


class Entry(_Strict):
    """One failure of the taxonomy: what it is, how it shows, why, and what to do."""

    id: EntryId
    title: NonEmpty
    category: Category
    tags: list[NonEmpty] = Field(default_factory=list)
    summary: NonEmpty
    symptoms: list[NonEmpty] = Field(default_factory=list)
    fingerprints: list[Fingerprint] = Field(default_factory=list)
    benign: list[BenignMessage] = Field(
        default_factory=list,
        description="normal messages that read like errors; lines matching one carry no evidence "
        "(declared on the entry whose runs print them, usually no-failure)",
    )
    root_cause: NonEmpty
    fix: list[FixStep] = Field(default_factory=list)
    confirm: list[NonEmpty] = Field(default_factory=list)
    prevention: list[NonEmpty] = Field(default_factory=list)
    affected: list[NonEmpty] = Field(default_factory=list, description="frameworks, hardware, versions affected")
    related: list[RelatedEntry] = Field(default_factory=list)
    references: list[Reference] = Field(default_factory=list)
    hang_signals: list[Annotated[str, StringConstraints(pattern=r"^(phase|signal):[a-z0-9-]+$")]] = Field(
        default_factory=list,
        description="hang-analysis features that point at this entry (phase:<phase>, signal:<name>; "
        "see denpex_ml.hang.analysis.HANG_FEATURE_NAMES)",
    )
    usual_initiator: Literal["main-process"] | None = Field(
        default=None,
        description="the rank that usually fails first in this failure when no line names one: "
        "'main-process' (rank 0 does the extra work - saving, evaluating, preprocessing - while the "
        "others wait, so it is the rank they wait for unless it timed out itself)",
    )

    @field_validator("tags")
    @classmethod
    def _lower_tags(cls, tags: list[str]) -> list[str]:
        return [t.lower() for t in tags]

    @model_validator(mode="after")
    def _complete_unless_unknown(self) -> Entry:
        if self.id == UNKNOWN_ID:
            return self
        missing = [name for name in ("symptoms", "fix", "confirm") if not getattr(self, name)]
        if missing:
            raise ValueError(f"entry {self.id!r} needs at least one item in: {', '.join(missing)}")
        # fingerprints are optional: a class can be learned from labelled incidents alone (the
        # line bank, retrieval and the classifier); when given, one must name the root cause
        if self.fingerprints and not any(fp.role is FingerprintRole.ROOT_CAUSE for fp in self.fingerprints):
            raise ValueError(f"entry {self.id!r} needs at least one fingerprint with role 'root-cause'")
        if any(r.id == self.id for r in self.related):
            raise ValueError(f"entry {self.id!r} lists itself as related")
        return self

    @property
    def is_unknown(self) -> bool:
        return self.id == UNKNOWN_ID

    def text_for_search(self) -> str:
        """Plain text used for keyword search and zero-shot embedding."""
        parts = [self.id, self.title, self.summary, " ".join(self.tags), *self.symptoms]
        parts += [fp.pattern for fp in self.fingerprints if fp.kind is FingerprintKind.LITERAL]
        return "\n".join(parts)
