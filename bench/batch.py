"""Section c) of ``python -m bench``: batch throughput of ``denpex-ml score``.

Job folders are generated once into ``<out>/cache/batch-<n>-<size>-v<version>/job-XXXX/``:
each is a synthetic per-rank-files incident from :mod:`denpex_ml.synthetic` (a few
``rankN.log`` files; labels rotate over the taxonomy) whose rank files are padded with
steady-state training noise from :func:`bench.gen_log.noise_lines` (inserted after each
file's leading NCCL init block) until the job holds about ``--batch-job-size`` bytes.
Labels and sizes go to the sibling ``batch-...json`` manifest, written last (a folder
without its manifest is incomplete and regenerated).

Each configuration runs ``denpex-ml score JOBS_DIR -o OUT.jsonl --workers N [--engine E]``
as a subprocess in its own session: wall time from ``time.perf_counter`` around the
process, jobs/s = jobs / wall; the process tree is polled with psutil every 0.2 s for RSS.
When the command does not exist (``denpex-ml score --help`` fails) every row says "not
available" and nothing is generated.

A last row is the many-small-jobs case: the first :data:`SMALL_REAL_JOBS` real logs of
``data/real/real-logs.jsonl`` (by id; a few KB each), one file per job, scored through the
same command with the largest worker count, start-up included: there the per-job overhead
(process start, model load, result writing) is the cost, not the bytes.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

from bench.common import MB, REPO, median, progress
from bench.gen_log import GENERATOR_VERSION, noise_lines

__all__ = [
    "BATCH_VERSION",
    "BatchConfig",
    "ScoreCommand",
    "TreeSample",
    "batch_configs",
    "bench_batch",
    "detect_score",
    "markdown_table",
    "pad_rank_files",
    "run_score_once",
    "write_batch_jobs",
    "write_small_real_jobs",
]

#: bump when the generated job folders change (with bench.gen_log.GENERATOR_VERSION in the name)
BATCH_VERSION = 1
POLL_S = 0.2
#: the many-small-jobs case: this many real logs, one file each (#19's "43 small real jobs")
SMALL_REAL_JOBS = 43
REAL_LOGS = REPO / "data" / "real" / "real-logs.jsonl"
_NCCL_HEAD = re.compile(r"NCCL (INFO|WARN)")


# -- job folders ---------------------------------------------------------------------------------
def pad_rank_files(files: dict[str, str], target_bytes: int, seed: int) -> dict[str, str]:
    """Pad per-rank texts with steady-state noise until they hold about ``target_bytes``.

    The i-th rank file (in name order; a launcher log is left alone) gets the noise lines of
    rank i, inserted after its leading block of NCCL init lines (at the top when there is
    none), so the failure stays at the end.
    """
    have = sum(len(t.encode()) for t in files.values())
    names = sorted(n for n in files if "launcher" not in n) or sorted(files)  # pad rank files, not the launcher's
    need = target_bytes - have
    if need <= 0 or not names:
        return dict(files)
    pads: list[list[str]] = [[] for _ in names]
    added = 0
    for rank, line in noise_lines(len(names), seed):
        pads[rank].append(line)
        added += len(line) + 1
        if added >= need:
            break
    out = dict(files)
    for name, pad in zip(names, pads, strict=True):
        lines = files[name].splitlines(keepends=True)
        cut = 0
        while cut < len(lines) and _NCCL_HEAD.search(lines[cut]):
            cut += 1
        head = "".join(lines[:cut])
        if head and not head.endswith("\n"):
            head += "\n"
        out[name] = head + "".join(ln + "\n" for ln in pad) + "".join(lines[cut:])
    return out


def batch_dir(cache: Path, n_jobs: int, size_text: str) -> Path:
    return cache / f"batch-{n_jobs}-{size_text}-v{GENERATOR_VERSION}.{BATCH_VERSION}"


def write_batch_jobs(
    cache: Path,
    n_jobs: int,
    size_bytes: int,
    size_text: str,
    *,
    seed: int = 0,
    log: Callable[[str], None] = lambda m: progress("batch", m),
) -> tuple[Path, dict[str, Any]]:
    """The job folders of ``n_jobs`` jobs of ~``size_bytes`` each, generated once; (dir, manifest)."""
    from denpex_ml.synthetic import iter_generate
    from denpex_ml.synthetic.generator import resolve_labels
    from denpex_ml.taxonomy import load_taxonomy

    root = batch_dir(cache, n_jobs, size_text)
    manifest_path = root.with_suffix(root.suffix + ".json")
    if root.is_dir() and manifest_path.is_file():
        log(f"reusing cached {root}")
        return root, json.loads(manifest_path.read_text())
    partial = root.with_name(root.name + ".tmp")
    if partial.exists():
        shutil.rmtree(partial)
    if root.exists():
        shutil.rmtree(root)
    partial.mkdir(parents=True)
    log(f"generating {n_jobs} jobs of ~{size_text} -> {root}")
    t0 = time.perf_counter()
    taxonomy = load_taxonomy()
    n_labels = len(resolve_labels(None, taxonomy, True))  # what iter_generate cycles through, index-major
    per_class = -(-n_jobs // n_labels)
    incidents = iter_generate(per_class, seed, launchers=["per-rank-files"], taxonomy=taxonomy)
    width = max(4, len(str(n_jobs - 1)))
    jobs = []
    total = 0
    for i, inc in enumerate(islice(incidents, n_jobs)):
        raw = dict(inc["logs"]) if "logs" in inc else {"job.log": inc["log"]}
        files = pad_rank_files(raw, size_bytes, seed * 1_000_003 + i)
        name = f"job-{i:0{width}d}"
        job = partial / name
        job.mkdir()
        n_bytes = 0
        for fname, text in files.items():
            data = text.encode()
            target = job / fname  # names like rank3.log or attempt_0/3/stderr.log
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            n_bytes += len(data)
        total += n_bytes
        jobs.append(
            {
                "job": name,
                "label": inc["label"],
                "initiating_rank": inc.get("initiating_rank"),
                "files": len(files),
                "bytes": n_bytes,
            }
        )
        if (i + 1) % 100 == 0:
            log(f"  {i + 1}/{n_jobs} jobs written")
    if len(jobs) < n_jobs:
        raise RuntimeError(f"synthetic generator gave {len(jobs)} jobs, {n_jobs} asked")
    partial.replace(root)
    manifest = {
        "n_jobs": n_jobs,
        "job_size": size_text,
        "job_size_bytes": size_bytes,
        "total_bytes": total,
        "seed": seed,
        "generator_version": GENERATOR_VERSION,
        "batch_version": BATCH_VERSION,
        "jobs": jobs,
    }
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")
    log(f"  generated {total / MB:.0f} MB in {time.perf_counter() - t0:.1f}s")
    return root, manifest


def write_small_real_jobs(cache: Path, n_jobs: int = SMALL_REAL_JOBS, source: Path = REAL_LOGS) -> tuple[Path, int]:
    """The first ``n_jobs`` real logs of ``source`` (sorted by id), one ``NNN.log`` file each, in a
    folder of ``cache`` written once; (folder, total bytes)."""
    records = sorted(
        (json.loads(line) for line in source.read_text(encoding="utf-8").splitlines() if line.strip()),
        key=lambda r: str(r["id"]),
    )[:n_jobs]
    if len(records) < n_jobs:
        raise RuntimeError(f"{source} holds {len(records)} logs, {n_jobs} asked")
    root = cache / f"small-real-{n_jobs}"
    texts = [r["log"] if r["log"].endswith("\n") else r["log"] + "\n" for r in records]
    if not root.is_dir() or len(list(root.iterdir())) != n_jobs:
        if root.exists():
            shutil.rmtree(root)
        root.mkdir(parents=True)
        for i, text in enumerate(texts):
            (root / f"{i:03d}.log").write_text(text, encoding="utf-8")
    return root, sum(len(t.encode()) for t in texts)


# -- the command ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class ScoreCommand:
    """Whether ``denpex-ml score`` exists here, and what it accepts."""

    available: bool
    argv: tuple[str, ...]
    engine_flag: bool = False
    reason: str = ""


def detect_score(cli: Sequence[str] | None = None) -> ScoreCommand:
    """Probe ``denpex-ml score --help`` (the CLI run by this interpreter)."""
    argv = tuple(cli) if cli is not None else (sys.executable, "-m", "denpex_ml")
    try:
        done = subprocess.run(
            [*argv, "score", "--help"], capture_output=True, text=True, timeout=120, cwd=REPO, env=_env()
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return ScoreCommand(False, argv, reason=f"not available: {exc}")
    if done.returncode != 0 or "usage" not in done.stdout.lower():
        msg = (done.stderr.strip().splitlines() or ["no usage text"])[-1]
        return ScoreCommand(False, argv, reason=f"not available: `denpex-ml score --help` failed ({msg[:160]})")
    return ScoreCommand(True, argv, engine_flag="--engine" in done.stdout)


@dataclass(frozen=True)
class BatchConfig:
    name: str
    workers: int
    engine: str | None  # None: the command's default (no --engine flag)


def batch_configs(workers: Sequence[int], score: ScoreCommand) -> tuple[list[BatchConfig], list[dict[str, Any]]]:
    """The local configurations plus Ray local; and "not available" rows for what cannot run."""
    configs: list[BatchConfig] = []
    skipped: list[dict[str, Any]] = []
    for w in workers:
        configs.append(BatchConfig(f"{w} worker{'s' if w > 1 else ''}", w, "local" if score.engine_flag else None))
    ray_workers = max(workers)
    ray_name = f"ray local, {ray_workers} worker{'s' if ray_workers > 1 else ''}"
    if not score.engine_flag:
        skipped.append({"config": ray_name, "skipped": "not available: `denpex-ml score` has no --engine option"})
    elif importlib.util.find_spec("ray") is None:
        skipped.append({"config": ray_name, "skipped": "not available: ray is not installed"})
    else:
        configs.append(BatchConfig(ray_name, ray_workers, "ray"))
    return configs, skipped


# -- one timed run -----------------------------------------------------------------------------------
@dataclass
class TreeSample:
    """RSS of a process tree, polled: peaks per process and of the sum."""

    root_pid: int
    peak_by_pid: dict[int, int] = field(default_factory=dict)  # bytes
    names: dict[int, str] = field(default_factory=dict)
    tree_peak: int = 0  # bytes, max over polls of the sum over live processes
    polls: int = 0

    def poll(self) -> None:
        import psutil

        try:
            root = psutil.Process(self.root_pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            return
        total = 0
        for p in procs:
            try:
                rss = p.memory_info().rss
                if p.pid not in self.names:
                    self.names[p.pid] = p.name()
            except psutil.Error:
                continue
            total += rss
            if rss > self.peak_by_pid.get(p.pid, 0):
                self.peak_by_pid[p.pid] = rss
        self.tree_peak = max(self.tree_peak, total)
        self.polls += 1

    def summary(self) -> dict[str, Any]:
        workers = {pid: rss for pid, rss in self.peak_by_pid.items() if pid != self.root_pid}
        main = self.peak_by_pid.get(self.root_pid, 0)
        top = max(workers.values()) if workers else main  # one in-process worker: the main process is it
        return {
            "main_peak_mb": main / MB,
            "max_worker_peak_mb": top / MB,
            "tree_peak_mb": self.tree_peak / MB,
            "processes": len(self.peak_by_pid),
            "child_processes": len(workers),
            "polls": self.polls,
        }


def _count_lines(path: Path) -> int:
    """Non-empty lines of the scorer's output (0 when it wrote none)."""
    if not path.exists():
        return 0
    with path.open(encoding="utf-8", errors="replace") as fh:
        return sum(1 for line in fh if line.strip())


