"""The mlflow side of retraining: the run of a retrained model, its registered version and aliases.

Every candidate gets the registry alias ``candidate``; a promoted one also ``champion``.
mlflow is imported inside the function (it is optional).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from denpex_ml.training.retraining import RetrainResult

__all__ = ["REGISTERED_NAME", "track_retrain"]

#: The registered model name of retrained versions.
REGISTERED_NAME = "denpex-ml"


def track_retrain(result: RetrainResult, experiment: str, *, register: bool) -> tuple[str, str | None]:
    """Log a retraining run to mlflow (params, metrics, gate report, lineage, the model) and, with
    ``register``, register its model as a version of :data:`REGISTERED_NAME` with the alias
    ``candidate`` (and ``champion`` when it was promoted). Returns the run id and the version."""
    import mlflow
    from mlflow import MlflowClient

    from denpex_ml.tracking import log_training_run, start_run

    params = {
        "base.dir": result.lineage["base"]["dir"],
        "base.model_id": result.lineage["base"]["model_id"],
        "incidents": json.dumps(result.lineage["incidents"]),
        "taxonomy_dirs": json.dumps(result.lineage["taxonomy_dirs"]),
        "gate.tolerance": result.gate.tolerance,
        "gate.class_tolerance": result.gate.class_tolerance,
    }
    metrics = dict(result.train.metrics)
    for r in result.gate.overall:
        metrics[f"gate/{r['set']}/{r['figure']}/delta"] = float(r["delta"])
    metrics["gate/passed"] = float(result.gate.passed)
    run_id = log_training_run(
        experiment=experiment,
        params=params,
        metrics=metrics,
        model_dir=result.model_dir,
        run_name=f"retrain-{result.model_dir.name}",
        tags={"denpex.kind": "retrain", "denpex.gate": "passed" if result.gate.passed else "failed"},
    )
    version: str | None = None
    with start_run(run_id=run_id):
        mlflow.log_dict(result.gate.to_dict(), "gate/gate.json")
        mlflow.log_text(result.gate.markdown(), "gate/gate.md")
        mlflow.log_dict(result.lineage, "lineage.json")
    if register:
        mv = mlflow.register_model(f"runs:/{run_id}/model", REGISTERED_NAME)
        version = str(mv.version)
        client = MlflowClient()
        client.set_registered_model_alias(REGISTERED_NAME, "candidate", version)
        if result.promoted:
            client.set_registered_model_alias(REGISTERED_NAME, "champion", version)
    return run_id, version
