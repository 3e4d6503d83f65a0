"""Section d) of ``python -m bench``: the same classification work done by peer methods (the baselines).

On the same medium and large ``bench.gen_log`` jobs as the classify section, and on synthetic
jobs from :mod:`denpex_ml.synthetic` (the test stream of ``make_splits``), each method runs in
a fresh process (``python -m bench.peers --worker METHOD JOBS``): it sets itself up once
(``setup_s``), then classifies every job, timing each with ``time.perf_counter``. Methods:

``denpex_ml``
    ``load_model()`` then ``model.classify(job)`` (ingestion included), as users call it.
``tfidf``
    :class:`denpex_ml.baselines.TfidfBaseline` (TF-IDF word 1-2 grams + logistic regression
    over the retained, masked lines); setup = generating, ingesting and fitting on a
    synthetic *train* split; per job = ``read_logs`` + ``bundle_text`` + ``predict_proba``.
``rule``
    :class:`denpex_ml.baselines.RuleBaseline` (taxonomy fingerprint regexes only); setup =
    loading the taxonomy and compiling the matcher; per job = ``read_logs`` + rule scores
    (no evidence -> ``unknown``).
``naive-minilm``
    The obvious pipeline without denpex_ml's template selection: stream every non-empty raw
    line, embed each with all-MiniLM-L6-v2 (``ENCODERS["minilm:all-MiniLM-L6-v2"]``, no
    cache), mean-pool, nearest taxonomy entry by cosine similarity to the entry's
    ``text_for_search()`` embedding. Only the first ``--naive-lines`` lines of a job are
    embedded; the embedding time is extrapolated linearly to all lines (reading all lines is
    measured, not extrapolated) and the prediction uses the embedded lines only.

Standalone (synthetic jobs only): ``python -m bench.peers [--synthetic-jobs N]`` writes
``<out>/baselines.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import REPO, progress, run_json_worker

__all__ = [
    "METHODS",
    "JobSet",
    "aggregate",
    "markdown_table",
    "run_baselines",
    "write_synthetic_jobs",
]

#: method names in report order; ``denpex_ml`` is the reference of the ratio column
METHODS = ("denpex_ml", "tfidf", "rule", "naive-minilm")
NAIVE_BATCH = 512  # lines per encode call of the naive pipeline (the encoder batches by 64 inside)


@dataclass(frozen=True)
class JobSet:
    """A set of jobs every method classifies: one log file, or a JSONL of synthetic incidents."""

    name: str
    spec: Path
    n_jobs: int
    description: str


# -- the measured child -------------------------------------------------------------------------
def _load_jobs(spec: str, limit: int | None) -> list[tuple[str, Any, str | None]]:
    """(id, source, true label): a log file is one job with an unknown label."""
    if spec.endswith(".jsonl"):
        jobs = []
        with open(spec, encoding="utf-8") as fh:
            for line in fh:
                rec = json.loads(line)
                jobs.append((str(rec["id"]), rec.get("logs") or rec["log"], str(rec["label"])))
                if limit is not None and len(jobs) >= limit:
                    break
        return jobs
    return [(Path(spec).name, Path(spec), None)]


def _read(source: Any) -> Any:
    from denpex_ml.logs import read_logs

    return read_logs(text=source) if isinstance(source, str) else read_logs(source)


def _raw_lines(source: Any) -> Iterator[str]:
    """Every raw line of a job (per-rank texts in name order), newline stripped."""
    if isinstance(source, Path):
        with open(source, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                yield line.rstrip("\n")
    elif isinstance(source, dict):
        for key in sorted(source):
            yield from str(source[key]).splitlines()
    else:
        yield from str(source).splitlines()


def _setup(method: str, args: argparse.Namespace) -> tuple[Callable[[Any], dict[str, Any]], dict[str, Any]]:
    """Build the per-job function of a method; returns it and setup facts."""
    if method == "denpex_ml":
        from denpex_ml.model.core import load_model

        model = load_model()

        def run_denpex(source: Any) -> dict[str, Any]:
            d = model.classify(text=source) if isinstance(source, str) else model.classify(source)
            return {"label": d.label}

        return run_denpex, {"encoder": model.encoder.name, "embedding_calls": lambda: model.encoder.calls}

    from denpex_ml.features.fingerprints import FingerprintMatcher
    from denpex_ml.taxonomy import UNKNOWN_ID, load_taxonomy

    taxonomy = load_taxonomy()
    matcher = FingerprintMatcher(taxonomy)
    labels = list(matcher.labels)

    if method == "rule":
        from denpex_ml.baselines import RuleBaseline

        rule = RuleBaseline(matcher)

        def run_rule(source: Any) -> dict[str, Any]:
            s = rule.scores([_read(source)])[0]
            return {"label": labels[int(s.argmax())] if s.sum() > 0 else UNKNOWN_ID}

        return run_rule, {}

    if method == "tfidf":
        import numpy as np

        from denpex_ml.baselines import TfidfBaseline, bundle_text
        from denpex_ml.synthetic import make_splits

        index = {lab: i for i, lab in enumerate(labels)}
        train = make_splits(args.tfidf_per_class, 0, 0, seed=args.seed, taxonomy=taxonomy)["train"]
        texts, y = [], []
        for rec in train:
            if rec["label"] in index:  # as denpex-ml eval: fitted on known labels only
                texts.append(bundle_text(_read(rec.get("logs") or rec["log"])))
                y.append(index[rec["label"]])
        tfidf = TfidfBaseline(labels).fit(texts, np.asarray(y))

        def run_tfidf(source: Any) -> dict[str, Any]:
            p = tfidf.predict_proba([bundle_text(_read(source))])[0]
            return {"label": labels[int(p.argmax())]}

        return run_tfidf, {"train_jobs": len(texts)}

    if method == "naive-minilm":
        import numpy as np

        from denpex_ml.embedding import ENCODERS
        from denpex_ml.model.persistence import models_root

        encoder = ENCODERS["minilm:all-MiniLM-L6-v2"](models_root())
        entries = encoder.encode([taxonomy.get(lab).text_for_search() for lab in labels])  # also warms it up
        cap = args.naive_lines

        def run_naive(source: Any) -> dict[str, Any]:
            t0 = time.perf_counter()
            first: list[str] = []
            n = 0
            for line in _raw_lines(source):
                if line.strip():
                    n += 1
                    if len(first) < cap:
                        first.append(line)
            t_read = time.perf_counter() - t0
            t0 = time.perf_counter()
            acc = np.zeros(encoder.dim, dtype=np.float64)
            for i in range(0, len(first), NAIVE_BATCH):
                acc += encoder.encode(first[i : i + NAIVE_BATCH]).sum(axis=0)
            t_embed = time.perf_counter() - t0
            t0 = time.perf_counter()
            pooled = acc / max(1, len(first))
            pooled /= max(float(np.linalg.norm(pooled)), 1e-12)
            label = labels[int((entries @ pooled).argmax())]
            t_rest = time.perf_counter() - t0
            factor = n / len(first) if first else 1.0
            return {
                "label": label,
                "lines": n,
                "embedded_lines": len(first),
                "read_s": t_read,
                "embed_s": t_embed,
                "measured_s": t_read + t_embed + t_rest,
                "seconds": t_read + t_embed * factor + t_rest,  # embedding extrapolated to every line
            }

        return run_naive, {"encoder": encoder.name, "cap_lines": cap}

    raise ValueError(f"unknown method {method!r}; known: {', '.join(METHODS)}")


def _worker(args: argparse.Namespace) -> int:
    method, spec = args.worker
    jobs = _load_jobs(spec, args.limit)
    t0 = time.perf_counter()
    run, facts = _setup(method, args)
    setup_s = time.perf_counter() - t0
    calls = facts.pop("embedding_calls", None)
    calls0 = calls() if calls else None
    out = []
    for job_id, source, true in jobs:
        t0 = time.perf_counter()
        res = run(source)
        wall = time.perf_counter() - t0
        res.setdefault("seconds", wall)  # naive-minilm reports its extrapolated time itself
        res["wall_s"] = wall
        res.update({"id": job_id, "true": true})
        out.append(res)
    if calls is not None:
        facts["embedding_calls"] = calls() - calls0
    print(json.dumps({"method": method, "setup_s": setup_s, "facts": facts, "jobs": out}))
    return 0


# -- orchestration -------------------------------------------------------------------------------
def write_synthetic_jobs(path: Path, n: int, seed: int) -> int:
    """The first ``n`` jobs of the synthetic *test* stream (all labels, index-major) as JSONL."""
    from denpex_ml.synthetic import make_splits, write_jsonl

    per_class = 1
    while True:
        recs = make_splits(0, 0, per_class, seed=seed)["test"]
        if len(recs) >= n:
            break
        per_class = max(per_class + 1, math.ceil(per_class * n / max(1, len(recs))))
    return write_jsonl(recs[:n], path)


def aggregate(jobset: JobSet, method: str, runs: list[dict[str, Any]], reference: list[float] | None) -> dict[str, Any]:
    """One table row from a method's runs on a job set.

    ``reference`` are denpex_ml's per-job seconds on the same jobs (same order); the ratio
    compares means over the jobs this method did (a prefix of the set for a capped naive run).
    """
    n = len(runs[0]["jobs"])
    per_job = [statistics.median(float(r["jobs"][i]["seconds"]) for r in runs) for i in range(n)]
    s_per_job = sum(per_job) / n if n else float("nan")
    ref = sum(reference[:n]) / n if reference and n else None
    first = runs[0]["jobs"]
    known = [j for j in first if j.get("true") is not None]
    acc = sum(j["label"] == j["true"] for j in known) / len(known) if known else None
    row: dict[str, Any] = {
        "jobset": jobset.name,
        "jobset_description": jobset.description,
        "method": method,
        "jobs": n,
        "jobs_in_set": jobset.n_jobs,
        "runs": len(runs),
        "setup_s": statistics.median(float(r["setup_s"]) for r in runs),
        "s_per_job": s_per_job,
        "total_s": sum(per_job),
        "ratio": s_per_job / ref if ref else None,
        "peak_rss_mb": max(float(r["peak_rss_mb"]) for r in runs),
        "accuracy": acc,
        "label": first[0]["label"] if n == 1 else None,
        "facts": runs[0].get("facts", {}),
        "per_job_s": per_job,
        "note": "",
    }
    notes = []
    if n < jobset.n_jobs:
        notes.append(f"first {n} of {jobset.n_jobs} jobs")
    if method == "naive-minilm":
        lines = sum(int(j["lines"]) for j in first)
        embedded = sum(int(j["embedded_lines"]) for j in first)
        row.update(lines=lines, embedded_lines=embedded)
        row["measured_s_per_job"] = (
            sum(statistics.median(float(r["jobs"][i]["measured_s"]) for r in runs) for i in range(n)) / n
        )
        if embedded < lines:
            cap = row["facts"].get("cap_lines")
            notes.append(
                f"embedded the first {cap:,} lines per job ({embedded:,} of {lines:,}); embedding time "
                f"x{lines / max(1, embedded):.1f} extrapolated linearly, measured {row['measured_s_per_job']:.2f} s/job"
            )
        else:
            notes.append(f"all {lines:,} lines embedded")
    if method == "denpex_ml" and "embedding_calls" in row["facts"]:
        notes.append(f"{row['facts']['embedding_calls']:,} embedding calls in all")
    if method == "tfidf" and "train_jobs" in row["facts"]:
        notes.append(f"fitted on {row['facts']['train_jobs']} synthetic train jobs (in setup s)")
    row["note"] = "; ".join(notes)
    return row


def run_baselines(
    jobsets: list[JobSet],
    *,
    repeat: int,
    naive_repeat: int,
    naive_lines: int,
    naive_jobs: int | None,
    tfidf_per_class: int,
    seed: int,
    methods: tuple[str, ...] = METHODS,
    log: Callable[[str], None] = lambda m: progress("baselines", m),
) -> list[dict[str, Any]]:
    """Every method on every job set; rows in job-set then method order."""
    rows = []
    for js in jobsets:
        reference: list[float] | None = None
        for method in methods:
            n_runs = naive_repeat if method == "naive-minilm" else repeat
            argv = [
                "bench.peers",
                "--worker",
                method,
                str(js.spec.resolve()),
                "--naive-lines",
                str(naive_lines),
                "--tfidf-per-class",
                str(tfidf_per_class),
                "--seed",
                str(seed),
            ]
            if method == "naive-minilm" and naive_jobs is not None and naive_jobs < js.n_jobs:
                argv += ["--limit", str(naive_jobs)]
            runs = []
            for i in range(n_runs):
                log(f"{js.name}: {method} run {i + 1}/{n_runs}")
                try:
                    runs.append(run_json_worker(argv))
                except RuntimeError as exc:
                    log(f"{js.name}: {method} FAILED: {exc}")
                    break
            if not runs:
                rows.append({"jobset": js.name, "method": method, "error": "worker failed (see progress log)"})
                continue
            row = aggregate(js, method, runs, reference)
            if method == "denpex_ml":
                reference = row["per_job_s"]
            log(f"{js.name}: {method}: {row['s_per_job']:.4f} s/job, setup {row['setup_s']:.1f}s")
            rows.append(row)
    return rows


def _fmt(x: float | None, spec: str = ".3f", none: str = "—") -> str:
    return none if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def _secs(x: float | None) -> str:
    """Seconds with 3 significant digits (per-job times range from 0.001 s to minutes)."""
    if x is None or math.isnan(x):
        return "—"
    return f"{x:.3g}" if x < 100 else f"{x:,.0f}"


def _ratio(x: float | None) -> str:
    if not x:
        return "—"
    return f"{x:.2f}x" if x < 10 else f"{x:,.0f}x"


def markdown_table(rows: list[dict[str, Any]]) -> str:
    md = [
        "| job set | method | jobs | setup s | s/job | × denpex_ml | peak RSS MB | result | note |",
        "|---|---|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in rows:
        if "error" in r:
            md.append(f"| {r['jobset']} | {r['method']} | — | — | — | — | — | {r['error']} | |")
            continue
        if r["accuracy"] is not None:
            result = f"top-1 acc {r['accuracy']:.2f}"
        else:
            result = str(r["label"]) if r["label"] is not None else "—"
        ratio = "1 (ref)" if r["method"] == "denpex_ml" else _ratio(r["ratio"])
        md.append(
            f"| {r['jobset']} | {r['method']} | {r['jobs']} | {_secs(r['setup_s'])} | {_secs(r['s_per_job'])} | "
            f"{ratio} | {_fmt(r['peak_rss_mb'], '.0f')} | {result} | {r['note']} |"
        )
    return "\n".join(md)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.peers", description=__doc__.splitlines()[0])
    ap.add_argument("--worker", nargs=2, metavar=("METHOD", "JOBS"), help=argparse.SUPPRESS)
    ap.add_argument("--limit", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--naive-lines", type=int, default=20_000)
    ap.add_argument("--tfidf-per-class", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--synthetic-jobs", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "out")
    args = ap.parse_args(argv)
    if args.worker:
        return _worker(args)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="denpex-bench-") as tmp:
        spec = Path(tmp) / "synthetic.jsonl"
        n = write_synthetic_jobs(spec, args.synthetic_jobs, args.seed)
        js = JobSet("synthetic", spec, n, f"{n} synthetic jobs (test stream, seed {args.seed})")
        rows = run_baselines(
            [js],
            repeat=args.repeat,
            naive_repeat=1,
            naive_lines=args.naive_lines,
            naive_jobs=None,
            tfidf_per_class=args.tfidf_per_class,
            seed=args.seed,
        )
    table = markdown_table(rows)
    (args.out / "baselines.json").write_text(json.dumps(rows, indent=2, default=str) + "\n")
    (args.out / "baselines.md").write_text(table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