def _env() -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1"}


def run_score_once(
    score: ScoreCommand, jobs_dir: Path, config: BatchConfig, n_jobs: int, *, timeout_s: float
) -> dict[str, Any]:
    """One ``denpex-ml score`` run, timed and polled; raises nothing (failures are in the dict)."""
    with tempfile.TemporaryDirectory(prefix="denpex-bench-score-") as tmp:
        out_path = Path(tmp) / "scores.jsonl"
        argv = [*score.argv, "score", str(jobs_dir), "-o", str(out_path), "--workers", str(config.workers)]
        if config.engine is not None:
            argv += ["--engine", config.engine]
        stdout_path, stderr_path = Path(tmp) / "stdout", Path(tmp) / "stderr"
        with open(stdout_path, "wb") as so, open(stderr_path, "wb") as se:
            t0 = time.perf_counter()
            proc = subprocess.Popen(argv, stdout=so, stderr=se, cwd=REPO, env=_env(), start_new_session=True)
            sample = TreeSample(proc.pid)
            timed_out = False
            while True:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid == proc.pid:
                    break
                sample.poll()
                if time.perf_counter() - t0 > timeout_s:
                    timed_out = True
                    os.killpg(proc.pid, signal.SIGTERM)  # our own session: the command and its workers
                    _, status, usage = os.wait4(proc.pid, 0)
                    break
                time.sleep(POLL_S)
            wall = time.perf_counter() - t0
        rc = os.waitstatus_to_exitcode(status)
        proc.returncode = rc
        scored = _count_lines(out_path)
        stdout = stdout_path.read_text(errors="replace")
        stderr = stderr_path.read_text(errors="replace")
    ok = rc == 0 and not timed_out
    return {
        "config": config.name,
        "argv": ["denpex-ml", *argv[3:]] if argv[1:3] == ["-m", "denpex_ml"] else argv,
        "ok": ok,
        "returncode": rc,
        "timed_out": timed_out,
        "wall_s": wall,
        "jobs": n_jobs,
        "scored_lines": scored,
        "jobs_per_s": n_jobs / wall if ok and wall > 0 else None,
        "wait4_peak_mb": usage.ru_maxrss * 1024 / MB,  # largest single process reaped in the tree
        **sample.summary(),
        "stdout_tail": stdout.strip().splitlines()[-15:],  # the command's summary
        "stderr_tail": stderr.strip().splitlines()[-15:],
    }


