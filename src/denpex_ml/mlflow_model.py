"""The denpex_ml model as an MLflow pyfunc ("models from code": no pickled object).

``mlflow models serve -m runs:/<id>/model`` and ``mlflow.pyfunc.spark_udf`` load it.
Input: a DataFrame with a ``text`` column (raw log) or a ``path`` column (file, directory
or archive readable where the model runs). Output: one row per input with ``label``,
``confidence``, ``initiating_rank``, ``title`` and ``error`` (bad inputs give an error
row instead of failing the batch).
"""

from __future__ import annotations

from typing import Any

import mlflow
import pandas as pd
from mlflow.pyfunc import PythonModel, PythonModelContext  # type: ignore[attr-defined]


class DenpexPyfunc(PythonModel):
    def load_context(self, context: PythonModelContext) -> None:
        from denpex_ml.model.core import load_model

        self.model = load_model(context.artifacts["model_dir"])

    def predict(
        self, context: PythonModelContext | None, model_input: pd.DataFrame, params: dict[str, Any] | None = None
    ) -> pd.DataFrame:
        from denpex_ml.errors import DenpexError

        rows = []
        for rec in model_input.to_dict("records"):
            try:
                if isinstance(rec.get("text"), str) and rec["text"]:
                    d = self.model.classify(text=str(rec["text"]))
                else:
                    d = self.model.classify(str(rec["path"]))
                rows.append(
                    {
                        "label": d.label,
                        "confidence": float(d.confidence),
                        "initiating_rank": d.initiating_rank,
                        "title": d.title,
                        "error": None,
                    }
                )
            except (DenpexError, KeyError) as exc:
                rows.append(
                    {"label": None, "confidence": None, "initiating_rank": None, "title": None, "error": str(exc)}
                )
        return pd.DataFrame(rows, columns=["label", "confidence", "initiating_rank", "title", "error"])


mlflow.models.set_model(DenpexPyfunc())
