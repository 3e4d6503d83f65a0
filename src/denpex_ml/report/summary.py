"""What a report says about a whole archive, computed once in Python (the page only draws it).

Memory and time are linear in the rows; nothing here depends on the page or on HTML.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from denpex_ml.report.rows import job_nodes, job_time
from denpex_ml.taxonomy import UNKNOWN_ID
from denpex_ml.taxonomy.groups import NO_FAILURE_ID

__all__ = ["ClassCount", "NodeCount", "Summary", "TimeBucket", "summarise"]

#: Confidence histogram bins (equal width over [0, 1]).
CONFIDENCE_BINS = 10
#: Rows of the "slowest jobs" and "nodes implicated" tables.
TOP = 10
#: Jobs listed as "likely outside the taxonomy": the out-of-taxonomy detector's probability at least this.
OUTSIDE_SHOWN = 0.3
#: A class is "new" when it first appears in this many seconds before the latest job time.
NEW_WINDOW_S = 7 * 86400


@dataclass(frozen=True)
class ClassCount:
    label: str
    title: str
    jobs: int
    mean_confidence: float | None
    first_seen: float | None = None
    last_seen: float | None = None
    new: bool = False


@dataclass(frozen=True)
class NodeCount:
    node: str
    jobs: int
    labels: list[tuple[str, int]]
    examples: list[str]


@dataclass(frozen=True)
class TimeBucket:
    start: float
    label: str
    failures: int
    unknown: int
    no_failure: int
    errors: int

    @property
    def total(self) -> int:
        return self.failures + self.unknown + self.no_failure + self.errors


@dataclass
class Summary:
    """Aggregates of one archive: counts per class, rates, confidence histogram, time, nodes, slowest."""

    n: int = 0
    n_ok: int = 0
    classes: list[ClassCount] = field(default_factory=list)
    errors: list[tuple[str, int]] = field(default_factory=list)
    unknown: int = 0
    no_failure: int = 0
    confidence_hist: list[int] = field(default_factory=lambda: [0] * CONFIDENCE_BINS)
    mean_confidence: float | None = None
    time_buckets: list[TimeBucket] = field(default_factory=list)
    bucket_unit: str = ""
    nodes: list[NodeCount] = field(default_factory=list)
    has_nodes: bool = False
    slowest: list[dict[str, Any]] = field(default_factory=list)
    #: the jobs the out-of-taxonomy detector finds likeliest to be a failure no entry names
    #: (``outside_probability`` >= :data:`OUTSIDE_SHOWN`, likeliest first; candidates for a new entry)
    outside: list[dict[str, Any]] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    total_seconds: float = 0.0

    @property
    def n_errors(self) -> int:
        return self.n - self.n_ok

    def rate(self, count: int) -> float:
        return count / self.n if self.n else 0.0


def _buckets(times: list[tuple[float, dict[str, Any]]]) -> tuple[list[TimeBucket], str]:
    lo = min(t for t, _ in times)
    hi = max(t for t, _ in times)
    span_days = (hi - lo) / 86400
    unit = "hour" if span_days <= 2 else "day" if span_days <= 90 else "week"
    width = {"hour": 3600, "day": 86400, "week": 7 * 86400}[unit]
    start0 = lo - lo % width if unit != "week" else lo - (lo - 4 * 86400) % width  # weeks start on Monday
    counts: dict[int, list[int]] = {}
    for t, row in times:
        k = int((t - start0) // width)
        c = counts.setdefault(k, [0, 0, 0, 0])
        if row["status"] != "ok":
            c[3] += 1
        elif row["label"] == UNKNOWN_ID:
            c[1] += 1
        elif row["label"] == NO_FAILURE_ID:
            c[2] += 1
        else:
            c[0] += 1
    fmt = {"hour": "%Y-%m-%d %H:00", "day": "%Y-%m-%d", "week": "week of %Y-%m-%d"}[unit]
    out = []
    for k in range(0, max(counts) + 1):
        start = start0 + k * width
        c = counts.get(k, [0, 0, 0, 0])
        out.append(TimeBucket(start, datetime.fromtimestamp(start, UTC).strftime(fmt), *c))
    return out, unit


def summarise(rows: Sequence[dict[str, Any]], titles: dict[str, str] | None = None) -> Summary:
    """Aggregate result rows (dictionaries with the :class:`~denpex_ml.batch.results.JobResult` keys)."""
    s = Summary(n=len(rows))
    labels: Counter[str] = Counter()
    conf_sum: Counter[str] = Counter()
    conf_n: Counter[str] = Counter()
    first: dict[str, float] = {}
    last: dict[str, float] = {}
    errors: Counter[str] = Counter()
    node_jobs: Counter[str] = Counter()
    node_labels: dict[str, Counter[str]] = {}
    node_examples: dict[str, list[str]] = {}
    models: Counter[str] = Counter()
    times: list[tuple[float, dict[str, Any]]] = []
    title_of = dict(titles or {})
    total_conf = 0.0
    n_conf = 0
    for row in rows:
        s.total_seconds += float(row.get("seconds") or 0.0)
        if row.get("model"):
            models[row["model"]] += 1
        t = job_time(row)
        if t is not None:
            times.append((t, row))
        nodes = job_nodes(row)
        if nodes:
            s.has_nodes = True
        for node in nodes:
            node_jobs[node] += 1
            node_labels.setdefault(node, Counter())[row.get("label") or row.get("error_type") or "error"] += 1
            ex = node_examples.setdefault(node, [])
            if len(ex) < 5:
                ex.append(row["job_id"])
        if row["status"] != "ok":
            errors[row.get("error_type") or "error"] += 1
            continue
        s.n_ok += 1
        label = row["label"]
        labels[label] += 1
        if row.get("title") and label not in title_of:
            title_of[label] = row["title"]
        if t is not None:
            first[label] = min(first.get(label, t), t)
            last[label] = max(last.get(label, t), t)
        conf = row.get("confidence")
        if conf is not None:
            conf_sum[label] += conf
            conf_n[label] += 1
            total_conf += conf
            n_conf += 1
            s.confidence_hist[min(int(conf * CONFIDENCE_BINS), CONFIDENCE_BINS - 1)] += 1
    s.unknown = labels.get(UNKNOWN_ID, 0)
    s.no_failure = labels.get(NO_FAILURE_ID, 0)
    s.mean_confidence = total_conf / n_conf if n_conf else None
    latest = max((t for t, _ in times), default=None)
    s.classes = [
        ClassCount(
            label=label,
            title=title_of.get(label, label),
            jobs=n,
            mean_confidence=conf_sum[label] / conf_n[label] if conf_n[label] else None,
            first_seen=first.get(label),
            last_seen=last.get(label),
            new=latest is not None
            and label in first
            and first[label] > latest - NEW_WINDOW_S
            and min(t for t, _ in times) < latest - NEW_WINDOW_S,
        )
        for label, n in sorted(labels.items(), key=lambda kv: (-kv[1], kv[0]))
    ]
    s.errors = sorted(errors.items(), key=lambda kv: (-kv[1], kv[0]))
    if times:
        s.time_buckets, s.bucket_unit = _buckets(times)
    s.nodes = [
        NodeCount(node, n, node_labels[node].most_common(3), node_examples[node])
        for node, n in sorted(node_jobs.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP]
    ]
    slow = heapq.nlargest(TOP, range(len(rows)), key=lambda i: float(rows[i].get("seconds") or 0.0))
    s.slowest = [rows[i] for i in slow if rows[i].get("seconds")]
    out_p = [
        i for i, r in enumerate(rows) if r["status"] == "ok" and (r.get("outside_probability") or 0.0) >= OUTSIDE_SHOWN
    ]
    s.outside = [rows[i] for i in heapq.nlargest(TOP, out_p, key=lambda i: float(rows[i]["outside_probability"]))]
    s.models = [m for m, _ in models.most_common()]
    return s
