"""Scoring on Ray: a Ray Data ``map_batches`` over an actor pool, each actor holding the model.

Use it when one machine is not enough: ``denpex-ml score PATH --engine ray --ray-address
ray://head:10001`` (or ``auto`` inside a cluster); without an address a local Ray is started
and stopped. Jobs read from a directory travel as paths (the cluster must see the same
filesystem); jobs read from an archive travel as bytes through Ray's object store.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from denpex_ml.batch.jobs import Job
from denpex_ml.batch.results import JobResult
from denpex_ml.batch.worker import ModelSpec, score_job, single_threaded
from denpex_ml.errors import DependencyMissingError
from denpex_ml.logs import IngestLimits

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["score_on_ray"]

#: Jobs per call of an actor (small: jobs are large and uneven).
BATCH_SIZE = 4


def _encode(job: Job) -> dict[str, Any]:
    return {
        "job_id": job.id,
        "path": str(job.path) if job.path is not None else "",
        "file_names": [rel for rel, _ in job.files],
        "file_paths": [str(p) for _, p in job.files],
        "member_names": [name for name, _ in job.members],
        "member_data": [data for _, data in job.members],
    }


def _decode(row: dict[str, Any]) -> Job:
    return Job(
        row["job_id"],
        path=Path(row["path"]) if row["path"] else None,
        files=[(n, Path(p)) for n, p in zip(row["file_names"] or [], row["file_paths"] or [], strict=True)],
        members=list(zip(row["member_names"] or [], row["member_data"] or [], strict=True)),
    )


class _RayScorer:
    """A Ray Data actor: loads the model once, scores batches of jobs."""

    def __init__(self, spec: ModelSpec, limits: IngestLimits | None) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        self.model = spec.load()
        single_threaded()
        self.limits = limits

    def __call__(self, batch: pa.Table) -> pa.Table:
        import pyarrow as pa

        results = [score_job(self.model, _decode(row), limits=self.limits) for row in batch.to_pylist()]
        return pa.table(
            {
                "job_id": [r.job_id for r in results],
                "result": [json.dumps(r.to_dict(), ensure_ascii=False) for r in results],
            }
        )


def score_on_ray(
    jobs: Iterable[Job],
    spec: ModelSpec,
    *,
    workers: int,
    address: str | None = None,
    limits: IngestLimits | None = None,
) -> Iterator[JobResult]:
    """Score ``jobs`` on Ray with ``workers`` actors; yields results as blocks complete."""
    try:
        import ray
        import ray.data
    except ImportError:
        raise DependencyMissingError("--engine ray needs Ray Data: pip install 'denpex-ml[ray]'") from None
    records: list[dict[str, Any]] = []
    for job in jobs:
        if job.error is not None:
            yield JobResult.failed(job.id, *job.error)
        else:
            records.append(_encode(job))
    if not records:
        return
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(
            address=address,
            num_cpus=None if address else max(workers, 1),
            include_dashboard=False,
            log_to_driver=False,
            logging_level=logging.WARNING,
            configure_logging=False,
        )
    try:
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False
        ds = ray.data.from_items(records, override_num_blocks=min(len(records), max(workers * 8, 1)))
        out = ds.map_batches(
            _RayScorer,
            fn_constructor_args=(spec, limits),
            batch_size=BATCH_SIZE,
            batch_format="pyarrow",
            compute=ray.data.ActorPoolStrategy(size=workers),
            num_cpus=1,
        )
        for row in out.iter_rows():
            yield JobResult.from_dict(json.loads(row["result"]))
    finally:
        if started_here:
            ray.shutdown()
