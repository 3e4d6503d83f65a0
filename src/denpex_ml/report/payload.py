"""The job rows as one compact JSON blob that the report's script pages, filters and sorts.

Layout (kept in step with ``templates/report.js``): ``rows`` is a list of arrays, one per job,
with the fields at the positions of :data:`FIELDS`; every repeated string (labels, phases,
evidence lines, reasons, error messages, node names) is stored once in ``strings`` and referred
to by index. Evidence is cut to a per-job character budget that shrinks as the archive grows
(:func:`evidence_budget`), so a 100k-job report stays small; the results file keeps it all.

The blob is embedded as JSON text with ``<``, ``>`` and ``&`` escaped (it can never close its
``<script>`` element), or, when large, gzip-compressed and base64-encoded (the page inflates it
with the browser's ``DecompressionStream``).
"""

from __future__ import annotations

import base64
import gzip
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from denpex_ml.report.rows import job_nodes, job_time
from denpex_ml.taxonomy import Taxonomy

__all__ = ["FIELDS", "Blob", "encode_blob", "evidence_budget", "make_payload"]

#: Positions of a job's fields in its row array.
FIELDS = (
    "job",
    "error",  # 0 ok, 1 error row
    "label",  # index into strings (-1: none)
    "confidence",
    "rank",
    "phase",  # index into strings (-1: none)
    "ranks",
    "seconds",
    "mb",
    "alternatives",  # [[label index, probability], ...]
    "reason",  # index into strings (-1: none)
    "evidence",  # [[rank or null, source index, line, text index, why index], ...]
    "error_type",  # index into strings (-1: none)
    "error_message",  # index into strings (-1: none)
    "nodes",  # [string index, ...]
    "time",  # seconds since the epoch, or null
    "best_guess",  # index into strings (-1: none)
    "evidence_cut",  # evidence lines left out of the report
)
#: Evidence characters kept over the whole report, and per job at most.
EVIDENCE_TOTAL_CHARS = 20_000_000
EVIDENCE_JOB_CHARS = 3_200
EVIDENCE_LINE_CHARS = 400
EVIDENCE_MIN_CHARS = 60
ERROR_CHARS = 400


def evidence_budget(n_rows: int, total: int = EVIDENCE_TOTAL_CHARS) -> int:
    """Evidence characters kept per job: everything up to :data:`EVIDENCE_JOB_CHARS` for small
    archives, ``total / n_rows`` (never under :data:`EVIDENCE_MIN_CHARS`) for large ones."""
    if n_rows <= 0:
        return EVIDENCE_JOB_CHARS
    return max(EVIDENCE_MIN_CHARS, min(EVIDENCE_JOB_CHARS, total // n_rows))


class _Strings:
    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.items: list[str] = []

    def __call__(self, text: object) -> int:
        if text is None or text == "":
            return -1
        s = str(text)
        i = self.index.get(s)
        if i is None:
            i = self.index[s] = len(self.items)
            self.items.append(s)
        return i


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[: max(n - 1, 0)] + "…"


def _evidence(evidence: Sequence[dict[str, Any]], budget: int, strings: _Strings) -> tuple[list[list[Any]], int]:
    out: list[list[Any]] = []
    left = budget
    for ev in evidence:
        if out and left < 40:
            break
        text = _cut(str(ev.get("text") or ""), min(EVIDENCE_LINE_CHARS, max(left, 40)))
        left -= len(text)
        out.append([ev.get("rank"), strings(ev.get("source")), ev.get("line"), strings(text), strings(ev.get("why"))])
    return out, len(evidence) - len(out)


def _round(x: Any, places: int) -> float | None:
    if x is None:
        return None
    v = float(x)
    return round(v, places) if math.isfinite(v) else None


def make_payload(
    rows: Sequence[dict[str, Any]], taxonomy: Taxonomy | None, *, evidence_chars: int | None = None
) -> dict[str, Any]:
    """The report's data: job rows, the string table and the taxonomy text of the labels present."""
    strings = _Strings()
    budget = evidence_budget(len(rows)) if evidence_chars is None else evidence_chars
    out_rows: list[list[Any]] = []
    labels: set[str] = set()
    for r in rows:
        ok = r["status"] == "ok"
        if r.get("label"):
            labels.add(r["label"])
        evidence, cut = _evidence(r.get("evidence") or [], budget, strings) if budget > 0 else ([], 0)
        if budget <= 0:
            cut = len(r.get("evidence") or [])
        t = job_time(r)
        out_rows.append(
            [
                r["job_id"],
                0 if ok else 1,
                strings(r.get("label")),
                _round(r.get("confidence"), 3),
                r.get("initiating_rank"),
                strings(r.get("hang_phase")),
                r.get("ranks"),
                _round(r.get("seconds") or 0.0, 2),
                _round(r["bytes"] / 1e6, 2) if r.get("bytes") is not None else None,
                [[strings(a.get("label")), _round(a.get("probability"), 3)] for a in (r.get("alternatives") or [])[:4]],
                strings(r.get("initiating_reason")),
                evidence,
                strings(r.get("error_type")),
                strings(_cut(r["error"], ERROR_CHARS) if r.get("error") else None),
                [strings(n) for n in job_nodes(r)],
                None if t is None else int(t),
                strings(r.get("best_guess")),
                cut,
            ]
        )
    entries: dict[str, Any] = {}
    if taxonomy is not None:
        for label in sorted(labels):
            if label not in taxonomy:
                continue
            e = taxonomy.get(label)
            entries[label] = {
                "title": e.title,
                "root_cause": e.root_cause.strip(),
                "fix": [[f.step, list(f.commands)] for f in e.fix],
                "confirm": list(e.confirm),
            }
    return {
        "fields": list(FIELDS),
        "strings": strings.items,
        "rows": out_rows,
        "entries": entries,
        "evidence_chars": budget,
    }


@dataclass(frozen=True)
class Blob:
    """The encoded blob: its text (safe inside ``<script>``) and how it is encoded."""

    text: str
    encoding: str  # "json" or "gzip+base64"
    json_bytes: int


_ESCAPES = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026", 0x2028: "\\u2028", 0x2029: "\\u2029"}


def encode_blob(payload: dict[str, Any], *, compress_over: int = 1_000_000) -> Blob:
    """JSON of ``payload``, escaped for a ``<script type="application/json">`` element; gzip +
    base64 when the JSON is over ``compress_over`` bytes."""
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    raw = text.encode("utf-8", "backslashreplace")
    if len(raw) > compress_over:
        packed = base64.b64encode(gzip.compress(raw, compresslevel=3, mtime=0)).decode("ascii")
        return Blob(packed, "gzip+base64", len(raw))
    return Blob(raw.decode("utf-8").translate(_ESCAPES), "json", len(raw))
