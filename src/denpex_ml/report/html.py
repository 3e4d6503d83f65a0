"""Build the self-contained HTML report of a scored archive.

One file, no network at view time: the styles, the script and the charts (inline SVG) are in
it, and the job rows are one JSON blob (:mod:`denpex_ml.report.payload`) that the script pages,
filters and sorts. Everything is aggregated here first (:mod:`denpex_ml.report.summary`), so a
100k-job archive still opens in seconds. Templates are Jinja2 with autoescaping on: every
string of a row is untrusted log text.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from denpex_ml.batch.results import JobResult
from denpex_ml.errors import DependencyMissingError, InvalidInputError, OutputPathError, OutputWriteError
from denpex_ml.report.charts import Bar, Stack, hbar_chart, stacked_columns, vbar_chart
from denpex_ml.report.payload import encode_blob, evidence_budget, make_payload
from denpex_ml.report.rows import normalise, read_rows
from denpex_ml.report.summary import Summary, summarise
from denpex_ml.taxonomy import Taxonomy, load_taxonomy

if TYPE_CHECKING:
    import jinja2

__all__ = ["MAX_BYTES", "ReportInfo", "build_report", "write_report"]

log = logging.getLogger(__name__)

#: The report file is kept under this size: evidence is cut further until it fits.
MAX_BYTES = 20_000_000
#: Job blobs larger than this are gzip-compressed inside the page.
COMPRESS_OVER = 1_000_000
#: Most classes drawn in the bar chart (the table lists them all).
CHART_CLASSES = 25


class _Normalised(list[dict[str, Any]]):
    """Rows :func:`~denpex_ml.report.rows.read_rows` already checked (not checked again)."""


@dataclass(frozen=True)
class ReportInfo:
    """What :func:`write_report` wrote."""

    path: Path
    jobs: int
    bytes: int
    dropped: int
    evidence_chars: int
    seconds: float


def template_text(name: str) -> str:
    """A static file of the report's templates (CSS, JS), read from the package."""
    return resources.files("denpex_ml.report").joinpath("templates", name).read_text(encoding="utf-8")


