"""Ingestion benchmark: throughput and peak memory of ``denpex_ml.logs.read_logs``.

For each size a deterministic interleaved 64-rank torchrun log is generated once (and cached
in ``<out>/cache``), then ``read_logs(path)`` runs ``--repeat`` times, each in a fresh
subprocess whose peak RSS is taken from ``os.wait4``. ``grep -c .`` over the same file is the
reference for how fast those bytes can be scanned at all.

    python -m bench.ingest                       # 10M and 200M, 3 runs each
    python -m bench.ingest --sizes 10M,200M,1G --repeat 3 --out bench/out
    python -m bench.ingest --sizes 20M --rank-files   # one job of per-rank files instead

Writes ``<out>/ingest.json`` and ``<out>/ingest.md`` and prints the markdown table;
progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.common import MB, REPO, machine_info
from bench.gen_log import GENERATOR_VERSION, culprit_rank, parse_size, write_interleaved_log

__all__ = ["main", "run_grep_once", "run_ingest_once"]


def _progress(msg: str) -> None:
    print(f"[bench.ingest {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# -- the measured child ---------------------------------------------------------------------
def _worker(path: str) -> int:
    """Run in a fresh interpreter: import, time one ``read_logs(path)``, print JSON on stdout."""
    import resource

    t0 = time.perf_counter()
    from denpex_ml.logs import read_logs

    t_import = time.perf_counter() - t0
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    t0 = time.perf_counter()
    bundle = read_logs(path)
    wall = time.perf_counter() - t0
    ru = resource.getrusage(resource.RUSAGE_SELF)
    root = bundle.launcher.root_cause if bundle.launcher else None
    json.dump(
        {
            "wall_s": wall,
            "import_s": t_import,
            "cpu_s": ru.ru_utime + ru.ru_stime,
            "rss_after_import_kib": rss_before,
            "n_lines": bundle.n_lines,
            "n_bytes": bundle.n_bytes,
            "n_ranks": len(bundle.ranks),
            "n_streams": len(bundle.streams),
            "n_retained": sum(len(s.lines) for s in bundle.streams.values()),
            "formats": dict(bundle.formats),
            "masked": bundle.masked,
            "root_cause_rank": root.rank if root else None,
        },
        sys.stdout,
    )
    return 0


def run_ingest_once(path: Path) -> dict[str, object]:
    """One ``read_logs(path)`` in a fresh subprocess; adds its peak RSS (from ``wait4``)."""
    env = dict(os.environ, PYTHONHASHSEED="0")
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "bench.ingest", "--worker", str(path)], cwd=REPO, stdout=out, env=env
        )
        _, status, rusage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            raise RuntimeError(f"ingest worker on {path} failed with exit code {proc.returncode}")
        out.seek(0)
        result: dict[str, object] = json.loads(out.read())
    result["peak_rss_mb"] = rusage.ru_maxrss * 1024 / MB
    result["rss_after_import_mb"] = int(result.pop("rss_after_import_kib")) * 1024 / MB  # type: ignore[call-overload]
    return result


def run_grep_once(path: Path) -> dict[str, float]:
    """Wall time of ``LC_ALL=C grep -c . path`` (the speed limit of scanning the bytes once); a
    directory: ``grep -c . FILE ...`` over its files."""
    env = dict(os.environ, LC_ALL="C")
    files = sorted(str(f) for f in path.iterdir() if f.is_file()) if path.is_dir() else [str(path)]
    t0 = time.perf_counter()
    done = subprocess.run(["grep", "-c", ".", *files], capture_output=True, env=env, check=True)
    wall = time.perf_counter() - t0
    count = sum(int(line.rsplit(b":", 1)[-1]) for line in done.stdout.splitlines() if line.strip())
    return {"wall_s": wall, "count": count}


# -- orchestration -------------------------------------------------------------------------------
def _log_for(size: int, cache: Path | None, tmp: Path, ranks: int, seed: int) -> Path:
    name = f"interleaved-{size}B-r{ranks}-s{seed}-v{GENERATOR_VERSION}.log"
    if cache is not None:
        path = cache / name
        if path.exists():
            _progress(f"reusing cached {path}")
            return path
        cache.mkdir(parents=True, exist_ok=True)
    else:
        path = tmp / name
    partial = path.with_suffix(".log.tmp")
    _progress(f"generating {_human(size)} log -> {path}")
    t0 = time.perf_counter()
    write_interleaved_log(partial, size, ranks, seed)
    partial.replace(path)  # only complete logs are ever reused
    _progress(f"  generated in {time.perf_counter() - t0:.1f}s")
    return path


def _warm_page_cache(path: Path) -> None:
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


def _human(n: int) -> str:
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return f"{n}B"


def _rank_files_job(size: int, cache: Path | None, tmp: Path, seed: int) -> Path:
    """One job of per-rank files (``worker-N.log``, NCCL debug lines throughout) of ~``size`` bytes,
    as the batch benchmark generates them (:func:`bench.batch.write_batch_jobs`)."""
    from bench.batch import write_batch_jobs

    root, _ = write_batch_jobs(cache or tmp, 1, size, _human(size), seed=seed, log=_progress)
    return next(p for p in sorted(root.iterdir()) if p.is_dir())


def bench_size(
    size: int, *, repeat: int, cache: Path | None, tmp: Path, ranks: int, seed: int, rank_files: bool = False
) -> dict[str, object]:
    path = _rank_files_job(size, cache, tmp, seed) if rank_files else _log_for(size, cache, tmp, ranks, seed)
    files = sorted(f for f in path.iterdir() if f.is_file()) if path.is_dir() else [path]
    n_bytes = sum(f.stat().st_size for f in files)
    for f in files:
        _warm_page_cache(f)
    grep_runs = [run_grep_once(path) for _ in range(repeat)]
    grep_wall = statistics.median(r["wall_s"] for r in grep_runs)
    _progress(f"{_human(size)}: grep -c . median {grep_wall:.3f}s ({n_bytes / MB / grep_wall:.0f} MB/s)")
    runs = []
    for i in range(repeat):
        r = run_ingest_once(path)
        runs.append(r)
        _progress(
            f"{_human(size)}: read_logs run {i + 1}/{repeat}: {r['wall_s']:.2f}s "
            f"({n_bytes / MB / r['wall_s']:.1f} MB/s), peak RSS {r['peak_rss_mb']:.0f} MB"
        )  # type: ignore[operator]
    wall = statistics.median(float(r["wall_s"]) for r in runs)  # type: ignore[arg-type]
    rss = statistics.median(float(r["peak_rss_mb"]) for r in runs)  # type: ignore[arg-type]
    n_lines = int(runs[0]["n_lines"])  # type: ignore[call-overload]
    expected_culprit = None if rank_files else culprit_rank(ranks, seed)
    if not rank_files and runs[0]["root_cause_rank"] != expected_culprit:
        _progress(
            f"WARNING: launcher root cause rank {runs[0]['root_cause_rank']} != generated culprit {expected_culprit}"
        )
    return {
        "size": _human(size) + (f" in {len(files)} rank files" if rank_files else ""),
        "size_bytes": n_bytes,
        "path": str(path),
        "lines": n_lines,
        "grep_count": grep_runs[0]["count"],
        "ingest_wall_s": wall,
        "ingest_mb_s": n_bytes / MB / wall,
        "lines_per_s": n_lines / wall,
        "peak_rss_mb": rss,
        "peak_rss_mb_max": max(float(r["peak_rss_mb"]) for r in runs),  # type: ignore[arg-type]
        "rss_after_import_mb": statistics.median(float(r["rss_after_import_mb"]) for r in runs),  # type: ignore[arg-type]
        "grep_wall_s": grep_wall,
        "grep_mb_s": n_bytes / MB / grep_wall,
        "grep_over_ingest": (n_bytes / MB / grep_wall) / (n_bytes / MB / wall),
        "expected_root_cause_rank": expected_culprit,
        "runs": runs,
        "grep_runs": grep_runs,
    }


def markdown_table(results: list[dict[str, object]]) -> str:
    rows = [
        "| size | MB/s | lines/s | peak RSS MB | grep -c MB/s | ratio (grep/ingest) |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        rows.append(
            f"| {r['size']} | {r['ingest_mb_s']:.1f} | {r['lines_per_s']:,.0f} | {r['peak_rss_mb']:.0f} | "
            f"{r['grep_mb_s']:.0f} | {r['grep_over_ingest']:.0f}x |"
        )
    return "\n".join(rows)


def _parse_sizes(text: str) -> list[int]:
    return [parse_size(s) for s in text.split(",") if s.strip()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.ingest", description=__doc__.splitlines()[0])
    ap.add_argument(
        "--sizes", default="10M,200M", help="comma-separated uncompressed sizes (binary units), e.g. 10M,200M,1G"
    )
    ap.add_argument("--repeat", type=int, default=3, help="runs per size; medians are reported")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "out")
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-cache", action="store_true", help="generate logs in a temp dir instead of <out>/cache")
    ap.add_argument(
        "--rank-files",
        action="store_true",
        help="one job of per-rank files (NCCL debug lines throughout) per size instead of one interleaved log",
    )
    ap.add_argument("--worker", metavar="PATH", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return _worker(args.worker)
    if args.repeat < 1:
        ap.error(f"--repeat must be >= 1, got {args.repeat}")
    try:
        sizes = _parse_sizes(args.sizes)
    except ValueError as exc:
        ap.error(str(exc))
    args.out.mkdir(parents=True, exist_ok=True)
    info = machine_info()
    _progress(f"machine: {info['cpu_model']}, {info['cpu_count']} cores, Python {info['python']}")
    results = []
    with tempfile.TemporaryDirectory(prefix="denpex-bench-") as tmp:
        cache = None if args.no_cache else args.out / "cache"
        for size in sizes:
            results.append(
                bench_size(
                    size,
                    repeat=args.repeat,
                    cache=cache,
                    tmp=Path(tmp),
                    ranks=args.ranks,
                    seed=args.seed,
                    rank_files=args.rank_files,
                )
            )
    table = markdown_table(results)
    report = {
        "benchmark": "ingest",
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "params": {
            "sizes": args.sizes,
            "repeat": args.repeat,
            "ranks": args.ranks,
            "seed": args.seed,
            "generator_version": GENERATOR_VERSION,
            "mb": MB,
        },
        "machine": info,
        "results": results,
    }
    (args.out / "ingest.json").write_text(json.dumps(report, indent=2) + "\n")
    git = info["git"]
    header = (
        f"# Ingestion benchmark\n\n{report['created']} · commit {git['commit']}"  # type: ignore[index]
        f"{' (src dirty)' if git['src_dirty'] else ''} · {info['cpu_model']} · "  # type: ignore[index]
        f"{info['cpu_count']} cores · Python {info['python']} · {args.repeat} runs per size, medians\n\n"
    )
    (args.out / "ingest.md").write_text(header + table + "\n")
    _progress(f"wrote {args.out / 'ingest.json'} and {args.out / 'ingest.md'}")
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
