"""Experiment tracking with MLflow (only when asked: nothing is tracked on import).

The tracking URI is ``MLFLOW_TRACKING_URI`` when set, else a local SQLite store ``./mlflow.db`` (artifacts in ``./mlartifacts``... see MLflow docs).
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

__all__ = ["log_training_run", "start_run", "tracking_uri"]


def tracking_uri() -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{Path('mlflow.db').resolve()}"


@contextlib.contextmanager
def start_run(experiment: str | None = None, **kwargs: Any) -> Iterator[Any]:
    """The one way this project opens an mlflow run: the tracking URI above, ``experiment``
    (when given; else mlflow's current one) and ``mlflow.start_run(**kwargs)``."""
    import mlflow

    mlflow.set_tracking_uri(tracking_uri())
    if experiment is not None:
        mlflow.set_experiment(experiment)
    with mlflow.start_run(**kwargs) as run:
        yield run


def _flat(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(_flat(v, key + "."))
        else:
            out[key] = v if isinstance(v, (int, float, str, bool)) or v is None else str(v)
    return out


def log_training_run(
    *,
    experiment: str,
    params: Mapping[str, Any],
    metrics: Mapping[str, float],
    model_dir: Path | None,
    run_name: str | None = None,
    tags: Mapping[str, str] | None = None,
    log_pyfunc: bool = True,
) -> str:
    """Log one run (params, metrics, the model directory, the pyfunc model); return its id."""
    import mlflow

    with start_run(experiment, run_name=run_name) as run:
        mlflow.log_params({k: ("" if v is None else v) for k, v in _flat(params).items()})
        clean = {
            k.replace("/", "."): float(v)
            for k, v in metrics.items()
            if isinstance(v, (int, float)) and math.isfinite(v)
        }
        mlflow.log_metrics(clean)
        if tags:
            mlflow.set_tags(dict(tags))
        if model_dir is not None:
            mlflow.log_artifacts(str(model_dir), artifact_path="model_dir")
            if log_pyfunc:
                from denpex_ml.mlflow_model import log_model

                log_model(model_dir)
        return str(run.info.run_id)
