"""Scoring many jobs: in this process, in worker processes, or on Ray.

Each worker loads the model once (an initializer), then scores jobs sent to it. A job that
cannot be read or scored becomes an error row; the batch goes on. A worker that dies (killed
for memory, a crash in native code) is replaced, and the jobs it held are tried once more.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import sys
import time
from collections.abc import Collection, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path

from denpex_ml.batch.jobs import Batch, BatchLimits, Job, discover_jobs
from denpex_ml.batch.results import JobResult
from denpex_ml.errors import DenpexError, InvalidInputError, WorkerCrashedError
from denpex_ml.logs import IngestLimits, read_logs
from denpex_ml.logs.ingest import read_members
from denpex_ml.logs.sources import Member, ReadBudget, iter_bytes_members, iter_members
from denpex_ml.model.core import DenpexModel, load_model
from denpex_ml.model.diagnosis import Diagnosis
from denpex_ml.model.persistence import models_root, read_model_dir

__all__ = ["ENGINES", "ModelSpec", "score_archive", "score_job", "score_jobs"]

log = logging.getLogger(__name__)

ENGINES = ("local", "ray")
#: Evidence lines kept per result row (the full list is one ``denpex-ml classify`` away).
ROW_EVIDENCE = 3


@dataclass(frozen=True)
class ModelSpec:
    """How a worker process loads the model: a directory and extra taxonomy directories."""

    path: str
    taxonomy_dirs: tuple[str, ...] = ()

    def load(self) -> DenpexModel:
        return load_model(self.path, taxonomy_dirs=self.taxonomy_dirs or None)

    @classmethod
    def of(
        cls, model: str | os.PathLike[str] | DenpexModel | None, taxonomy_dirs: Sequence[str | os.PathLike[str]] = ()
    ) -> ModelSpec:
        if isinstance(model, DenpexModel):
            if model.path is None:
                raise InvalidInputError(
                    "score: a model built in memory cannot be sent to workers; save() it and pass its directory"
                )
            return cls(str(model.path), tuple(str(t) for t in taxonomy_dirs))
        path = Path(model) if model is not None else models_root() / "default"
        return cls(str(path), tuple(str(t) for t in taxonomy_dirs))


def _job_members(job: Job, limits: IngestLimits, budget: ReadBudget) -> Iterator[Member]:
    for rel, path in job.files:
        for m in iter_members(path, limits, budget):
            name = rel if m.name == path.name else f"{rel}/{m.name.split('/', 1)[-1]}"
            yield Member(name, m.open)


def _row(job_id: str, d: Diagnosis, model_id: str) -> JobResult:
    data = d.to_dict()
    stats = data["stats"]
    return JobResult(
        job_id=job_id,
        label=d.label,
        title=d.title,
        confidence=data["confidence"],
        abstained=d.abstained,
        best_guess=d.best_guess,
        alternatives=data["alternatives"][:3],
        initiating_rank=d.initiating_rank,
        initiating_reason=d.initiating_reason,
        hang_phase=d.hang.phase.value if d.hang is not None else None,
        hang_suspects=list(d.hang.suspects) if d.hang is not None else [],
        evidence=[
            {k: ev[k] for k in ("rank", "source", "line", "text", "why") if k in ev}
            for ev in data["evidence"][:ROW_EVIDENCE]
        ],
        ranks=stats.get("ranks"),
        lines=stats.get("lines"),
        seconds=float(stats.get("seconds", 0.0)),
        warnings=list(stats.get("warnings", [])),
        model=model_id,
    )


def score_job(model: DenpexModel, job: Job, *, limits: IngestLimits | None = None) -> JobResult:
    """Score one job; never raises for a bad job (the error is in the row)."""
    t0 = time.perf_counter()
    if job.error is not None:
        return JobResult.failed(job.id, *job.error)
    limits = limits or IngestLimits()
    try:
        if job.path is not None:
            bundle = read_logs(job.path, limits=limits)
        elif job.files:
            budget = ReadBudget(limits, job.id)
            bundle = read_members(_job_members(job, limits, budget), name=job.id, limits=limits, budget=budget)
        else:
            budget = ReadBudget(limits, job.id)
            members = (m for name, data in job.members for m in iter_bytes_members(name, data, limits, budget))
            bundle = read_members(members, name=job.id, limits=limits, budget=budget)
        result = _row(job.id, model.diagnose(bundle, started=t0), model.model_id)
        result.bytes = bundle.n_bytes
        return result
    except DenpexError as exc:
        return JobResult.failed(job.id, type(exc).__name__, str(exc), time.perf_counter() - t0)
    except MemoryError:
        return JobResult.failed(
            job.id, "InputTooLargeError", "out of memory while scoring this job", time.perf_counter() - t0
        )
    except Exception as exc:  # a bug must not end the batch; it is logged and reported in the row
        log.exception("job %s: internal error", job.id)
        return JobResult.failed(job.id, "InternalError", f"{type(exc).__name__}: {exc}", time.perf_counter() - t0)


# -- worker processes ---------------------------------------------------------------------------
_WORKER_MODEL: DenpexModel | None = None
_WORKER_LIMITS: IngestLimits | None = None


def single_threaded() -> None:
    """One BLAS/OpenMP/torch thread per worker: N workers on N cores, not N x cores threads."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1)
    torch = sys.modules.get("torch")  # only when the encoder loaded it: importing it costs memory
    if torch is not None:
        torch.set_num_threads(1)


