from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

from denpex_ml.model.core import DenpexModel, load_model
from denpex_ml.training import TrainConfig
from denpex_ml.training.trainer import train

#: The property tests draw new random inputs on every run, so a developer's runs keep finding
#: cases; the CI run that decides whether work lands (``HYPOTHESIS_PROFILE=ci`` in ``.ci/run``)
#: draws the same inputs every time, so a red CI always means a change broke something. A case a
#: random run finds is kept as an ``@example`` of its test, and then runs everywhere.
settings.register_profile("ci", derandomize=True, database=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


@pytest.fixture()
def log_fixture() -> callable:  # type: ignore[valid-type]
    def get(name: str) -> Path:
        return FIXTURES / "logs" / name

    return get


#: The real files the test model trains and cross-validates on: a fixed tenth of ``data/real``
#: (679 logs from the first collections, every taxonomy class among them), so that the suite's
#: time does not grow with each collected batch; the shipped model trains on all of them.
TINY_REAL_FILES: tuple[str, ...] = (
    "real-logs",
    "collected-2026-11",
    "collected-2026-12-general",
    "collected-2026-12-hangs",
    "collected-2026-12-hangs-b",
    "collected-2026-12-c-hangs",
    "collected-2026-12-c-general",
    "collected-2026-12-d-hangs",
    "collected-2026-12-e",
    "collected-2026-12-ad",
)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small model trained end to end with the hashing encoder (fast, deterministic), on the
    repository's real incidents of :data:`TINY_REAL_FILES` found from this file (the suite runs
    from any directory)."""
    out = tmp_path_factory.mktemp("models") / "tiny"
    cfg = TrainConfig(
        per_class_train=4,
        per_class_val=2,
        per_class_test=2,
        cv_folds=2,
        head_folds=2,
        encoder="hashing:64",
        seed=3,
        real_data=tuple(str(REPO / "data" / "real" / f"{name}.jsonl") for name in TINY_REAL_FILES),
    )
    train(cfg, out=out)
    return out


@pytest.fixture(scope="session")
def tiny_model(tiny_model_dir: Path) -> DenpexModel:
    return load_model(tiny_model_dir)
