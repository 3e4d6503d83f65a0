"""``denpex-ml score``: batch-score a directory or archive of failed jobs into a results file."""

from __future__ import annotations

import argparse
import heapq
import sys
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from denpex_ml.cli.console import EXIT_OK, EXIT_PARTIAL, Progress, add_model_args, console, usage_error

if TYPE_CHECKING:
    from rich.console import Console

    from denpex_ml.batch.results import JobResult
    from denpex_ml.cli.console import SubParsers
    from denpex_ml.topology.nodes import NodeSummary

__all__ = ["Summary", "add_parser", "run"]

#: Seconds one job may take by default (kept equal to ``batch.score.DEFAULT_JOB_TIMEOUT``,
#: which is not imported here so that ``--help`` stays fast).
DEFAULT_JOB_TIMEOUT = 300.0


def add_parser(sub: SubParsers, name: str = "score") -> None:
    p = sub.add_parser(
        name,
        help="batch-score a directory or archive of failed jobs (one result row per job)",
        description=(
            "Score every job of PATH: a directory whose top-level entries are jobs (log files, "
            "per-rank folders, archives) or an archive laid out the same way. Rows are written "
            "and flushed as jobs finish. Exit codes: 0 all jobs scored, 1 some jobs are error "
            "rows, 2 usage error (including an output path that cannot be written or lies inside "
            "the input), 3 the batch itself is unreadable or the results cannot be written "
            "(e.g. disk full: finished rows are kept, rerun with --resume)."
        ),
    )
    p.add_argument("path", metavar="PATH", help="directory or .tar/.tar.gz/.tgz/.zip of jobs")
    p.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="FILE",
        help="results file: .jsonl, .csv or .parquet; '-' writes JSONL (or --format csv) to stdout",
    )
    p.add_argument("--format", choices=["jsonl", "csv", "parquet"], help="results format (default: from the suffix)")
    p.add_argument("--workers", type=int, default=1, metavar="N", help="worker processes / Ray actors (default 1)")
    p.add_argument("--engine", choices=["local", "ray"], default="local", help="local processes (default) or Ray")
    p.add_argument("--ray-address", metavar="ADDR", help="existing Ray cluster (default: start a local Ray)")
    p.add_argument(
        "--job-pattern",
        metavar="TEMPLATE",
        help="map file paths to job ids, e.g. '{cluster}/{date}/{job}/*.log' ({name}: one path part of the id)",
    )
    p.add_argument(
        "--exclude", action="append", default=[], metavar="GLOB", help="skip entries matching GLOB (repeatable)"
    )
    p.add_argument("--resume", action="store_true", help="keep finished rows of OUTPUT and score only the rest")
    p.add_argument("--overwrite", action="store_true", help="replace an existing OUTPUT")
    p.add_argument(
        "--job-timeout",
        type=float,
        default=DEFAULT_JOB_TIMEOUT,
        metavar="SECONDS",
        help=f"time limit per job (default {DEFAULT_JOB_TIMEOUT:g}; 0: none); a job over it is a "
        "JobTimeoutError row and its worker is replaced",
    )
    add_model_args(p)
    p.add_argument(
        "--nodes",
        metavar="FILE",
        help="also write the node summary (.csv or .jsonl): hosts and GPUs blamed across the jobs of this "
        "run, the most blamed first, with the jobs that implicate each",
    )
    p.add_argument(
        "--reveal-hosts",
        action="store_true",
        help="for the owner of the logs: write the run-wide host names' real names to FILE.hosts.json "
        "(mode 0600, beside --nodes FILE or else OUTPUT) and a host_name column in the node summary (0600 too)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress and no summary")
    p.set_defaults(handler=run)


class Summary:
    """Running totals of a batch (memory does not grow with the number of jobs)."""

    def __init__(self) -> None:
        self.n = 0
        self.labels: Counter[str] = Counter()
        self.confidences: dict[str, list[float]] = {}
        self.errors: Counter[str] = Counter()
        self.first_error: dict[str, JobResult] = {}
        self._slow: list[tuple[float, int, JobResult]] = []

    def add(self, r: JobResult) -> None:
        self.n += 1
        if not r.ok:
            kind = r.error_type or "error"
            self.errors[kind] += 1
            self.first_error.setdefault(kind, r)
            return
        label = r.label or "unknown"
        self.labels[label] += 1
        conf = self.confidences.setdefault(label, [])
        if len(conf) < 10_000:
            conf.append(r.confidence or 0.0)
        item = (r.seconds, self.n, r)
        if len(self._slow) < 5:
            heapq.heappush(self._slow, item)
        elif item[0] > self._slow[0][0]:
            heapq.heapreplace(self._slow, item)

    @property
    def n_errors(self) -> int:
        return sum(self.errors.values())

    def render(self, seconds: float, console: Console, *, skipped: int = 0) -> None:
        """Print jobs per label, the unknown rate, errors by type and the slowest jobs."""
        from rich.table import Table

        n_ok = self.n - self.n_errors
        console.print(
            f"[bold]{self.n} jobs[/] in {seconds:.1f} s ({self.n / max(seconds, 1e-9):.1f} jobs/s): "
            f"{n_ok} scored, {self.n_errors} errors" + (f", {skipped} already done (--resume)" if skipped else "")
        )
        if n_ok:
            t = Table(title="jobs per failure")
            t.add_column("label", no_wrap=True)
            t.add_column("jobs", justify="right")
            t.add_column("share", justify="right")
            t.add_column("median confidence", justify="right")
            for label, count in self.labels.most_common():
                confs = sorted(self.confidences[label])
                t.add_row(label, str(count), f"{count / n_ok:.0%}", f"{confs[len(confs) // 2]:.2f}")
            console.print(t)
            console.print(
                f"unknown (abstained) rate: {self.labels.get('unknown', 0) / n_ok:.1%}; "
                f"no failure found: {self.labels.get('no-failure', 0) / n_ok:.1%}"
            )
        if self.errors:
            e = Table(title="errors")
            e.add_column("error", no_wrap=True)
            e.add_column("jobs", justify="right")
            e.add_column("first job: message", overflow="fold")
            for kind, count in self.errors.most_common():
                first = self.first_error[kind]
                e.add_row(kind, str(count), f"{first.job_id}: {first.error}")
            console.print(e)
        if self._slow:
            s = Table(title="slowest jobs")
            s.add_column("job", overflow="fold")
            s.add_column("seconds", justify="right")
            s.add_column("MB", justify="right")
            s.add_column("ranks", justify="right")
            for _, _, r in sorted(self._slow, key=lambda x: x[0], reverse=True):
                s.add_row(r.job_id, f"{r.seconds:.2f}", f"{(r.bytes or 0) / 1e6:.1f}", str(r.ranks))
            console.print(s)


