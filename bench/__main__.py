"""One benchmark run of denpex_ml: ingestion, classify latency and scaling, batch scoring, baselines, retraining.

    python -m bench                       # everything, full sizes, 3 runs each (long: see bench/README.md)
    python -m bench --quick               # small sizes, 1 run (~7 min on 2 cores)
    python -m bench --only ingest,classify --repeat 5

Writes ``<out>/bench.json`` (every run), ``<out>/bench.md`` (the tables) and
``<out>/scaling.png``; progress goes to stderr, the markdown report to stdout. Both files are
rewritten after each section, so an interrupted run keeps what it measured.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import batch, classify, ingest, peers, report, retrain
from bench.common import REPO, machine_notes, progress
from bench.gen_log import GENERATOR_VERSION, parse_size

#: defaults of a full run and of ``--quick`` (an explicit option wins over both)
FULL: dict[str, Any] = {
    "sizes": "10M,100M,1G",
    "classify_jobs": "small=50K:2,medium=5M:64,large=200M:512",
    "scale_sizes": "1M,5M,20M,50M,200M",
    "scale_size_ranks": 64,
    "scale_ranks": "2,8,64,256,512",
    "scale_ranks_size": "20M",
    "batch_jobs": 1000,
    "batch_job_size": "1M",
    "repeat": 3,
    "synthetic_jobs": 200,
    "naive_lines": 20_000,
    "naive_jobs": None,
    "tfidf_per_class": 10,
}
QUICK: dict[str, Any] = {
    **FULL,
    "sizes": "10M",
    "classify_jobs": "small=50K:2,medium=5M:64",
    "scale_sizes": "1M,5M,10M",
    "scale_ranks": "2,8,64",
    "scale_ranks_size": "1M",
    "batch_jobs": 100,
    "repeat": 1,
    "naive_lines": 500,
    "naive_jobs": 5,
    "tfidf_per_class": 4,
}


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m bench",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Defaults in [full | --quick] form; see bench/README.md for every column.",
    )

    def opt(name: str, help_: str, type_: Any = str, target: Any = ap) -> None:
        key = name.lstrip("-").replace("-", "_")
        target.add_argument(name, type=type_, default=None, help=f"{help_} [{FULL[key]} | {QUICK[key]}]")

    ap.add_argument("--quick", action="store_true", help="small sizes and 1 run: a check that everything works")
    ap.add_argument(
        "--only", default=",".join(report.SECTIONS), help=f"comma-separated sections of {','.join(report.SECTIONS)}"
    )
    opt("--repeat", "runs per measurement; medians are reported", int)
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "out", help="output folder [bench/out]")
    ap.add_argument("--seed", type=int, default=0, help="seed of the synthetic jobs [0]")
    g = ap.add_argument_group("a) ingestion")
    opt("--sizes", "ingest log sizes, binary units", target=g)
    g = ap.add_argument_group("b) classify")
    opt("--classify-jobs", "NAME=SIZE:RANKS,... (medium and large are reused by the baselines)", target=g)
    opt("--scale-sizes", "sizes of the time-vs-size curve", target=g)
    opt("--scale-size-ranks", "ranks of the time-vs-size curve", int, target=g)
    opt("--scale-ranks", "rank counts of the time-vs-ranks curve", target=g)
    opt("--scale-ranks-size", "size of the time-vs-ranks curve", target=g)
    g = ap.add_argument_group("c) batch")
    opt("--batch-jobs", "jobs in the batch", int, target=g)
    opt("--batch-job-size", "approximate size of each job", target=g)
    g.add_argument("--batch-workers", default="1,2", help="local worker counts; Ray local uses the largest [1,2]")
    g.add_argument("--batch-timeout", type=float, default=3600.0, help="seconds before a score run is stopped [3600]")
    g = ap.add_argument_group("d) baselines")
    opt("--synthetic-jobs", "synthetic jobs every method classifies", int, target=g)
    opt("--naive-lines", "lines per job the naive MiniLM pipeline embeds (the rest is extrapolated)", int, target=g)
    opt("--naive-jobs", "synthetic jobs the naive MiniLM pipeline does (None: all)", int, target=g)
    g.add_argument("--naive-repeat", type=int, default=1, help="runs of the naive MiniLM pipeline (slow) [1]")
    opt("--tfidf-per-class", "synthetic train jobs per class the TF-IDF baseline is fitted on", int, target=g)
    return ap


def _resolve(args: argparse.Namespace) -> dict[str, Any]:
    base = QUICK if args.quick else FULL
    params = {k: (getattr(args, k) if getattr(args, k) is not None else v) for k, v in base.items()}
    params.update(
        quick=args.quick,
        seed=args.seed,
        batch_workers=args.batch_workers,
        batch_timeout=args.batch_timeout,
        naive_repeat=args.naive_repeat,
        generator_version=GENERATOR_VERSION,
        batch_version=batch.BATCH_VERSION,
    )
    return params


def _job_specs(text: str) -> list[tuple[str, str, int]]:
    """``small=50K:2,medium=5M:64`` -> [(name, size text, ranks)]."""
    out = []
    for i, item in enumerate(s.strip() for s in text.split(",") if s.strip()):
        name, _, spec = item.rpartition("=")
        size, _, ranks = spec.partition(":")
        parse_size(size)
        out.append((name or f"job{i + 1}", size, int(ranks or 64)))
    return out


# -- sections -----------------------------------------------------------------------------------
def run_ingest(p: dict[str, Any], out: Path) -> dict[str, Any]:
    results = []
    with tempfile.TemporaryDirectory(prefix="denpex-bench-") as tmp:
        for text in (s for s in p["sizes"].split(",") if s.strip()):
            progress("ingest", f"{text}")
            results.append(
                ingest.bench_size(
                    parse_size(text), repeat=p["repeat"], cache=out / "cache", tmp=Path(tmp), ranks=64, seed=0
                )
            )
    return {"results": results, "ranks": 64}


def run_classify(p: dict[str, Any], out: Path) -> dict[str, Any]:
    cache = out / "cache"
    measured: dict[tuple[int, int], dict[str, Any]] = {}

    def measure(size_text: str, ranks: int) -> dict[str, Any]:
        key = (parse_size(size_text), ranks)
        if key not in measured:
            path = classify.job_log(cache, size_text, ranks)
            measured[key] = classify.bench_job(
                path, size_text, ranks, repeat=p["repeat"], progress=lambda m: progress("classify", m)
            )
        return measured[key]

    jobs = [{"name": n, "result": measure(s, r)} for n, s, r in _job_specs(p["classify_jobs"])]
    size_rows = [measure(s, p["scale_size_ranks"]) for s in p["scale_sizes"].split(",") if s.strip()]
    rank_rows = [measure(p["scale_ranks_size"], int(r)) for r in p["scale_ranks"].split(",") if r.strip()]
    size_rows.sort(key=lambda r: r["bytes"])
    rank_rows.sort(key=lambda r: r["ranks"])
    plot = report.plot_scaling(size_rows, rank_rows, out / "scaling.png")
    return {"jobs": jobs, "scale_size": size_rows, "scale_ranks": rank_rows, "plot": str(plot) if plot else None}


def run_batch(p: dict[str, Any], out: Path) -> dict[str, Any]:
    workers = [int(w) for w in str(p["batch_workers"]).split(",") if w.strip()]
    return batch.bench_batch(
        cache=out / "cache",
        n_jobs=p["batch_jobs"],
        size_bytes=parse_size(p["batch_job_size"]),
        size_text=p["batch_job_size"],
        workers=workers,
        repeat=p["repeat"],
        timeout_s=p["batch_timeout"],
    )


def run_baselines(p: dict[str, Any], out: Path) -> dict[str, Any]:
    cache = out / "cache"
    sets = []
    for name, size, ranks in _job_specs(p["classify_jobs"]):
        if name in ("medium", "large"):
            path = classify.job_log(cache, size, ranks)
            sets.append(peers.JobSet(name, path, 1, f"{size} log, {ranks} ranks (bench.gen_log, CUDA OOM)"))
    with tempfile.TemporaryDirectory(prefix="denpex-bench-") as tmp:
        spec = Path(tmp) / "synthetic.jsonl"
        n = peers.write_synthetic_jobs(spec, p["synthetic_jobs"], p["seed"])
        sets.append(
            peers.JobSet("synthetic", spec, n, f"{n} synthetic jobs (make_splits test stream, seed {p['seed']})")
        )
        rows = peers.run_baselines(
            sets,
            repeat=p["repeat"],
            naive_repeat=p["naive_repeat"],
            naive_lines=p["naive_lines"],
            naive_jobs=p["naive_jobs"],
            tfidf_per_class=p["tfidf_per_class"],
            seed=p["seed"],
        )
    return {"jobsets": [{"name": s.name, "jobs": s.n_jobs, "description": s.description} for s in sets], "rows": rows}


def run_retrain(p: dict[str, Any], out: Path) -> dict[str, Any]:
    return retrain.bench_retrain(repeat=p["repeat"], timeout_s=p["batch_timeout"])


RUNNERS = {
    "ingest": run_ingest,
    "classify": run_classify,
    "batch": run_batch,
    "baselines": run_baselines,
    "retrain": run_retrain,
}


def main(argv: list[str] | None = None) -> int:
    ap = _parser()
    args = ap.parse_args(argv)
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    bad = [s for s in only if s not in report.SECTIONS]
    if bad or not only:
        ap.error(f"--only: expected some of {','.join(report.SECTIONS)}, got {args.only!r}")
    p = _resolve(args)
    try:
        for key in ("sizes", "scale_sizes", "batch_job_size", "scale_ranks_size"):
            for s in str(p[key]).split(","):
                parse_size(s)
        _job_specs(p["classify_jobs"])
    except ValueError as exc:
        ap.error(str(exc))
    if p["repeat"] < 1:
        ap.error("--repeat must be >= 1")
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    info = machine_notes()
    progress("bench", f"{info['cpu_model']}, {info['cpu_count']} cores; sections {','.join(only)}")
    result: dict[str, Any] = {
        "benchmark": "denpex_ml",
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "params": p,
        "machine": info,
        "sections": {},
    }
    failed = False
    for key in report.SECTIONS:
        if key not in only:
            continue
        t0 = time.perf_counter()
        progress(key, "start")
        try:
            sec = RUNNERS[key](p, out)
        except Exception as exc:  # one broken section must not lose the others
            failed = True
            progress(key, f"FAILED: {exc!r}")
            sec = {"error": f"{type(exc).__name__}: {exc}"}
        sec["duration_s"] = time.perf_counter() - t0
        progress(key, f"done in {sec['duration_s']:.0f}s")
        result["sections"][key] = sec
        result["duration_s"] = time.perf_counter() - t_start
        _write(result, out)
    md = _write(result, out)
    progress("bench", f"wrote {out / 'bench.json'} and {out / 'bench.md'} in {result['duration_s']:.0f}s")
    print(md)
    return 1 if failed else 0


def _write(result: dict[str, Any], out: Path) -> str:
    (out / "bench.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    md = report.markdown_report(result)
    (out / "bench.md").write_text(md)
    return md


if __name__ == "__main__":
    sys.exit(main())
