"""The denpex_ml model as an MLflow pyfunc ("models from code": no pickled object).

Log a model directory — the shipped model by default, no retraining needed — and load it
back with mlflow::

    from denpex_ml.mlflow_model import log_model
    info = log_model(registered_model_name="denpex-ml")        # the shipped model
    model = mlflow.pyfunc.load_model(info.model_uri)
    model.predict(pd.DataFrame({"text": [raw_log]}))

(or ``denpex-ml mlflow-log [--model DIR] [--register NAME]``). ``mlflow models serve`` loads
it too. **Input**: a DataFrame with a ``text`` column (raw log) and/or a ``path`` column
(file, directory or archive readable where the model runs); both are optional strings, a row
uses ``text`` when it is non-empty, else ``path``. **Output**: one row per input, the columns
of :data:`OUTPUT_COLUMNS`: ``label``, ``confidence``, ``abstained``, ``initiating_rank``
(pandas nullable ``Int64``: missing is ``<NA>``, never NaN), ``title``, ``evidence`` (the top
evidence lines, one per line of text), ``fix`` (the numbered fix steps) and ``error`` (a bad
input gives an error row instead of failing the batch).

``mlflow.pyfunc.spark_udf`` should work with ``result_type`` set to the output schema (see
``docs/batch-scoring.md``) but is untested here: pyspark is not installed in this project's
test environment.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd  # the pyfunc's type hints must resolve at run time (mlflow reads them)
from mlflow.pyfunc import PythonModel, PythonModelContext  # type: ignore[attr-defined]

if TYPE_CHECKING:
    from mlflow.models import ModelSignature
    from mlflow.models.model import ModelInfo

    from denpex_ml.model.diagnosis import Diagnosis

__all__ = ["OUTPUT_COLUMNS", "DenpexPyfunc", "log_model", "signature"]

log = logging.getLogger(__name__)

#: Columns of the pyfunc's output, in order.
OUTPUT_COLUMNS = ("label", "confidence", "abstained", "initiating_rank", "title", "evidence", "fix", "error")
#: Evidence lines per output row (``denpex-ml classify`` shows them all).
EVIDENCE_LINES = 3
#: The file mlflow runs to build the model (it calls ``mlflow.models.set_model``).
CODE_FILE = Path(__file__).with_name("_mlflow_code.py")


def signature() -> ModelSignature:
    """Input: optional string columns ``text`` and ``path``; output: :data:`OUTPUT_COLUMNS`."""
    from mlflow.models import ModelSignature
    from mlflow.types.schema import ColSpec, Schema

    inputs = Schema([ColSpec("string", "text", required=False), ColSpec("string", "path", required=False)])
    outputs = Schema(
        [
            ColSpec("string", "label", required=False),
            ColSpec("double", "confidence", required=False),
            ColSpec("boolean", "abstained", required=False),
            ColSpec("long", "initiating_rank", required=False),
            ColSpec("string", "title", required=False),
            ColSpec("string", "evidence", required=False),
            ColSpec("string", "fix", required=False),
            ColSpec("string", "error", required=False),
        ]
    )
    return ModelSignature(inputs=inputs, outputs=outputs)


def _row(d: Diagnosis) -> dict[str, Any]:
    evidence = []
    for ev in d.evidence[:EVIDENCE_LINES]:
        where = f"rank {ev.rank}" if ev.rank is not None else ev.stream
        evidence.append(f"[{where} {ev.source}:{ev.line}] {ev.text}")
    fix = [f"{i}. {step.step}" + "".join(f"\n   {c}" for c in step.commands) for i, step in enumerate(d.entry.fix, 1)]
    return {
        "label": d.label,
        "confidence": float(d.confidence),
        "abstained": d.abstained,
        "initiating_rank": d.initiating_rank,
        "title": d.title,
        "evidence": "\n".join(evidence),
        "fix": "\n".join(fix),
        "error": None,
    }


def _text(value: object) -> str:
    """A cell as text: missing values (None, NaN, <NA>) are empty."""
    return value if isinstance(value, str) else ""


class DenpexPyfunc(PythonModel):
    """The pyfunc: loads the model directory logged as the ``model_dir`` artifact."""

    def load_context(self, context: PythonModelContext) -> None:
        from denpex_ml.model.core import load_model

        self.model = load_model(context.artifacts["model_dir"])

    def predict(
        self, context: PythonModelContext | None, model_input: pd.DataFrame, params: dict[str, Any] | None = None
    ) -> pd.DataFrame:
        """Diagnose each row (``text``, else ``path``); a bad row is an error row."""
        from denpex_ml.errors import DenpexError

        rows: list[dict[str, Any]] = []
        for rec in model_input.to_dict("records"):
            text, path = _text(rec.get("text")), _text(rec.get("path"))
            try:
                if text:
                    d = self.model.classify(text=text)
                elif path:
                    d = self.model.classify(path)
                else:
                    raise KeyError("the row has neither a non-empty 'text' nor a 'path'")
                rows.append(_row(d))
            except (DenpexError, KeyError) as exc:
                rows.append({**dict.fromkeys(OUTPUT_COLUMNS), "error": str(exc).strip("'\"")})
        out = pd.DataFrame(rows, columns=list(OUTPUT_COLUMNS))
        out["initiating_rank"] = out["initiating_rank"].astype("Int64")  # missing: <NA>, not NaN
        out["confidence"] = out["confidence"].astype("float64")
        out["abstained"] = out["abstained"].astype("boolean")
        return out


def log_model(
    model_dir: str | os.PathLike[str] | None = None,
    *,
    name: str = "model",
    registered_model_name: str | None = None,
    pip_requirements: list[str] | None = None,
) -> ModelInfo:
    """Log a denpex_ml model directory as an mlflow pyfunc; no retraining needed.

    Parameters
    ----------
    model_dir:
        A model directory (default: the shipped model). It is checked (manifest, checksums)
        before anything is logged, and stored with the pyfunc as its ``model_dir`` artifact.
    name:
        The model's name in the run (``runs:/<run id>/<name>``).
    registered_model_name:
        Also register it in the mlflow model registry under this name (a new version).
    pip_requirements:
        The serving environment (default: this version of ``denpex-ml``).

    Returns
    -------
    mlflow.models.model.ModelInfo
        ``model_uri`` loads it: ``mlflow.pyfunc.load_model(info.model_uri)``.

    Logged into the active run, or a new one when none is active; the tracking URI is
    mlflow's (``MLFLOW_TRACKING_URI`` or ``mlflow.set_tracking_uri``).

    Examples
    --------
    >>> info = log_model(registered_model_name="denpex-ml")  # doctest: +SKIP
    >>> mlflow.pyfunc.load_model(info.model_uri).predict(pd.DataFrame({"text": [log]}))  # doctest: +SKIP
    """
    import mlflow

    from denpex_ml._version import __version__
    from denpex_ml.model.persistence import models_root, read_model_dir

    path = Path(model_dir) if model_dir is not None else models_root() / "default"
    read_model_dir(path)  # a missing or damaged model is a typed error before anything is logged
    log.info("logging %s as an mlflow pyfunc (%s)", path, mlflow.get_tracking_uri())
    info: ModelInfo = mlflow.pyfunc.log_model(
        name=name,
        python_model=str(CODE_FILE),
        artifacts={"model_dir": str(path)},
        pip_requirements=pip_requirements or [f"denpex-ml=={__version__}"],
        signature=signature(),
        input_example=pd.DataFrame({"text": ["[rank1]: torch.OutOfMemoryError: CUDA out of memory."]}),
        registered_model_name=registered_model_name,
    )
    return info
