"""The model logged to mlflow as a pyfunc loads and predicts (what `mlflow models serve` and
`spark_udf` use)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.mark.slow
def test_pyfunc_round_trip(tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mlflow = pytest.importorskip("mlflow")
    import pandas as pd

    from denpex_ml.tracking import log_training_run

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.chdir(tmp_path)
    run_id = log_training_run(
        experiment="test",
        params={"a": 1, "nested": {"b": 2}},
        metrics={"real/top1": 0.5, "nan": float("nan")},
        model_dir=tiny_model_dir,
    )
    model = mlflow.pyfunc.load_model(f"runs:/{run_id}/model")
    out = model.predict(
        pd.DataFrame(
            {
                "text": ["[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", ""],
                "path": ["", str(tmp_path / "missing.log")],
            }
        )
    )
    assert list(out.columns) == ["label", "confidence", "initiating_rank", "title", "error"]
    assert pd.isna(out.loc[0, "error"]) and out.loc[0, "confidence"] > 0
    assert "missing.log" in out.loc[1, "error"]  # a bad input is an error row, not a failed batch
    run = mlflow.get_run(run_id)
    assert run.data.metrics["real.top1"] == 0.5 and run.data.params["nested.b"] == "2"
