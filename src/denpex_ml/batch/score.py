"""Scoring many jobs: in this process, in worker processes, or on Ray.

Each worker loads the model once (an initializer), then scores jobs sent to it. A job that
cannot be read or scored becomes an error row; the batch goes on. A worker that dies (killed
for memory, a crash in native code) is replaced, and the jobs it held are tried once more.
A job that runs past its time budget (``job_timeout``) becomes a ``JobTimeoutError`` row: in
worker processes its worker is killed and replaced; in this process (``workers=1``) a
``SIGALRM`` timer interrupts it between Python bytecodes. Workers die with their parent
(``PR_SET_PDEATHSIG`` on Linux, a watchdog thread elsewhere): killing ``denpex-ml score``
leaves no worker behind.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from collections.abc import Collection, Generator, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import replace
from multiprocessing.context import BaseContext
from typing import Any

from denpex_ml.batch.jobs import Batch, BatchLimits, Job, discover_jobs
from denpex_ml.batch.results import JobResult, public_job_id, public_result
from denpex_ml.batch.worker import ModelSpec, init_worker, score_in_worker, score_job, timeout_message
from denpex_ml.errors import InvalidInputError, WorkerCrashedError
from denpex_ml.logs import IngestLimits
from denpex_ml.model.core import DenpexModel
from denpex_ml.model.persistence import read_model_dir
from denpex_ml.topology.nodes import HostRegistry, NodeSummary

__all__ = ["DEFAULT_JOB_TIMEOUT", "ENGINES", "WorkerPool", "score_archive", "score_jobs"]

log = logging.getLogger(__name__)

ENGINES = ("local", "ray")
#: Evidence lines kept per result row (the full list is one ``denpex-ml classify`` away).
#: Seconds one job may take by default (``--job-timeout``); ``None`` or 0 turns the limit off.
DEFAULT_JOB_TIMEOUT = 300.0


def worker_context() -> BaseContext:
    """The start method of worker processes: a fresh interpreter that never imports ``__main__``.

    multiprocessing's ``spawn`` re-runs the caller's script in every worker, so a plain script
    without an ``if __name__ == "__main__":`` guard would start a pool inside each worker and
    every worker would die. loky (joblib's process backend; joblib comes with scikit-learn)
    starts workers like ``spawn`` (fork + exec, nothing inherited) but skips ``__main__``: the
    workers need nothing from it, only :mod:`denpex_ml`. Notebooks work the same way.
    """
    from joblib.externals.loky.backend.context import get_context

    ctx: BaseContext = get_context("loky")
    return ctx


class WorkerPool:
    """A process pool that survives workers dying and jobs that never end.

    When a worker dies (killed for memory, a crash in native code) the pool is rebuilt and
    every job that was in flight becomes a *suspect*. Suspects are then scored one at a time,
    so a job that kills its worker again is the culprit: it becomes a ``WorkerCrashedError``
    row and the others are scored normally. Workers that die on several suspects in a row
    with no success in between end the batch (they cannot work at all).

    With ``job_timeout``, each worker reports through a queue when it starts a job; a job
    still running ``job_timeout`` seconds later has its worker killed (the only way to stop
    native code), becomes a ``JobTimeoutError`` row, and the pool is rebuilt. The other jobs
    that were in flight are innocent (we know why the pool broke): they are simply sent again.
    """

    #: Suspects in a row that may kill their worker before the batch is given up.
    MAX_CONSECUTIVE_CRASHES = 3

    def __init__(
        self, workers: int, spec: ModelSpec, limits: IngestLimits | None, job_timeout: float | None = None
    ) -> None:
        self.workers = workers
        self.spec = spec
        self.limits = limits
        self.job_timeout = job_timeout or None
        self._ctx = worker_context()
        self.events: Any = None
        self.executor = self._new()

    def _new(self) -> ProcessPoolExecutor:
        # a fresh interpreter: no inherited threads or locks (progress bar, BLAS) in the workers; a fresh
        # event queue per pool, so a worker killed while writing to it cannot block the next
        self.events = self._ctx.SimpleQueue() if self.job_timeout else None
        return ProcessPoolExecutor(
            self.workers,
            mp_context=self._ctx,
            initializer=init_worker,
            initargs=(self.spec, self.limits, self.events, os.getpid()),
        )

    def _rebuild(self) -> None:
        self.executor.shutdown(wait=True, cancel_futures=True)
        self.executor = self._new()

    def _drain(self, started: dict[int, tuple[int, float]]) -> None:
        """Record when each job started (the parent's clock, when it hears of it)."""
        now = time.monotonic()
        while self.events is not None and not self.events.empty():
            token, pid = self.events.get()
            started[token] = (pid, now)

    def _kill_overdue(
        self, inflight: dict[Future[JobResult], tuple[Job, int]], started: dict[int, tuple[int, float]]
    ) -> set[int]:
        """Kill the workers of jobs past their time limit; the tokens of those jobs."""
        assert self.job_timeout is not None
        overdue: set[int] = set()
        now = time.monotonic()
        for fut, (job, token) in inflight.items():
            if token in started and not fut.done() and now - started[token][1] > self.job_timeout:
                pid = started[token][0]
                log.warning("job %s: over the %g s job time limit; stopping worker %d", job.id, self.job_timeout, pid)
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, getattr(signal, "SIGKILL", signal.SIGTERM))
                overdue.add(token)
        return overdue

    def run(self, jobs: Iterable[Job]) -> Iterator[JobResult]:
        inflight: dict[Future[JobResult], tuple[Job, int]] = {}
        suspects: list[Job] = []
        retry: list[Job] = []  # in flight when we killed an overdue job's worker: innocent
        started: dict[int, tuple[int, float]] = {}
        timed_out: set[int] = set()
        tokens = iter(range(1 << 62))
        alone = False  # one suspect is running by itself
        it = iter(jobs)
        exhausted = False
        crashes_in_a_row = 0
        poll = None if self.job_timeout is None else min(1.0, max(0.02, self.job_timeout / 10))

        def submit(job: Job) -> bool:
            """Send ``job`` to the pool; ``False`` when the pool broke since the last wait (a worker
            died and the executor knows it before the dead worker's futures report it)."""
            token = next(tokens)
            try:
                fut = self.executor.submit(score_in_worker, job, token)
            except BrokenProcessPool:
                return False
            inflight[fut] = (job, token)
            return True

        try:
            while True:
                if suspects:
                    if not inflight:
                        job = suspects.pop(0)
                        if not submit(job):  # nothing in flight will report the break: rebuild now
                            suspects.insert(0, job)
                            self._rebuild()
                            continue
                        alone = True
                else:
                    alone = False
                    while len(inflight) < 2 * self.workers and (retry or not exhausted):
                        nxt = retry.pop(0) if retry else next(it, None)
                        if nxt is None:
                            exhausted = True
                        elif nxt.error is not None:
                            yield JobResult.failed(nxt.id, *nxt.error)
                        elif not submit(nxt):  # never ran, so innocent: sent again once the pool is rebuilt
                            retry.insert(0, nxt)
                            if not inflight:
                                self._rebuild()
                            break
                if not inflight:
                    if retry or suspects:
                        continue
                    return
                done, _ = wait(inflight, timeout=poll, return_when=FIRST_COMPLETED)
                if self.job_timeout is not None:
                    self._drain(started)
                    timed_out |= self._kill_overdue(inflight, started)
                broken = False
                for fut in done:
                    job, token = inflight.pop(fut)
                    started.pop(token, None)
                    try:
                        result = fut.result()
                    except BrokenProcessPool:
                        broken = True
                        if token in timed_out:
                            assert self.job_timeout is not None
                            yield JobResult.failed(
                                job.id,
                                "JobTimeoutError",
                                timeout_message(job, self.job_timeout, "its worker was stopped and replaced"),
                                self.job_timeout,
                            )
                            continue
                        if timed_out:
                            retry.append(job)
                            continue
                        if not alone:
                            suspects.append(job)
                            continue
                        crashes_in_a_row += 1
                        if crashes_in_a_row >= self.MAX_CONSECUTIVE_CRASHES:
                            raise WorkerCrashedError(
                                f"worker processes died on {crashes_in_a_row} jobs in a row: they cannot start or "
                                "load the model (run with --workers 1 to see the error)"
                            ) from None
                        yield JobResult.failed(
                            job.id,
                            "WorkerCrashedError",
                            "the worker process died while scoring this job alone (killed for memory, or a crash in native code)",
                        )
                    else:
                        crashes_in_a_row = 0
                        yield result
                if broken:
                    rest = [job for job, _ in inflight.values()]
                    if timed_out:
                        retry[:0] = rest
                    else:
                        suspects += rest
                    inflight.clear()
                    started.clear()
                    timed_out.clear()
                    self._rebuild()
        finally:
            self.executor.shutdown(wait=True, cancel_futures=True)


def score_jobs(
    jobs: Iterable[Job],
    *,
    model: str | os.PathLike[str] | DenpexModel | None = None,
    taxonomy_dirs: Sequence[str | os.PathLike[str]] = (),
    workers: int = 1,
    engine: str = "local",
    ray_address: str | None = None,
    limits: IngestLimits | None = None,
    job_timeout: float | None = DEFAULT_JOB_TIMEOUT,
    nodes: NodeSummary | None = None,
) -> Generator[JobResult, None, None]:
    """Score jobs (from :func:`~denpex_ml.batch.jobs.discover_jobs`), yielding results as they
    finish (not in input order when ``workers > 1``).

    Each row's ``suspects`` name hosts by run-wide names (``host-1``...: the same host in every
    job of this call); ``nodes`` (a :class:`~denpex_ml.topology.NodeSummary`) also counts them
    across jobs, for :meth:`~denpex_ml.topology.NodeSummary.write`.

    ``job_timeout`` seconds (None or 0: no limit) bound each job: one over it becomes a
    ``JobTimeoutError`` row. With ``workers > 1`` its worker is killed and replaced; with one
    worker the job is interrupted in this process (main thread only; see :func:`score_job`);
    the Ray engine does not enforce it."""
    if engine not in ENGINES:
        raise InvalidInputError(f"score: unknown engine {engine!r}; use one of {', '.join(ENGINES)}")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise InvalidInputError(f"score: workers must be an int >= 1, got {workers!r}")
    if limits is not None and not isinstance(limits, IngestLimits):
        raise InvalidInputError(f"score: limits must be an IngestLimits or None, got {type(limits).__name__}")
    if job_timeout is not None and (
        isinstance(job_timeout, bool) or not isinstance(job_timeout, (int, float)) or not job_timeout >= 0
    ):
        raise InvalidInputError(f"score: job_timeout must be a number of seconds >= 0 or None, got {job_timeout!r}")
    if not job_timeout or job_timeout == float("inf"):
        job_timeout = None  # no limit
    registry = nodes.registry if nodes is not None else HostRegistry()
    for result in _score_jobs(jobs, model, taxonomy_dirs, workers, engine, ray_address, limits, job_timeout):
        if result.suspects:
            result = replace(result, suspects=registry.publish(result.suspects, result.host_names))
        result = public_result(result)  # job ids and error messages leave masked, like log text
        if nodes is not None and result.suspects:
            nodes.add(result.job_id, result.suspects)
        yield result


def _score_jobs(
    jobs: Iterable[Job],
    model: str | os.PathLike[str] | DenpexModel | None,
    taxonomy_dirs: Sequence[str | os.PathLike[str]],
    workers: int,
    engine: str,
    ray_address: str | None,
    limits: IngestLimits | None,
    job_timeout: float | None,
) -> Iterator[JobResult]:
    if engine == "ray":
        from denpex_ml.batch.ray_engine import score_on_ray

        yield from score_on_ray(
            jobs, ModelSpec.of(model, taxonomy_dirs), workers=workers, address=ray_address, limits=limits
        )
        return
    if workers == 1:
        m = model if isinstance(model, DenpexModel) else ModelSpec.of(model, taxonomy_dirs).load()
        for job in jobs:
            yield score_job(m, job, limits=limits, timeout=job_timeout)
        return
    spec = ModelSpec.of(model, taxonomy_dirs)
    read_model_dir(spec.path)  # a missing or corrupt model is a typed error here, not dying workers
    yield from WorkerPool(workers, spec, limits, job_timeout).run(jobs)


def score_archive(
    path: str | os.PathLike[str],
    *,
    model: str | os.PathLike[str] | DenpexModel | None = None,
    taxonomy_dirs: Sequence[str | os.PathLike[str]] = (),
    workers: int = 1,
    engine: str = "local",
    ray_address: str | None = None,
    job_pattern: str | None = None,
    exclude: Sequence[str] = (),
    skip: Collection[str] = (),
    limits: IngestLimits | None = None,
    batch_limits: BatchLimits | None = None,
    job_timeout: float | None = DEFAULT_JOB_TIMEOUT,
    nodes: NodeSummary | None = None,
) -> Generator[JobResult, None, None]:
    """Score every job of a directory or archive of failed jobs, one result per job.

    Parameters
    ----------
    path:
        A directory whose top-level entries are jobs (log files, per-rank folders, archives),
        or an archive (.tar[.gz|.bz2|.xz], .tgz, .zip) laid out the same way. See
        :mod:`denpex_ml.batch.jobs` for the rules.
    model:
        A model directory or a loaded model (default: the shipped model).
    workers, engine, ray_address:
        ``engine="local"`` scores in this process (1 worker) or in ``workers`` processes, each
        loading the model once; ``engine="ray"`` runs a Ray Data actor pool of ``workers``
        actors on the cluster at ``ray_address`` (a local Ray when None).
    job_pattern, exclude:
        A template such as ``{cluster}/{date}/{job}/*.log`` mapping file paths to job ids;
        glob patterns of entries to skip.
    skip:
        Job ids not to score (already done: what ``--resume`` passes).
    job_timeout:
        Seconds one job may take (default 300; None or 0: no limit); a job over it is a
        ``JobTimeoutError`` row (see :func:`score_jobs`).
    nodes:
        A :class:`~denpex_ml.topology.NodeSummary` that counts the hosts and GPUs the jobs blame
        (a node blamed by several jobs is a drain candidate); read it once the results are consumed.

    Yields
    ------
    JobResult
        One per job, error rows included, as they finish.

    Examples
    --------
    >>> nodes = NodeSummary()
    >>> for r in score_archive("data/examples/jobs", nodes=nodes):  # doctest: +SKIP
    ...     print(r.job_id, r.label, r.confidence, r.suspects)
    >>> nodes.write("nodes.csv")  # doctest: +SKIP
    """
    batch = discover_jobs(path, pattern=job_pattern, exclude=exclude, limits=batch_limits)
    jobs = pending_jobs(batch, skip)
    return score_jobs(
        jobs,
        model=model,
        taxonomy_dirs=taxonomy_dirs,
        workers=workers,
        engine=engine,
        ray_address=ray_address,
        limits=limits,
        job_timeout=job_timeout,
        nodes=nodes,
    )


def pending_jobs(batch: Batch, skip: Collection[str]) -> Iterable[Job]:
    """The jobs of ``batch`` whose public id (:func:`~denpex_ml.batch.results.public_job_id`, what
    results files hold) is not in ``skip``."""
    return (j for j in batch if public_job_id(j.id) not in skip) if skip else batch


def planned(batch: Batch, skip: Collection[str]) -> int:
    """How many jobs of ``batch`` will be scored (for progress bars)."""
    return sum(1 for i in batch.ids if public_job_id(i) not in skip) if skip else batch.total
