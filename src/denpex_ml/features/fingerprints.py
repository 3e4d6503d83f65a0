"""Matching every taxonomy fingerprint against log lines in one pass per line.

All fingerprints RE2 can compile go into one ``re2.Set`` (a single linear-time scan per
line reports every matching pattern); the few that need Python-only syntax (look-arounds,
back-references) are searched with :mod:`re`, after a cheap literal pre-check.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import re2

from denpex_ml.logs.bundle import LogLine
from denpex_ml.logs.patterns import required_literals
from denpex_ml.taxonomy import UNKNOWN_ID, Fingerprint, FingerprintKind, FingerprintRole, Taxonomy

__all__ = ["ROLE_FEATURES", "FingerprintHit", "FingerprintMatcher", "outside_taxonomy"]

#: Per-entry feature columns, in order.
ROLE_FEATURES = ("root_cause", "root_cause_n", "symptom", "context")
# anchors, or look-arounds that could see a neighbouring line's newline
_LINE_SENSITIVE = re.compile(r"(?<!\\)[$^]|\\[AZzn]|\(\?[a-z]*[ms]|\(\?<?[=!][^)]*(?:\\[sWDS]|\[\^)")
_PY_ONLY = re.compile(r"\(\?<?[=!]|\\[1-9]|\(\?P=|\*\+|\+\+|\?\+")


def _add_to_set(rset: Any, kind: FingerprintKind, pattern: str, ignore_case: bool = False) -> int:
    """Add ``pattern`` to the RE2 set ``rset``: its index there, or -1 when only Python's ``re``
    reads it right (look-arounds, back-references, possessive quantifiers) or RE2 refuses it."""
    text = re2.escape(pattern) if kind is FingerprintKind.LITERAL else pattern
    if ignore_case:
        text = f"(?i:{text})"
    if kind is not FingerprintKind.LITERAL and _PY_ONLY.search(pattern):
        return -1
    try:
        return int(rset.Add(text))
    except Exception:  # RE2 refuses some Python syntax; the caller falls back to re
        return -1


@dataclass(frozen=True)
class FingerprintHit:
    """A fingerprint of ``entry_id`` matched ``line``."""

    entry_id: str
    fingerprint: Fingerprint
    line: LogLine

    @property
    def role(self) -> FingerprintRole:
        return self.fingerprint.role

    @property
    def weight(self) -> float:
        return self.fingerprint.weight


class FingerprintMatcher:
    """All fingerprints of a taxonomy, compiled once.

    >>> from denpex_ml.taxonomy import load_taxonomy
    >>> m = FingerprintMatcher(load_taxonomy())
    >>> sorted({m.entry_of(i) for i in m.match_text("torch.OutOfMemoryError: CUDA out of memory.")})
    ['cuda-oom']
    """

    def __init__(self, taxonomy: Taxonomy) -> None:
        self.labels: list[str] = taxonomy.label_ids
        self._label_index = {label: i for i, label in enumerate(self.labels)}
        # The ``unknown`` entry's fingerprints name failures known to lie outside the taxonomy
        # (a cloud refusing capacity, a scheduler refusing a job): their hits are evidence of a
        # failure, and the model abstains on them, but they are no feature of any class.
        self.fingerprints: list[tuple[str, Fingerprint]] = [
            (entry.id, fp) for entry in taxonomy for fp in entry.fingerprints
        ]
        opts = re2.Options()
        opts.log_errors = False
        # room for the sets' DFA: with RE2's default 8 MiB the 400-pattern set's DFA keeps running
        # out of its cache and starting again (same answers, about half the speed)
        opts.max_mem = 32 << 20
        self._set = re2.Set.SearchSet(opts)
        self._set_ids: list[int] = []
        self._python: list[tuple[int, re.Pattern[str]]] = []
        self._python_per_line: list[tuple[int, re.Pattern[str]]] = []  # not safe to pre-test on joined text
        for i, (_, fp) in enumerate(self.fingerprints):
            if _add_to_set(self._set, fp.kind, fp.pattern, fp.ignore_case) >= 0:
                self._set_ids.append(i)
            else:
                self._python.append((i, fp.regex))
                if _LINE_SENSITIVE.search(fp.pattern):
                    self._python_per_line.append((i, fp.regex))
        self._set.Compile()
        self._set_match = self._set._set.Match  # the set itself, on UTF-8 bytes
        #: per Python-only pattern, literals one of which each of its matches holds (None: unknown)
        self._python_literals = [required_literals(rx) for _, rx in self._python]
        # normal messages that read like errors (``Entry.benign``): no fingerprint fires on them
        self._benign_set: Any = None
        self._benign_python: list[re.Pattern[str]] = []
        benign = [b for entry in taxonomy for b in entry.benign]
        if benign:
            self._benign_set = re2.Set.SearchSet(opts)
            for b in benign:
                if _add_to_set(self._benign_set, b.kind, b.pattern) < 0:
                    self._benign_python.append(
                        re.compile(b.pattern if b.kind is FingerprintKind.REGEX else re.escape(b.pattern))
                    )
            self._benign_set.Compile()
            self._benign_match = self._benign_set._set.Match

    @property
    def n_features(self) -> int:
        return len(self.labels) * len(ROLE_FEATURES)

    def entry_of(self, index: int) -> str:
        return self.fingerprints[index][0]

    def match_text(self, text: str, python: Sequence[tuple[int, re.Pattern[str]]] | None = None) -> list[int]:
        """Indices (into :attr:`fingerprints`) of every fingerprint found in one line (none on a
        benign line, see :meth:`is_benign`).

        ``python``: the Python-only patterns to try (default all; :meth:`scan` passes those
        found somewhere in the job's text).
        """
        # the sets' own Match, on the line encoded once (what re2's wrapper does, per call)
        data = text.encode("utf-8")
        ids = self._set_ids
        found = [ids[j] for j in self._set_match(data)]
        for i, rx in self._python if python is None else python:
            if rx.search(text):
                found.append(i)
        if not found:
            return found
        if self._benign_set is None:
            return found
        if self._benign_match(data) or any(rx.search(text) for rx in self._benign_python):
            return []
        return found

    def is_benign(self, text: str) -> bool:
        """Whether ``text`` is a normal message that reads like an error (an entry's ``benign``
        list, e.g. NCCL falling back to its internal network plugin): it is evidence of nothing."""
        if self._benign_set is None:
            return False
        return bool(self._benign_set.Match(text)) or any(rx.search(text) for rx in self._benign_python)

    def scan(self, lines: Iterable[LogLine]) -> list[FingerprintHit]:
        """Hits over many lines; identical texts are matched once."""
        lines = list(lines)
        cache: dict[str, list[int]] = {}
        # Python-only patterns (no anchors, no newlines) are tried per line only when they
        # match somewhere in the job's text: one search instead of one per line.
        joined = "\n".join(dict.fromkeys(line.text for line in lines))
        python = self._python_per_line + [
            (i, rx)
            for (i, rx), lits in zip(self._python, self._python_literals, strict=True)
            if (i, rx) not in self._python_per_line
            and (lits is None or any(lit in joined for lit in lits))  # text without them cannot match
            and rx.search(joined)
        ]
        hits: list[FingerprintHit] = []
        for line in lines:
            idx = cache.get(line.text)
            if idx is None:
                idx = cache[line.text] = self.match_text(line.text, python)
            for i in idx:
                entry_id, fp = self.fingerprints[i]
                hits.append(FingerprintHit(entry_id, fp, line))
        return hits

    def features(self, hits: Sequence[FingerprintHit]) -> np.ndarray:
        """Per entry: strongest root-cause weight, number of distinct root-cause
        fingerprints (log-scaled), strongest symptom and strongest context weight."""
        out = np.zeros((len(self.labels), len(ROLE_FEATURES)), dtype=np.float32)
        seen: set[tuple[str, str]] = set()
        for h in hits:
            row = self._label_index.get(h.entry_id, -1)
            if row < 0:  # an ``unknown`` fingerprint: no class column
                continue
            if h.role is FingerprintRole.ROOT_CAUSE:
                out[row, 0] = max(out[row, 0], h.weight)
                key = (h.entry_id, h.fingerprint.pattern)
                if key not in seen:
                    seen.add(key)
                    out[row, 1] += 1.0
            elif h.role is FingerprintRole.SYMPTOM:
                out[row, 2] = max(out[row, 2], h.weight)
            else:
                out[row, 3] = max(out[row, 3], h.weight)
        out[:, 1] = np.log1p(out[:, 1])
        return out.reshape(-1)

    def rule_scores(self, hits: Sequence[FingerprintHit]) -> np.ndarray:
        """A transparent per-entry score: root-cause weight + 0.3 x (symptom + context)."""
        f = self.features(hits).reshape(len(self.labels), len(ROLE_FEATURES))
        return np.asarray(f[:, 0] + 0.1 * f[:, 1] + 0.3 * (f[:, 2] + f[:, 3]))


def outside_taxonomy(hits: Sequence[FingerprintHit]) -> FingerprintHit | None:
    """The strongest root-cause hit of the ``unknown`` entry (a failure known to lie outside the
    taxonomy) when it outweighs every other entry's root-cause hits, else ``None``.

    >>> from denpex_ml.taxonomy import load_taxonomy
    >>> m = FingerprintMatcher(load_taxonomy())
    >>> line = "Failed Reason: CapacityError: Unable to provision requested ML compute capacity."
    >>> hit = outside_taxonomy(m.scan([LogLine(0, "job.log", 1, line)]))
    >>> hit.entry_id if hit else None
    'unknown'
    """
    outside = [h for h in hits if h.entry_id == UNKNOWN_ID and h.role is FingerprintRole.ROOT_CAUSE]
    if not outside:
        return None
    best = max(outside, key=lambda h: h.weight)
    rival = max(
        (h.weight for h in hits if h.entry_id != UNKNOWN_ID and h.role is FingerprintRole.ROOT_CAUSE), default=0.0
    )
    return best if best.weight > rival else None
