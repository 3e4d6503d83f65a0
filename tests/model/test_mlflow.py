"""The model logged to mlflow as a pyfunc loads and predicts (what `mlflow models serve` uses).

``mlflow.pyfunc.spark_udf`` is not tested: pyspark is not installed in this environment.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from denpex_ml.cli import main
from denpex_ml.cli.console import EXIT_INPUT_ERROR, EXIT_OK

OOM = "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
COLUMNS = ["label", "confidence", "abstained", "initiating_rank", "title", "evidence", "fix", "error"]


@pytest.fixture
def file_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A store in a temporary folder (SQLite: mlflow 3 refuses its old ./mlruns file store)."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)
    return uri


@pytest.mark.slow
def test_training_run_logs_a_pyfunc_that_predicts(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
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
    out = model.predict(pd.DataFrame({"text": [OOM, ""], "path": ["", str(tmp_path / "missing.log")]}))
    assert list(out.columns) == COLUMNS
    assert pd.isna(out.loc[0, "error"]) and out.loc[0, "confidence"] > 0
    assert "missing.log" in out.loc[1, "error"]  # a bad input is an error row, not a failed batch
    assert str(out["initiating_rank"].dtype) == "Int64" and out["initiating_rank"].isna().iloc[1]
    run = mlflow.get_run(run_id)
    assert run.data.metrics["real.top1"] == 0.5 and run.data.params["nested.b"] == "2"


def test_the_shipped_model_logs_and_predicts_on_text_only(file_store: str) -> None:
    """A new user: log the shipped model (no retraining), load it, predict on a text column."""
    mlflow = pytest.importorskip("mlflow")
    import pandas as pd

    from denpex_ml.mlflow_model import log_model

    with mlflow.start_run():
        info = log_model(registered_model_name="denpex-ml")
    assert info.registered_model_version == 1
    model = mlflow.pyfunc.load_model("models:/denpex-ml/1")
    assert model.metadata.get_input_schema().required_input_names() == []  # neither text nor path required
    out = model.predict(pd.DataFrame({"text": [OOM, "all good\nstep 10 loss 1.2\n", None]}))
    assert list(out.columns) == COLUMNS
    first = out.iloc[0]
    assert first["label"] == "cuda-oom" and first["initiating_rank"] == 1 and not first["abstained"]
    assert "OutOfMemoryError" in first["evidence"] and first["fix"].startswith("1. ")
    assert str(out["initiating_rank"].dtype) == "Int64"  # nullable integer: <NA>, never NaN-as-long
    assert out["initiating_rank"].isna().iloc[1] and pd.isna(out.iloc[1]["error"])
    assert "neither" in out.iloc[2]["error"] and pd.isna(out.iloc[2]["label"])  # an empty row is an error row


def test_cli_mlflow_log_registers_a_model_directory(
    tiny_model_dir: Path, file_store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mlflow = pytest.importorskip("mlflow")

    argv = ["mlflow-log", "--model", str(tiny_model_dir), "--register", "my-denpex", "--experiment", "exp"]
    assert main(argv) == EXIT_OK
    captured = capsys.readouterr()
    assert "models:/my-denpex/1" in captured.out
    versions = mlflow.MlflowClient().search_model_versions("name='my-denpex'")
    assert [str(v.version) for v in versions] == ["1"]
    assert main(["mlflow-log", "--model", str(tmp_path / "nope")]) == EXIT_INPUT_ERROR
    assert "nope" in capsys.readouterr().err