@lru_cache(maxsize=4)
def environment(package: str = "denpex_ml.report") -> jinja2.Environment:
    """A Jinja2 environment over ``package``'s ``templates`` folder (autoescape always on)."""
    try:
        import jinja2
    except ImportError:  # pragma: no cover - jinja2 comes with the report extra
        raise DependencyMissingError("the HTML report needs Jinja2: pip install 'denpex-ml[report]'") from None
    env = jinja2.Environment(
        loader=jinja2.PackageLoader(package, "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["when"] = lambda t: "" if t is None else datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M")
    return env


def _charts(s: Summary) -> dict[str, Any]:
    classes = s.classes[:CHART_CLASSES]
    class_chart = hbar_chart(
        [
            Bar(c.label, c.jobs, f"{c.title}: {c.jobs} jobs ({100 * c.jobs / max(s.n, 1):.1f}%)", key=c.label)
            for c in classes
        ]
    )
    conf_chart = vbar_chart(
        [
            Bar(f"{i * 10}%", n, f"confidence {i * 10}-{(i + 1) * 10}%: {n} jobs")
            for i, n in enumerate(s.confidence_hist)
        ]
    )
    time_chart = stacked_columns(
        [Stack(b.label, (b.failures, b.unknown, b.no_failure, b.errors)) for b in s.time_buckets]
    )
    return {"class_chart": class_chart, "confidence_chart": conf_chart, "time_chart": time_chart}


def _rows(rows: Iterable[JobResult | Mapping[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    if isinstance(rows, _Normalised):
        return rows, 0
    out: list[dict[str, Any]] = []
    dropped = 0
    for r in rows:
        d = normalise(r)
        if d is None:
            dropped += 1
        else:
            out.append(d)
    return out, dropped


def build_report(
    rows: Iterable[JobResult | Mapping[str, Any]],
    *,
    taxonomy: Taxonomy | None = None,
    title: str | None = None,
    source: str = "",
    dropped: int = 0,
    max_bytes: int = MAX_BYTES,
    compress_over: int = COMPRESS_OVER,
) -> str:
    """The HTML report of result rows, as one self-contained page.

    Parameters
    ----------
    rows:
        :class:`~denpex_ml.batch.results.JobResult` objects or dictionaries with their keys (as
        read from a results file), optionally with a time column and ``suspects``/``nodes``.
        Rows that are not result rows are skipped and counted.
    taxonomy:
        Where root causes, fixes and confirm steps come from (default: the bundled taxonomy).
    max_bytes:
        The page is kept under this size by cutting the evidence kept per job.

    Examples
    --------
    >>> from denpex_ml.batch.results import JobResult
    >>> page = build_report([JobResult("job-1", label="cuda-oom", title="CUDA OOM", confidence=0.97)])
    >>> page.startswith("<!DOCTYPE html>") and "job-1" in page
    True
    """
    return _build(
        rows,
        taxonomy=taxonomy,
        title=title,
        source=source,
        dropped=dropped,
        max_bytes=max_bytes,
        compress_over=compress_over,
    )[0]


def _build(
    rows: Iterable[JobResult | Mapping[str, Any]],
    *,
    taxonomy: Taxonomy | None,
    title: str | None,
    source: str,
    dropped: int,
    max_bytes: int,
    compress_over: int = COMPRESS_OVER,
) -> tuple[str, int]:
    """The page and the evidence characters per job it kept."""
    data, bad = _rows(rows)
    dropped += bad
    tax = taxonomy if taxonomy is not None else load_taxonomy()
    titles = {e.id: e.title for e in tax}
    s = summarise(data, titles)
    rates = [
        ("unknown", s.unknown, "bad" if s.unknown else ""),
        ("no failure", s.no_failure, ""),
        ("errors", s.n_errors, "bad" if s.n_errors else ""),
    ]
    from denpex_ml import __version__

    context: dict[str, Any] = {
        "title": title or f"denpex-ml report: {source or 'scored jobs'}",
        "source": source,
        "generated": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "version": __version__,
        "dropped": dropped,
        "s": s,
        "rates": rates,
        **_charts(s),
    }
    env = environment()
    from markupsafe import Markup

    context["css"] = Markup(template_text("base.css") + template_text("report.css"))
    context["js"] = Markup(template_text("report.js"))
    template = env.get_template("report.html.j2")
    budget = evidence_budget(len(data))
    longest = max((sum(len(str(e.get("text", ""))) for e in r["evidence"]) for r in data), default=0)
    while True:
        blob = encode_blob(make_payload(data, tax, evidence_chars=budget), compress_over=compress_over)
        full = budget >= longest
        note = "" if full else f"Evidence is cut to {budget} characters per job here; the results file has it all."
        page = template.render(**context, blob=blob, blob_text=Markup(blob.text), evidence_note=note)
        size = len(page.encode("utf-8", "backslashreplace"))
        if size <= max_bytes or budget == 0:
            break
        log.info("report of %d jobs is %d bytes with %d evidence characters per job; cutting", len(data), size, budget)
        budget = budget // 2 if budget > 40 else 0
    if size > max_bytes:
        log.warning("report of %d jobs is %.1f MB even without evidence", len(data), size / 1e6)
    return page, budget


def write_report(
    results: str | os.PathLike[str] | Iterable[JobResult | Mapping[str, Any]],
    out: str | os.PathLike[str],
    *,
    fmt: str | None = None,
    taxonomy_dirs: Sequence[str | os.PathLike[str]] = (),
    title: str | None = None,
    max_bytes: int = MAX_BYTES,
) -> ReportInfo:
    """Write the HTML report of a results file (``.jsonl``, ``.csv``, ``.parquet``) or of rows.

    Raises
    ------
    LogNotFoundError
        ``results`` is a path that does not exist.
    InvalidInputError
        No row of the results file is a result row, or its format is unknown.
    OutputPathError, OutputWriteError
        ``out`` is a directory or cannot be written.
    """
    t0 = time.perf_counter()
    target = Path(out)
    if target.is_dir():
        raise OutputPathError(f"{target}: is a directory; give the report's file name (e.g. {target}/report.html)")
    rows: Sequence[JobResult | Mapping[str, Any]]
    if isinstance(results, (str, os.PathLike)):
        read = read_rows(results, fmt)
        rows, source, dropped = _Normalised(read.rows), read.source, read.dropped
    elif isinstance(results, Iterable):
        rows, source, dropped = list(results), "", 0
    else:
        raise InvalidInputError(f"write_report: results must be a path or rows, got {type(results).__name__}")
    tax = load_taxonomy(taxonomy_dirs) if taxonomy_dirs else None
    page, budget = _build(rows, taxonomy=tax, title=title, source=source, dropped=dropped, max_bytes=max_bytes)
    data = page.encode("utf-8", "backslashreplace")
    tmp = target.with_name(target.name + ".tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data)
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise OutputWriteError(f"{target}: cannot write the report ({exc.strerror or exc})") from None
    return ReportInfo(target, len(rows), len(data), dropped, budget, time.perf_counter() - t0)
