"""Shared helpers of ``python -m bench``: progress lines, fresh-process workers, machine notes."""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

__all__ = ["MB", "REPO", "machine_info", "machine_notes", "median", "progress", "run_json_worker"]

MB = 1_000_000  # every MB in the reports is decimal (10^6 bytes)
REPO = Path(__file__).resolve().parent.parent

#: distribution name of every version in the machine notes
_DISTRIBUTIONS = {
    "denpex_ml": "denpex-ml",
    "numpy": "numpy",
    "torch": "torch",
    "sentence-transformers": "sentence-transformers",
    "scikit-learn": "scikit-learn",
    "model2vec": "model2vec",
    "google-re2": "google-re2",
    "psutil": "psutil",
    "ray": "ray",
    "matplotlib": "matplotlib",
}


def progress(section: str, msg: str) -> None:
    """One progress line on stderr: ``[bench HH:MM:SS] section: msg``."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {section}: {msg}", file=sys.stderr, flush=True)


def median(values: Iterable[float]) -> float:
    return float(statistics.median(list(values)))


def run_json_worker(argv: Sequence[str], *, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``python -m <argv>`` in a fresh interpreter (cwd: the repo root).

    The worker prints one JSON object as its last stdout line; this adds ``peak_rss_mb``,
    the process's peak resident set from ``os.wait4`` in decimal MB.
    """
    full_env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONHASHSEED": "0", **(env or {})}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, "-m", *argv], cwd=REPO, stdout=out, stderr=err, env=full_env)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        text = out.read().decode(errors="replace")
        if proc.returncode != 0:
            tail = err.read().decode(errors="replace")[-2000:]
            raise RuntimeError(f"worker {' '.join(argv)} failed with exit code {proc.returncode}:\n{tail}")
    lines = text.strip().splitlines()
    if not lines:
        raise RuntimeError(f"worker {' '.join(argv)} printed nothing")
    result: dict[str, Any] = json.loads(lines[-1])
    result["peak_rss_mb"] = usage.ru_maxrss * 1024 / MB
    return result


def _version(dist: str) -> str | None:
    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def _mem_total_gb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) * 1024 / 1e9, 1)
    except OSError:
        pass
    return None


def _git_info() -> dict[str, object]:
    def git(*args: str) -> str | None:
        try:
            return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return None

    status = git("status", "--porcelain", "--", "src")
    return {"commit": git("rev-parse", "HEAD"), "src_dirty": bool(status) if status is not None else None}


def machine_info() -> dict[str, object]:
    """Cores, CPU model, Python and library versions, git commit."""
    model = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions: dict[str, str | None] = {}
    for mod in ("numpy", "re2", "psutil"):
        try:
            from importlib.metadata import version

            versions[mod] = version({"re2": "google-re2"}.get(mod, mod))
        except Exception:
            versions[mod] = None
    try:
        from importlib.metadata import version

        versions["denpex_ml"] = version("denpex_ml")
    except Exception:
        versions["denpex_ml"] = None
    return {
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_model": model,
        "mem_total_gb": _mem_total_gb(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "python_impl": platform.python_implementation(),
        "versions": versions,
        "git": _git_info(),
    }


def machine_notes() -> dict[str, Any]:
    """``machine_info()`` plus the versions of everything the benchmark times."""
    info = machine_info()
    info["versions"] = {name: _version(dist) for name, dist in _DISTRIBUTIONS.items()}
    return info
