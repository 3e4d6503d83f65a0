"""Benchmark of ``classify``: model load time, latency per job size, peak memory.

    python -m bench.classify [--sizes 50K:2,5M:64,200M:64] [--repeat 3] [--out bench/out]

Each measurement runs in a fresh Python process (so load time includes imports and peak RSS
belongs to that job alone); figures are medians over ``--repeat`` runs. Jobs are the
deterministic interleaved torchrun logs of :mod:`bench.gen_log` (one CUDA OOM on one rank,
watchdog timeouts on others, realistic noise), cached under ``<out>/cache``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.gen_log import culprit_rank, parse_size, write_interleaved_log
from bench.ingest import machine_info


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


def _run_with_rss(path: str) -> dict[str, object]:
    """One classify in a fresh process; its own peak RSS comes from ``os.wait4``."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.classify", "--worker", path],
        stdout=subprocess.PIPE,
        text=True,
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
    result["peak_rss_mb"] = usage.ru_maxrss / 1024
    return result


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
        size, ranks = parse_size(size_text), int(ranks_text)
        path = cache / f"classify-{size_text}-{ranks}r.log"
        if not path.exists():
            print(f"generating {path} ...", file=sys.stderr)
            write_interleaved_log(path, size, ranks=ranks, seed=0)
        runs = []
        for i in range(args.repeat):
            print(f"{size_text} x{ranks} ranks: run {i + 1}/{args.repeat}", file=sys.stderr)
            runs.append(_run_with_rss(str(path)))
        row = {
            "size": size_text,
            "ranks": ranks,
            "bytes": path.stat().st_size,
            "load_s": statistics.median(float(r["load_s"]) for r in runs),  # type: ignore[arg-type]
            "classify_s": statistics.median(float(r["classify_s"]) for r in runs),  # type: ignore[arg-type]
            "peak_rss_mb": max(float(r["peak_rss_mb"]) for r in runs),  # type: ignore[arg-type]
            "embedding_calls": runs[0]["embedding_calls"],
            "templates": runs[0]["templates"],
            "label": runs[0]["label"],
            "initiating_rank": runs[0]["initiating_rank"],
            "true_initiating_rank": culprit_rank(ranks, 0),
            "runs": runs,
        }
        rows.append(row)
    md = [
        "| job | ranks | load s | classify s | MB/s | peak RSS MB | embedding calls | label | first rank (true) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        mbs = r["bytes"] / 1e6 / r["classify_s"]  # type: ignore[operator]
        md.append(
            f"| {r['size']} | {r['ranks']} | {r['load_s']:.2f} | {r['classify_s']:.2f} | {mbs:.1f} | {r['peak_rss_mb']:.0f} | "
            f"{r['embedding_calls']} | {r['label']} | {r['initiating_rank']} ({r['true_initiating_rank']}) |"
        )
    table = "\n".join(md)
    (args.out / "classify.md").write_text(table + "\n")
    (args.out / "classify.json").write_text(
        json.dumps({"machine": machine_info(), "results": rows}, indent=2, default=str) + "\n"
    )
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