def bench_batch(
    *,
    cache: Path,
    n_jobs: int,
    size_bytes: int,
    size_text: str,
    workers: Sequence[int],
    repeat: int,
    timeout_s: float,
    score: ScoreCommand | None = None,
    log: Callable[[str], None] = lambda m: progress("batch", m),
) -> dict[str, Any]:
    """All configurations; ``rows`` hold medians (or a "skipped" reason)."""
    score = score or detect_score()
    if not score.available:
        log(score.reason)
        names = [f"{w} worker{'s' if w > 1 else ''}" for w in workers] + [f"ray local, {max(workers)} workers"]
        return {
            "available": False,
            "reason": score.reason,
            "rows": [{"config": n, "skipped": score.reason} for n in names],
        }
    jobs_dir, manifest = write_batch_jobs(cache, n_jobs, size_bytes, size_text)
    configs, skipped = batch_configs(workers, score)
    rows = [_timed_runs(score, jobs_dir, cfg, n_jobs, repeat, timeout_s, log) for cfg in configs]
    rows += skipped
    small_dir, small_bytes = write_small_real_jobs(cache)
    small = BatchConfig(
        f"{SMALL_REAL_JOBS} small real jobs, {max(workers)} workers",
        max(workers),
        "local" if score.engine_flag else None,
    )
    rows.append(
        {
            **_timed_runs(score, small_dir, small, SMALL_REAL_JOBS, repeat, timeout_s, log),
            "total_kb": small_bytes / 1000,
        }
    )
    return {
        "available": True,
        "jobs_dir": str(jobs_dir),
        "n_jobs": n_jobs,
        "job_size": size_text,
        "total_mb": manifest["total_bytes"] / MB,
        "rows": rows,
    }


