"""Benchmark of ``classify``: model load time, latency per job size, peak memory.

    python -m bench.classify [--sizes 50K:2,5M:64,200M:64] [--repeat 3] [--out bench/out]

Each measurement runs in a fresh Python process (so load time includes imports and peak RSS
belongs to that job alone); figures are medians over ``--repeat`` runs. Jobs are the
deterministic interleaved torchrun logs of :mod:`bench.gen_log` (one CUDA OOM on one rank,
watchdog timeouts on others, realistic noise), cached under ``<out>/cache``.

The pieces are importable (``python -m bench`` uses them): :func:`job_log`,
:func:`run_classify_once`, :func:`bench_job`, :func:`markdown_table`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bench.common import machine_info
from bench.gen_log import culprit_rank, parse_size, write_interleaved_log

__all__ = ["bench_job", "job_log", "main", "markdown_table", "run_classify_once"]

MB = 1_000_000  # decimal megabytes, as in bench.ingest
REPO = Path(__file__).resolve().parent.parent


def _progress(msg: str) -> None:
    print(f"[bench.classify {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _worker(path: str) -> int:
    t0 = time.perf_counter()
    from denpex_ml.model.core import load_model

    model = load_model()
    t_load = time.perf_counter() - t0
    calls0 = model.encoder.calls
    t1 = time.perf_counter()
    d = model.classify(path) if path != "-" else model.classify(text="[rank0]: ok\n")
    t_job = time.perf_counter() - t1
    print(
        json.dumps(
            {
                "load_s": t_load,
                "classify_s": t_job,
                "label": d.label,
                "initiating_rank": d.initiating_rank,
                "embedding_calls": model.encoder.calls - calls0,
                "lines": d.stats.get("lines"),
                "templates": d.stats.get("selected_templates"),
            }
        )
    )
    return 0


def run_classify_once(path: str | os.PathLike[str]) -> dict[str, object]:
    """One load + classify in a fresh process; its own peak RSS (decimal MB) comes from ``os.wait4``."""
    arg = str(path) if str(path) == "-" else str(Path(path).resolve())  # the worker runs in the repo root
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.classify", "--worker", arg],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert proc.stdout is not None
    out = proc.stdout.read()
    proc.stdout.close()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"classify worker failed on {path} (exit {proc.returncode})")
    result: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    result["peak_rss_mb"] = usage.ru_maxrss * 1024 / MB
    return result


_run_with_rss = run_classify_once  # the old private name


def job_log(cache: Path, size_text: str, ranks: int) -> Path:
    """The cached ``bench.gen_log`` log of ``size_text`` bytes and ``ranks`` ranks (seed 0), made once."""
    path = cache / f"classify-{size_text}-{ranks}r.log"
    if not path.exists():
        cache.mkdir(parents=True, exist_ok=True)
        _progress(f"generating {path} ...")
        partial = path.with_suffix(".log.tmp")
        write_interleaved_log(partial, parse_size(size_text), ranks=ranks, seed=0)
        partial.replace(path)  # only complete logs are ever reused
    return path


def bench_job(
    path: Path,
    size_text: str,
    ranks: int,
    *,
    repeat: int,
    progress: Callable[[str], None] = _progress,
) -> dict[str, object]:
    """``repeat`` fresh-process runs of one job; medians of the times, max of the peak RSS."""
    runs = []
    for i in range(repeat):
        progress(f"{size_text} x{ranks} ranks: run {i + 1}/{repeat}")
        runs.append(run_classify_once(path))
    n_bytes = path.stat().st_size
    classify_s = statistics.median(float(r["classify_s"]) for r in runs)  # type: ignore[arg-type]
    return {
        "size": size_text,
        "ranks": ranks,
        "bytes": n_bytes,
        "path": str(path),
        "load_s": statistics.median(float(r["load_s"]) for r in runs),  # type: ignore[arg-type]
        "classify_s": classify_s,
        "mb_s": n_bytes / MB / classify_s if classify_s > 0 else None,
        "peak_rss_mb": max(float(r["peak_rss_mb"]) for r in runs),  # type: ignore[arg-type]
        "embedding_calls": runs[0]["embedding_calls"],
        "templates": runs[0]["templates"],
        "lines": runs[0]["lines"],
        "label": runs[0]["label"],
        "initiating_rank": runs[0]["initiating_rank"],
        "true_initiating_rank": culprit_rank(ranks, 0),
        "runs": runs,
    }


def markdown_table(rows: list[dict[str, object]], *, names: list[str] | None = None) -> str:
    """The classify table; ``names`` (e.g. small/medium/large) add a first column."""
    head = "| job | ranks | load s | classify s | MB/s | peak RSS MB | embedding calls | label | first rank (true) |"
    sep = "|---|---|---|---|---|---|---|---|---|"
    if names is not None:
        head, sep = "| name " + head, "|---" + sep
    md = [head, sep]
    for i, r in enumerate(rows):
        mbs = r["bytes"] / MB / r["classify_s"]  # type: ignore[operator]
        first = f"| {names[i]} " if names is not None else ""
        md.append(
            f"{first}| {r['size']} | {r['ranks']} | {r['load_s']:.2f} | {r['classify_s']:.2f} | {mbs:.1f} | "
            f"{r['peak_rss_mb']:.0f} | {r['embedding_calls']} | {r['label']} | "
            f"{r['initiating_rank']} ({r['true_initiating_rank']}) |"
        )
    return "\n".join(md)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="50K:2,5M:64,200M:64", help="SIZE:RANKS,... (default 50K:2,5M:64,200M:64)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("bench/out"))
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return _worker(args.worker)
    cache = args.out / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    rows = []
    specs = [s.split(":") for s in args.sizes.split(",")]
    for size_text, ranks_text in sorted(specs, key=lambda s: parse_size(s[0])):
        ranks = int(ranks_text)
        rows.append(bench_job(job_log(cache, size_text, ranks), size_text, ranks, repeat=args.repeat))
    table = markdown_table(rows)
    (args.out / "classify.md").write_text(table + "\n")
    (args.out / "classify.json").write_text(
        json.dumps({"machine": machine_info(), "results": rows}, indent=2, default=str) + "\n"
    )
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