def _init_worker(spec: ModelSpec, limits: IngestLimits | None) -> None:
    global _WORKER_MODEL, _WORKER_LIMITS
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    _WORKER_MODEL = spec.load()
    single_threaded()
    _WORKER_LIMITS = limits


def _score_in_worker(job: Job) -> JobResult:
    assert _WORKER_MODEL is not None, "worker not initialised"
    return score_job(_WORKER_MODEL, job, limits=_WORKER_LIMITS)


class _Pool:
    """A process pool that survives workers dying.

    When a worker dies (killed for memory, a crash in native code) the pool is rebuilt and
    every job that was in flight becomes a *suspect*. Suspects are then scored one at a time,
    so a job that kills its worker again is the culprit: it becomes a ``WorkerCrashedError``
    row and the others are scored normally. Workers that die on several suspects in a row
    with no success in between end the batch (they cannot work at all).
    """

    #: Suspects in a row that may kill their worker before the batch is given up.
    MAX_CONSECUTIVE_CRASHES = 3

    def __init__(self, workers: int, spec: ModelSpec, limits: IngestLimits | None) -> None:
        self.workers = workers
        self.spec = spec
        self.limits = limits
        self.executor = self._new()

    def _new(self) -> ProcessPoolExecutor:
        # spawn: no inherited threads or locks (progress bar, BLAS) in the workers
        return ProcessPoolExecutor(
            self.workers,
            mp_context=mp.get_context("spawn"),
            initializer=_init_worker,
            initargs=(self.spec, self.limits),
        )

    def _rebuild(self) -> None:
        self.executor.shutdown(wait=True, cancel_futures=True)
        self.executor = self._new()

    def run(self, jobs: Iterable[Job]) -> Iterator[JobResult]:
        inflight: dict[Future[JobResult], Job] = {}
        suspects: list[Job] = []
        alone = False  # one suspect is running by itself
        it = iter(jobs)
        exhausted = False
        crashes_in_a_row = 0
        try:
            while True:
                if suspects:
                    if not inflight:
                        job = suspects.pop(0)
                        inflight[self.executor.submit(_score_in_worker, job)] = job
                        alone = True
                else:
                    alone = False
                    while len(inflight) < 2 * self.workers and not exhausted:
                        nxt = next(it, None)
                        if nxt is None:
                            exhausted = True
                        elif nxt.error is not None:
                            yield JobResult.failed(nxt.id, *nxt.error)
                        else:
                            inflight[self.executor.submit(_score_in_worker, nxt)] = nxt
                if not inflight:
                    return
                done, _ = wait(inflight, return_when=FIRST_COMPLETED)
                broken = False
                for fut in done:
                    job = inflight.pop(fut)
                    try:
                        result = fut.result()
                    except BrokenProcessPool:
                        broken = True
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
                    suspects += list(inflight.values())
                    inflight.clear()
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
) -> Iterator[JobResult]:
    """Score jobs (from :func:`~denpex_ml.batch.jobs.discover_jobs`), yielding results as they
    finish (not in input order when ``workers > 1``)."""
    if engine not in ENGINES:
        raise InvalidInputError(f"score: unknown engine {engine!r}; use one of {', '.join(ENGINES)}")
    if workers < 1:
        raise InvalidInputError(f"score: workers must be >= 1, got {workers}")
    if engine == "ray":
        from denpex_ml.batch.ray_engine import score_on_ray

        yield from score_on_ray(
            jobs, ModelSpec.of(model, taxonomy_dirs), workers=workers, address=ray_address, limits=limits
        )
        return
    if workers == 1:
        m = model if isinstance(model, DenpexModel) else ModelSpec.of(model, taxonomy_dirs).load()
        for job in jobs:
            yield score_job(m, job, limits=limits)
        return
    spec = ModelSpec.of(model, taxonomy_dirs)
    read_model_dir(spec.path)  # a missing or corrupt model is a typed error here, not dying workers
    yield from _Pool(workers, spec, limits).run(jobs)


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
) -> Iterator[JobResult]:
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

    Yields
    ------
    JobResult
        One per job, error rows included, as they finish.

    Examples
    --------
    >>> for r in score_archive("data/examples/jobs"):  # doctest: +SKIP
    ...     print(r.job_id, r.label, r.confidence)
    """
    batch = discover_jobs(path, pattern=job_pattern, exclude=exclude, limits=batch_limits)
    jobs: Iterable[Job] = (j for j in batch if j.id not in skip) if skip else batch
    return score_jobs(
        jobs,
        model=model,
        taxonomy_dirs=taxonomy_dirs,
        workers=workers,
        engine=engine,
        ray_address=ray_address,
        limits=limits,
    )


def planned(batch: Batch, skip: Collection[str]) -> int:
    """How many jobs of ``batch`` will be scored (for progress bars)."""
    return sum(1 for i in batch.ids if i not in skip) if skip else batch.total
