"""Section e) of ``python -m bench``: retraining the shipped model with one new class and five incidents.

``denpex-ml retrain --base models/default --incidents tests/fixtures/new_class/train.jsonl
--taxonomy tests/fixtures/new_class/taxonomy --out DIR --no-track`` as a subprocess, first with
an empty feature cache (``DENPEX_CACHE`` pointing at a fresh directory: every job is read and
embedded, as on a new machine), then again with the cache it left (a later retrain). Wall time
around the process (start-up included) and its peak RSS (``os.wait4``); medians over
``--repeat`` pairs. The targets of issue #19 (90 s cold, 30 s warm) stand beside them.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.common import REPO, progress

__all__ = ["TARGETS_S", "bench_retrain", "markdown_table", "retrain_argv"]

#: seconds aimed at (issue #19)
TARGETS_S = {"cold cache": 90.0, "warm cache": 30.0}

FIXTURE = REPO / "tests" / "fixtures" / "new_class"


def retrain_argv(out: Path, cli: Sequence[str] | None = None) -> list[str]:
    """The retrain command line this section times."""
    base = list(cli) if cli is not None else [sys.executable, "-m", "denpex_ml"]
    return [
        *base,
        "retrain",
        "--base",
        str(REPO / "models" / "default"),
        "--incidents",
        str(FIXTURE / "train.jsonl"),
        "--taxonomy",
        str(FIXTURE / "taxonomy"),
        "--out",
        str(out),
        "--no-track",
    ]


def _run_once(argv: list[str], cache: Path, timeout_s: float) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    env.update(DENPEX_CACHE=str(cache), HF_HUB_OFFLINE="1")
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, cwd=REPO, env=env)
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid == proc.pid:
                break
            if time.perf_counter() - t0 > timeout_s:
                proc.kill()
                os.wait4(proc.pid, 0)
                return {"failed": f"timed out after {timeout_s:.0f} s"}
            time.sleep(0.2)
        wall = time.perf_counter() - t0
        rc = os.waitstatus_to_exitcode(status)
        proc.returncode = rc
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    if rc not in (0, 4):  # 4: the gate failed, the model was still written
        tail = (stderr.strip().splitlines() or ["no output"])[-1]
        return {"failed": f"exit code {rc}: {tail[:200]}"}
    # ru_maxrss is in KiB on Linux
    return {"wall_s": wall, "peak_mb": usage.ru_maxrss * 1024 / 1e6, "gate": "passed" if rc == 0 else "failed"}


def bench_retrain(
    *,
    repeat: int,
    timeout_s: float = 3600.0,
    cli: Sequence[str] | None = None,
    log: Callable[[str], None] = lambda m: progress("retrain", m),
) -> dict[str, Any]:
    """``repeat`` cold-then-warm pairs; ``rows`` hold medians per configuration."""
    runs: dict[str, list[dict[str, Any]]] = {"cold cache": [], "warm cache": []}
    for i in range(repeat):
        with tempfile.TemporaryDirectory(prefix="denpex-bench-retrain-") as tmp:
            cache = Path(tmp) / "cache"
            for j, name in enumerate(runs):
                log(f"{name}: run {i + 1}/{repeat}")
                r = _run_once(retrain_argv(Path(tmp) / f"model-{j}", cli), cache, timeout_s)
                runs[name].append(r)
                if "failed" in r:
                    break
    rows = []
    for name, rs in runs.items():
        ok = [r for r in rs if "failed" not in r]
        if not ok:
            rows.append({"config": name, "failed": rs[0]["failed"] if rs else "not run"})
            continue
        peaks = [r["peak_mb"] for r in ok if r.get("peak_mb") is not None]
        rows.append(
            {
                "config": name,
                "runs": len(ok),
                "wall_s": statistics.median(r["wall_s"] for r in ok),
                "peak_mb": max(peaks) if peaks else None,
                "target_s": TARGETS_S[name],
                "gate": ok[-1]["gate"],
            }
        )
    return {"command": " ".join(retrain_argv(Path("DIR"), ["denpex-ml"])), "rows": rows}


def markdown_table(rows: list[dict[str, Any]]) -> str:
    out = ["| retrain | runs | wall s | target s | peak RSS MB | gate |", "|---|---|---|---|---|---|"]
    for r in rows:
        if "failed" in r:
            out.append(f"| {r['config']} | — | failed: {r['failed']} | {TARGETS_S.get(r['config'], '—')} | — | — |")
            continue
        peak = "—" if r.get("peak_mb") is None else f"{r['peak_mb']:.0f}"
        out.append(f"| {r['config']} | {r['runs']} | {r['wall_s']:.1f} | {r['target_s']:.0f} | {peak} | {r['gate']} |")
    return "\n".join(out)
