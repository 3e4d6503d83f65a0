"""The regression gate on the shipped model (fast subset; see denpex_ml.evaluation.gate)."""

from __future__ import annotations

import json

import pytest

from denpex_ml.evaluation import evaluate
from denpex_ml.evaluation.gate import REFERENCE_FILE, check_gate, gate_config
from denpex_ml.model.persistence import models_root

REFERENCE = models_root() / "default" / REFERENCE_FILE


@pytest.mark.skipif(not REFERENCE.exists(), reason="no gate reference committed with the shipped model")
def test_shipped_model_keeps_its_recorded_figures() -> None:
    reference = json.loads(REFERENCE.read_text(encoding="utf-8"))
    result = evaluate(gate_config())
    assert check_gate(result, reference) == []