def _timed_runs(
    score: ScoreCommand,
    jobs_dir: Path,
    cfg: BatchConfig,
    n_jobs: int,
    repeat: int,
    timeout_s: float,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """``repeat`` runs of one configuration (stopping at the first failure), aggregated."""
    runs = []
    for i in range(repeat):
        log(f"{cfg.name}: run {i + 1}/{repeat} ({n_jobs} jobs)")
        r = run_score_once(score, jobs_dir, cfg, n_jobs, timeout_s=timeout_s)
        runs.append(r)
        if not r["ok"]:
            log(f"{cfg.name}: FAILED (exit {r['returncode']}{', timed out' if r['timed_out'] else ''})")
            break
        log(f"{cfg.name}: {r['wall_s']:.1f}s, {r['jobs_per_s']:.2f} jobs/s, tree peak {r['tree_peak_mb']:.0f} MB")
    return aggregate_runs(cfg.name, runs)


def aggregate_runs(name: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    good = [r for r in runs if r["ok"]]
    if not good:
        last = runs[-1]
        why = "timed out" if last["timed_out"] else f"exit code {last['returncode']}"
        tail = [ln.strip() for ln in last.get("stderr_tail", []) if ln.strip()]
        if tail:
            why += f": {tail[-1][:160]}"
        return {"config": name, "failed": why, "runs": runs}
    return {
        "config": name,
        "jobs": good[0]["jobs"],
        "scored_lines": good[0]["scored_lines"],
        "wall_s": median(r["wall_s"] for r in good),
        "jobs_per_s": median(r["jobs_per_s"] for r in good),
        "max_worker_peak_mb": max(r["max_worker_peak_mb"] for r in good),
        "tree_peak_mb": max(r["tree_peak_mb"] for r in good),
        "main_peak_mb": max(r["main_peak_mb"] for r in good),
        "processes": max(r["processes"] for r in good),
        "runs": runs,
    }


def markdown_table(rows: list[dict[str, Any]]) -> str:
    md = [
        "| config | jobs | wall s | jobs/s | max worker RSS MB | tree RSS MB | processes | output lines |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        if "skipped" in r:
            md.append(f"| {r['config']} | — | — | — | — | — | — | {r['skipped']} |")
        elif "failed" in r:
            md.append(f"| {r['config']} | — | — | — | — | — | — | failed: {r['failed']} |")
        else:
            md.append(
                f"| {r['config']} | {r['jobs']} | {r['wall_s']:.1f} | {r['jobs_per_s']:.2f} | "
                f"{r['max_worker_peak_mb']:.0f} | {r['tree_peak_mb']:.0f} | {r['processes']} | {r['scored_lines']} |"
            )
    return "\n".join(md)
