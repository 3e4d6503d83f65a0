"""The regression gate on the shipped model (fast subset; see denpex_ml.evaluation.gate)."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any, cast

import pytest

from denpex_ml.evaluation import evaluate
from denpex_ml.evaluation.gate import REFERENCE_FILE, TOLERANCE, check_gate, gate_config
from denpex_ml.evaluation.run import EvalResult
from denpex_ml.model.persistence import models_root

REFERENCE = models_root() / "default" / REFERENCE_FILE
shipped = pytest.mark.skipif(not REFERENCE.exists(), reason="no gate reference committed with the shipped model")


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    return cast(dict[str, Any], json.loads(REFERENCE.read_text(encoding="utf-8")))


@pytest.fixture(scope="module")
def gate_run() -> EvalResult:
    return evaluate(gate_config())


@shipped
def test_shipped_model_keeps_its_recorded_figures(gate_run: EvalResult, reference: dict[str, Any]) -> None:
    assert check_gate(gate_run, reference) == []


@shipped
def test_shipped_model_beats_tfidf_on_the_gate_subset_live(gate_run: EvalResult, reference: dict[str, Any]) -> None:
    """The model's macro-F1 measured now, by this code, against TF-IDF's on the same jobs (as
    recorded by the full evaluation: fitting TF-IDF needs the whole training split). A change
    of featurisation, head or decision that loses the model its lead fails here."""
    live = gate_run.metrics["synthetic_test/macro_f1"]
    tfidf = reference["gate"]["gate_synthetic/tfidf/macro_f1"]
    assert gate_run.metrics["synthetic_test/n"] == reference["gate"]["gate_synthetic/n"]  # the same jobs
    assert live > tfidf, f"model macro-F1 {live:.3f} does not beat TF-IDF's {tfidf:.3f} on the gate subset"


# -- check_gate's own rules, on made-up figures ------------------------------------------------------
def _result(**metrics: float) -> EvalResult:
    return cast(EvalResult, SimpleNamespace(model={"files_hash": "h"}, metrics=metrics))


def _reference(**full: float) -> dict[str, Any]:
    return {"model_files_hash": "h", "tolerance": TOLERANCE, "gate": {"gate_synthetic/macro_f1": 0.9}, "full": full}


GOOD = {"synthetic_test/macro_f1": 0.9, "synthetic_test/rule/macro_f1": 0.8}


def test_check_gate_passes_a_model_that_keeps_its_figures_and_beats_both_baselines() -> None:
    ref = _reference(**{"synthetic_test/macro_f1": 0.95, "synthetic_test/tfidf/macro_f1": 0.94})
    assert check_gate(_result(**GOOD), ref) == []


@pytest.mark.parametrize("tfidf", [0.95, 0.96])
def test_check_gate_fails_a_model_that_does_not_beat_tfidf(tfidf: float) -> None:
    ref = _reference(**{"synthetic_test/macro_f1": 0.95, "synthetic_test/tfidf/macro_f1": tfidf})
    (fail,) = check_gate(_result(**GOOD), ref)
    assert "does not beat the TF-IDF baseline" in fail


def test_check_gate_fails_a_model_that_does_not_beat_the_rule_baseline() -> None:
    (fail,) = check_gate(_result(**{**GOOD, "synthetic_test/rule/macro_f1": 0.9}), _reference())
    assert "does not beat the rule baseline" in fail


def test_check_gate_fails_a_figure_that_dropped_beyond_tolerance() -> None:
    dropped = {**GOOD, "synthetic_test/macro_f1": 0.9 - TOLERANCE - 0.01, "synthetic_test/rule/macro_f1": 0.5}
    (fail,) = check_gate(_result(**dropped), _reference())
    assert fail.startswith("gate_synthetic/macro_f1: ")
    within = {**dropped, "synthetic_test/macro_f1": 0.9 - TOLERANCE + 0.01}
    assert check_gate(_result(**within), _reference()) == []


def test_check_gate_refuses_a_reference_written_for_other_model_files() -> None:
    (fail,) = check_gate(_result(**GOOD), {**_reference(), "model_files_hash": "other"})
    assert "differs from the reference" in fail