def _usage_error(message: str) -> int:
    return usage_error("score", message)


def _write_nodes(nodes: NodeSummary, path: str | None, output: str, reveal: bool, *, quiet: bool) -> None:
    """The node summary (``--nodes``) and, for the owner who asked, the host map (0600)."""
    from denpex_ml.topology.reveal import host_map_path, write_private_json

    if path:
        nodes.write(path, reveal=reveal)
        if not quiet:
            print(f"node summary ({len(nodes)} hosts blamed) written to {path}", file=sys.stderr)
    if reveal:
        where = write_private_json(host_map_path(path or output), {"hosts": nodes.registry.reveal_map()})
        if not quiet:
            print(f"host map (real names, mode 0600) written to {where}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    """Score the batch at ``args.path`` into ``args.output``; returns the exit code.

    The output path is checked before any work: a directory, a parent that is a file, a folder
    we cannot write in, or a path that is (or lies inside) the input is a usage error.
    """
    from denpex_ml.batch.output import ResultSink, check_output_path
    from denpex_ml.batch.results import STDOUT
    from denpex_ml.errors import InvalidInputError, OutputPathError, OutputWriteError

    to_stdout = args.output == STDOUT
    out = Path(args.output)
    if args.workers < 1:
        return _usage_error("--workers must be >= 1")
    if not args.job_timeout >= 0:
        return _usage_error(f"--job-timeout must be a number of seconds >= 0 (0: no limit), got {args.job_timeout}")
    try:
        check_output_path(args.output, fmt=args.format, source=args.path, exclude=args.exclude, resume=args.resume)
    except (OutputPathError, InvalidInputError) as exc:  # InvalidInputError: an unknown format
        return _usage_error(str(exc))
    if not to_stdout and out.exists() and not (args.resume or args.overwrite):
        return _usage_error(f"{out} exists; use --resume to continue it or --overwrite to start again")
    nodes_path = getattr(args, "nodes", None)
    reveal = bool(getattr(args, "reveal_hosts", False))
    if reveal and to_stdout and not nodes_path:
        return _usage_error("--reveal-hosts with -o - needs --nodes FILE (the host map is written beside it)")
    if nodes_path and (nodes_path == args.output or Path(nodes_path).is_dir()):
        return _usage_error(f"--nodes {nodes_path}: give a file other than the results file")
    from denpex_ml.batch.jobs import discover_jobs
    from denpex_ml.batch.score import pending_jobs, planned, score_jobs
    from denpex_ml.topology.nodes import NodeSummary

    nodes = NodeSummary() if (nodes_path or reveal) else None

    batch = discover_jobs(args.path, pattern=args.job_pattern, exclude=args.exclude)  # before any file is written
    if batch.skipped:
        print(
            f"{len(batch.skipped)} file(s) belong to no job (pattern/exclude), e.g. {batch.skipped[0]}", file=sys.stderr
        )
    try:
        sink = ResultSink(args.output, fmt=args.format, resume=args.resume)
    except OutputPathError as exc:
        return _usage_error(str(exc))
    total = planned(batch, sink.done)
    summary = Summary()
    progress = Progress(jobs=total, quiet=args.quiet).start()
    t0 = time.perf_counter()
    finished = False
    results = score_jobs(
        pending_jobs(batch, sink.done),
        model=args.model,
        taxonomy_dirs=args.taxonomy,
        workers=args.workers,
        engine=args.engine,
        ray_address=args.ray_address,
        job_timeout=args.job_timeout or None,
        nodes=nodes,
    )
    try:
        for r in results:
            sink.write(r)
            summary.add(r)
            progress.advance(r.ok)
        finished = True
    finally:
        results.close()  # stops the workers now, not when garbage-collected
        progress.close()
        try:
            sink.close(finalize=finished)
        except OutputWriteError:
            if finished:
                raise
            # the error that stopped the run is the one to report; the journal is kept
        if not finished:
            print(f"denpex-ml score: stopped after {summary.n} jobs; rerun with --resume to finish", file=sys.stderr)
    if nodes is not None:
        _write_nodes(nodes, nodes_path, args.output, reveal, quiet=args.quiet)
    if not args.quiet:
        # with -o -, stdout holds the rows only
        shown = console(stderr=to_stdout, piped_width=160)
        summary.render(time.perf_counter() - t0, shown, skipped=batch.total - total)
        if not to_stdout:
            print(f"results written to {out}", file=sys.stderr)
    return EXIT_PARTIAL if summary.n_errors else EXIT_OK
