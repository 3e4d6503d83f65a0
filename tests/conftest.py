from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


@pytest.fixture()
def log_fixture() -> callable:  # type: ignore[valid-type]
    def get(name: str) -> Path:
        return FIXTURES / "logs" / name

    return get
