from __future__ import annotations

from pathlib import Path

import pytest

from denpex_ml.model.core import DenpexModel, load_model
from denpex_ml.training import TrainConfig
from denpex_ml.training.trainer import train

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


@pytest.fixture()
def log_fixture() -> callable:  # type: ignore[valid-type]
    def get(name: str) -> Path:
        return FIXTURES / "logs" / name

    return get


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small model trained end to end with the hashing encoder (fast, deterministic), on the
    repository's real incidents found from this file (the suite runs from any directory)."""
    out = tmp_path_factory.mktemp("models") / "tiny"
    cfg = TrainConfig(
        per_class_train=4,
        per_class_val=2,
        per_class_test=2,
        cv_folds=2,
        head_folds=2,
        encoder="hashing:64",
        seed=3,
        real_data=str(REPO / "data" / "real" / "*.jsonl"),
    )
    train(cfg, out=out)
    return out


@pytest.fixture(scope="session")
def tiny_model(tiny_model_dir: Path) -> DenpexModel:
    return load_model(tiny_model_dir)
