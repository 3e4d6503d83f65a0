"""What a worker runs: how it loads the model (:class:`ModelSpec`), how it scores one job
(:func:`score_job`: read, diagnose, one row; never raises for a bad job) and the state each
worker process holds (:func:`init_worker`, :func:`score_in_worker`).

Both engines build on this module and not on each other: the local process pool
(:mod:`denpex_ml.batch.score`) and the Ray actor pool (:mod:`denpex_ml.batch.ray_engine`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from denpex_ml.batch.jobs import Job
from denpex_ml.batch.results import JobResult
from denpex_ml.errors import DenpexError, InvalidInputError, JobTimeoutError
from denpex_ml.logs import IngestLimits, Masker, read_logs
from denpex_ml.logs.readers import read_members
from denpex_ml.logs.sources import Member, ReadBudget, iter_bytes_members, iter_members
from denpex_ml.model.core import DenpexModel, load_model
from denpex_ml.model.diagnosis import Diagnosis
from denpex_ml.model.persistence import models_root
from denpex_ml.topology.nodes import compact_suspects

__all__ = [
    "ModelSpec",
    "die_with_parent",
    "init_worker",
    "score_in_worker",
    "score_job",
    "single_threaded",
    "timeout_message",
]

log = logging.getLogger(__name__)

#: Evidence lines kept in a result row.
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
        outside_taxonomy=d.outside_taxonomy,
        outside_probability=data["outside_probability"],
        alternatives=data["alternatives"][:3],
        initiating_rank=d.initiating_rank,
        initiating_reason=d.initiating_reason,
        hang_phase=d.hang.phase.value if d.hang is not None else None,
        hang_suspects=list(d.hang.suspects) if d.hang is not None else [],
        suspects=compact_suspects(data["suspects"]),
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


def timeout_message(job: Job, seconds: float, where: str) -> str:
    """The error of a job over ``--job-timeout`` (``where``: what became of it)."""
    return f"{job.id}: scoring took longer than the job time limit of {seconds:g} s (--job-timeout); {where}"


class _Alarm:
    """Raises :class:`JobTimeoutError` in the main thread once ``seconds`` have passed (``SIGALRM``).

    The timer re-fires every 0.25 s until the job ends, so code that swallows the first
    exception is interrupted again. It is only armed on the main thread of a POSIX process
    where no other ``ITIMER_REAL`` timer runs (it never replaces someone else's); a call in
    native code finishes before the exception is raised.
    """

    def __init__(self, seconds: float, job_id: str) -> None:
        self.seconds = seconds
        self.job_id = job_id
        self.expired = False
        self.armed = False
        self._old: Any = None

    def _fire(self, signum: int, frame: FrameType | None) -> None:
        if self.armed:
            self.expired = True
            raise JobTimeoutError(f"{self.job_id}: over the job time limit of {self.seconds:g} s")

    def __enter__(self) -> _Alarm:
        if (
            hasattr(signal, "setitimer")
            and threading.current_thread() is threading.main_thread()
            and signal.getitimer(signal.ITIMER_REAL)[0] == 0
        ):
            self._old = signal.signal(signal.SIGALRM, self._fire)
            self.armed = True
            signal.setitimer(signal.ITIMER_REAL, min(self.seconds, 1e8), 0.25)  # 1e8 s: within time_t
        return self

    def __exit__(self, *exc: object) -> None:
        if self.armed:
            self.armed = False
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self._old)


def score_job(
    model: DenpexModel, job: Job, *, limits: IngestLimits | None = None, timeout: float | None = None
) -> JobResult:
    """Score one job; never raises for a bad job (the error is in the row).

    ``timeout`` (seconds; None: no limit) is enforced with ``SIGALRM`` when called on the main
    thread: a job over it becomes a ``JobTimeoutError`` row.
    """
    if not timeout:
        return _score_job(model, job, limits)
    t0 = time.perf_counter()
    alarm = _Alarm(timeout, job.id)
    result: JobResult | None = None
    try:
        with alarm:
            result = _score_job(model, job, limits)
    except JobTimeoutError:
        pass
    if alarm.expired or result is None:
        return JobResult.failed(
            job.id, "JobTimeoutError", timeout_message(job, timeout, "it was stopped"), time.perf_counter() - t0
        )
    return result


def _score_job(model: DenpexModel, job: Job, limits: IngestLimits | None) -> JobResult:
    t0 = time.perf_counter()
    if job.error is not None:
        return JobResult.failed(job.id, *job.error)
    limits = limits or IngestLimits()
    masker = Masker()  # the job's pseudonyms: the suspects' real hosts become run-wide names in the parent
    try:
        if job.path is not None:
            bundle = read_logs(job.path, limits=limits, masker=masker)
        elif job.files:
            budget = ReadBudget(limits, job.id)
            members = _job_members(job, limits, budget)
            bundle = read_members(members, name=job.id, limits=limits, budget=budget, masker=masker)
        else:
            budget = ReadBudget(limits, job.id)
            members = (m for name, data in job.members for m in iter_bytes_members(name, data, limits, budget))
            bundle = read_members(members, name=job.id, limits=limits, budget=budget, masker=masker)
        result = _row(job.id, model.diagnose(bundle, started=t0), model.model_id)
        result.bytes = bundle.n_bytes
        if result.suspects:
            real = masker.reveal_map()
            result.host_names = {s["host"]: real[s["host"]] for s in result.suspects if s["host"] in real}
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


# -- per-worker state (a process of the pool, a Ray actor) -------------------------------------
_WORKER_MODEL: DenpexModel | None = None
_WORKER_LIMITS: IngestLimits | None = None
_WORKER_EVENTS: Any = None  # a SimpleQueue: (token, pid) when a job starts

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> None:
    """Make this process end when ``parent_pid`` does (SIGKILL of the parent included).

    Linux: ``prctl(PR_SET_PDEATHSIG, SIGKILL)``, so the kernel kills this process when the
    thread that started it ends. Elsewhere: a daemon thread that exits the process once it has
    been re-parented. Either way, a parent that is already gone ends this process at once.
    """
    armed = False
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            armed = libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
        except (OSError, AttributeError):
            armed = False
    if os.getppid() != parent_pid:  # the parent died before the signal was armed
        os._exit(1)
    if not armed:

        def watch() -> None:
            while os.getppid() == parent_pid:
                time.sleep(1.0)
            os._exit(1)

        threading.Thread(target=watch, name="denpex-parent-watchdog", daemon=True).start()


def single_threaded() -> None:
    """One BLAS/OpenMP/torch thread per worker: N workers on N cores, not N x cores threads."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1)
    torch = sys.modules.get("torch")  # only when the encoder loaded it: importing it costs memory
    if torch is not None:
        torch.set_num_threads(1)


def init_worker(spec: ModelSpec, limits: IngestLimits | None, events: Any = None, parent_pid: int = 0) -> None:
    global _WORKER_MODEL, _WORKER_LIMITS, _WORKER_EVENTS
    if parent_pid:
        die_with_parent(parent_pid)
    _WORKER_EVENTS = events
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    _WORKER_MODEL = spec.load()
    single_threaded()
    _WORKER_LIMITS = limits


def score_in_worker(job: Job, token: int = -1) -> JobResult:
    assert _WORKER_MODEL is not None, "worker not initialised"
    if _WORKER_EVENTS is not None:
        _WORKER_EVENTS.put((token, os.getpid()))  # the parent's clock for this job starts now
    return score_job(_WORKER_MODEL, job, limits=_WORKER_LIMITS)
