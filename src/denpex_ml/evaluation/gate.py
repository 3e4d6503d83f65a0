"""The regression gate: the shipped model must keep the figures recorded for it.

A full ``denpex-ml eval --write-reference`` stores, next to the model
(``eval_reference.json``), the model's and the baselines' figures on a small deterministic
subset (``gate_synthetic``: the first :data:`~.datasets.GATE_PER_CLASS` test incidents per
class; ``gate_oot``: the out-of-taxonomy rows among them + real ``unknown`` logs). The test
suite re-evaluates only that subset (seconds) and fails when a figure drops by more than
:data:`TOLERANCE` (absolute), or when the model no longer beats the rule baseline (scored
live on the subset) and the TF-IDF baseline (on the full synthetic test split, as recorded:
the two are within about a point of each other, too close to rank on ~100 jobs).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from denpex_ml.evaluation.datasets import GATE_PER_CLASS

if TYPE_CHECKING:
    from denpex_ml.evaluation.result import EvalConfig, EvalResult

__all__ = [
    "GATE_METRICS",
    "REFERENCE_FILE",
    "TOLERANCE",
    "check_gate",
    "gate_config",
    "reference_from",
    "write_reference",
]

REFERENCE_FILE = "eval_reference.json"
#: Largest allowed absolute drop of a gated figure.
TOLERANCE = 0.03
#: Gated figures: reference data set -> (data set of the fast run, metrics).
GATE_METRICS: dict[str, tuple[str, tuple[str, ...]]] = {
    "gate_synthetic": ("synthetic_test", ("top1", "top3", "macro_f1")),
    "gate_oot": ("out_of_taxonomy", ("unknown_recall",)),
}


def reference_from(result: EvalResult) -> dict[str, Any]:
    """The reference figures of a full evaluation run (gate subset + headline figures)."""
    m = result.metrics
    gate = {k: v for k, v in m.items() if k.split("/", 1)[0] in GATE_METRICS}
    headline = {
        k: v
        for k, v in m.items()
        if k.split("/", 1)[0] not in GATE_METRICS
        and k.rsplit("/", 1)[-1] in ("top1", "macro_f1", "unknown_recall", "ece")
    }
    return {
        "model_files_hash": result.model["files_hash"],
        "tolerance": TOLERANCE,
        "gate_per_class": GATE_PER_CLASS,
        "seed": result.model["config"].get("seed"),
        "gate": {k: round(v, 6) for k, v in sorted(gate.items()) if v == v},
        "full": {k: round(v, 6) for k, v in sorted(headline.items()) if v == v},
        "data_hashes": {k: d["hash"] for k, d in result.data.items()},
        "written_by": "denpex-ml eval --write-reference",
    }


def write_reference(result: EvalResult, model_dir: str | Path) -> Path:
    path = Path(model_dir) / REFERENCE_FILE
    path.write_text(json.dumps(reference_from(result), indent=1) + "\n", encoding="utf-8")
    return path


def gate_config(model_dir: str | None = None) -> EvalConfig:
    """The fast re-evaluation the gate runs (no real-data CV, rule baseline only)."""
    from denpex_ml.evaluation.run import EvalConfig

    return EvalConfig(model_dir=model_dir, per_class_test=GATE_PER_CLASS, real_cv=False, baselines=("rule",))


def check_gate(result: EvalResult, reference: dict[str, Any]) -> list[str]:
    """Failures of a fast gate run against the reference (empty when it passes)."""
    fails: list[str] = []
    if result.model["files_hash"] != reference["model_files_hash"]:
        return [
            f"model files hash {result.model['files_hash']} differs from the reference's "
            f"{reference['model_files_hash']}: rerun `denpex-ml eval --write-reference` for the new model"
        ]
    tol = float(reference.get("tolerance", TOLERANCE))
    m, ref = result.metrics, reference["gate"]
    for ref_set, (fast_set, names) in GATE_METRICS.items():
        for name in names:
            want = ref.get(f"{ref_set}/{name}")
            got = m.get(f"{fast_set}/{name}")
            if want is None:
                continue
            if got is None or got < want - tol:
                fails.append(f"{ref_set}/{name}: {got} < reference {want} - tolerance {tol}")
    f1 = m.get("synthetic_test/macro_f1", float("nan"))
    rule = m.get("synthetic_test/rule/macro_f1")
    if rule is not None and not f1 > rule:
        fails.append(f"macro-F1 {f1:.3f} does not beat the rule baseline's {rule:.3f}")
    # TF-IDF is close to the model on synthetic data: ranking the two needs the full test split
    # (1,000+ jobs), not the gate's ~100, so the check uses the figures of the full evaluation
    full = reference.get("full", {})
    model_full, tfidf_full = full.get("synthetic_test/macro_f1"), full.get("synthetic_test/tfidf/macro_f1")
    if model_full is not None and tfidf_full is not None and not model_full > tfidf_full:
        fails.append(
            f"full synthetic test: macro-F1 {model_full:.3f} does not beat the TF-IDF baseline's {tfidf_full:.3f}"
        )
    return fails
