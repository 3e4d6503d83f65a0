from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from denpex_ml.baselines import GPUALERT_MAP, ZeroShotBaseline, gpualert_version
from denpex_ml.cli import main
from denpex_ml.errors import InvalidInputError
from denpex_ml.evaluation import EvalConfig, evaluate, run_eval
from denpex_ml.evaluation.datasets import build_pools
from denpex_ml.evaluation.gate import check_gate, reference_from
from denpex_ml.evaluation.measures import coverage_curve, measure
from denpex_ml.taxonomy import load_taxonomy


def test_measure_abstention_and_speed() -> None:
    proba = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.5, 0.5]])
    y = np.array([0, 1, 1, -1])
    pred = np.array([0, 1, -1, -1])
    m = measure(proba, y, pred, ["a", "b"], seconds=np.array([1.0, 1.0, 1.0, 3.0])).metrics
    assert m["top1"] == pytest.approx(2 / 3)
    assert m["unknown_recall"] == 1.0
    assert m["unknown_precision"] == 0.5
    assert m["coverage"] == pytest.approx(2 / 3)
    assert m["seconds_mean"] == 1.5
    assert m["seconds_p95"] > 2.5


def test_coverage_curve_is_monotone_in_coverage() -> None:
    conf = np.linspace(0.05, 0.95, 50)
    pts = coverage_curve(conf, conf > 0.5)
    cov = [p["coverage"] for p in pts]
    assert cov == sorted(cov, reverse=True)
    assert pts[0]["coverage"] == 1.0


def test_zeroshot_picks_nearest_entry() -> None:
    zs = ZeroShotBaseline(np.eye(3))
    assert zs.predict_proba(np.array([[0.1, 0.9, 0.0]])).argmax() == 1


def test_gpualert_mapping_targets_are_taxonomy_ids() -> None:
    ids = set(load_taxonomy().ids)
    assert set(GPUALERT_MAP.values()) <= ids


@pytest.mark.skipif(gpualert_version() is None, reason="gpualert not installed (optional extra)")
def test_gpualert_mapping_covers_its_classes() -> None:
    from gpualert.parse_errors import ERROR_PATTERNS

    from denpex_ml.baselines import GPUAlertBaseline

    assert {lab for _, lab, _ in ERROR_PATTERNS} <= set(GPUALERT_MAP)
    b = GPUAlertBaseline(load_taxonomy().ids)
    assert b.predict_label("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate") == "cuda-oom"
    assert b.predict_label("all good") is None


def test_gate_subset_is_a_prefix_of_the_test_split() -> None:
    tax = load_taxonomy()
    cfg = {"seed": 3, "per_class_test": 5}
    pools, sets = build_pools(cfg, tax, per_class_test=5)
    small, _ = build_pools(cfg, tax, per_class_test=3)
    gate = next(s for s in sets if s.name == "gate_synthetic")
    assert [e.id for e in gate.examples(pools)] == [e.id for e in small["synthetic"].examples]


def test_config_validation() -> None:
    with pytest.raises(InvalidInputError, match="baselines"):
        EvalConfig(baselines=("nope",))


def test_run_eval_writes_report(tiny_model_dir: Path, tmp_path: Path) -> None:
    cfg = EvalConfig(
        model_dir=str(tiny_model_dir), per_class_test=4, real_cv=False, baselines=("rule", "zeroshot", "gpualert")
    )
    result = run_eval(cfg, tmp_path)
    assert {"synthetic_test", "synthetic_heldout", "out_of_taxonomy", "gate_synthetic"} <= set(result.measured)
    assert "real" not in result.measured  # the model trained on it and CV was off
    data = json.loads((tmp_path / "metrics.json").read_text())
    assert data["model"]["path"] == str(tiny_model_dir)
    assert "synthetic_test/top1" in data["metrics"] and "synthetic_test/rule/top1" in data["metrics"]
    assert len(data["confusion"]["synthetic_test"]) == len(data["labels"]) + 1
    md = (tmp_path / "report.md").read_text()
    assert "GPUAlert class mapping" in md and data["data"]["synthetic_test"]["hash"] in md
    assert (tmp_path / "confusion_synthetic_test.png").stat().st_size > 1000
    assert (tmp_path / "reliability_synthetic_test.png").exists()
    assert (tmp_path / "coverage_synthetic_test.png").exists()
    # the real incidents' answers are written, marked as not held out (trained on, no CV here)
    rows = [json.loads(line) for line in (tmp_path / "predictions_real.jsonl").read_text().splitlines()]
    assert rows and not any(r["held_out"] for r in rows)


@pytest.mark.slow
def test_real_cv_and_tfidf(tiny_model_dir: Path) -> None:
    result = evaluate(EvalConfig(model_dir=str(tiny_model_dir), per_class_test=2, baselines=("rule", "tfidf")))
    m = result.metrics
    assert m["real/n"] > 0 and 0 <= m["real/top1"] <= 1
    assert "real/tfidf/top1" in m and "synthetic_test/tfidf/top1" in m
    assert any("GroupKFold" in n for n in result.notes)


def test_ablation_refits_the_head_with_parts_of_its_evidence(tiny_model_dir: Path, tmp_path: Path) -> None:
    from denpex_ml.evaluation.report import render_markdown, write_report
    from denpex_ml.evaluation.run import ABLATIONS

    result = evaluate(EvalConfig(model_dir=str(tiny_model_dir), per_class_test=2, baselines=("rule",), ablation=True))
    names = list(result.ablation)
    assert names[0] == "rules only (fingerprints)" and names[-1] == "+ stage-1 classifier (the model)"
    assert names[1:-1] == [name for name, _ in ABLATIONS]
    assert all(0.0 <= m["top1"] <= m["top3"] <= 1.0 for m in result.ablation.values())
    assert "## Ablation on real logs" in render_markdown(result)
    # the out-of-fold answer of every real incident, one JSON line each
    write_report(result, tmp_path)
    rows = [json.loads(line) for line in (tmp_path / "predictions_real.jsonl").read_text().splitlines()]
    assert len(rows) == int(result.data["real"]["n"]) > 0
    assert all(r["held_out"] for r in rows)  # out of fold
    assert len({r["id"] for r in rows}) == len(rows)
    labels = set(result.labels) | {"unknown"}
    for r in rows:
        assert r["predicted"] in labels and r["rules"] in labels and r["label"] in labels
        assert all(t[0] in labels for t in r["top3"]) and 0.0 <= r["confidence"] <= 1.0
        assert [t[1] for t in r["top3"]] == sorted((t[1] for t in r["top3"]), reverse=True)
        assert r["correct"] == (r["predicted"] == r["label"])
    # the rows are the figures' rows: their share right is the report's accuracy with abstention
    share = sum(r["correct"] for r in rows) / len(rows)
    assert abs(share - result.metrics["real/accuracy_with_abstention"]) < 1e-6
    assert not (tmp_path / "predictions_synthetic_test.jsonl").exists()  # synthetic pools: no per-row file


def test_gate_check_against_own_reference(tiny_model_dir: Path) -> None:
    full = evaluate(EvalConfig(model_dir=str(tiny_model_dir), per_class_test=4, real_cv=False, baselines=("rule",)))
    ref = reference_from(full)
    fast = evaluate(EvalConfig(model_dir=str(tiny_model_dir), per_class_test=3, real_cv=False, baselines=("rule",)))
    for key in ("top1", "macro_f1"):
        assert fast.metrics[f"synthetic_test/{key}"] == pytest.approx(ref["gate"][f"gate_synthetic/{key}"])
    worse = dict(ref, gate={**ref["gate"], "gate_synthetic/top1": 2.0})
    assert any("gate_synthetic/top1" in f for f in check_gate(fast, worse))
    assert "hash" in check_gate(fast, dict(ref, model_files_hash="x"))[0]


def test_cli_eval(tiny_model_dir: Path, tmp_path: Path) -> None:
    rc = main(
        [
            "eval",
            "--model",
            str(tiny_model_dir),
            "--out",
            str(tmp_path),
            "--per-class-test",
            "2",
            "--no-real-cv",
            "--no-track",
        ]
    )
    assert rc == 0
    assert (tmp_path / "report.md").exists()


def test_the_report_says_how_the_model_abstains() -> None:
    from denpex_ml.evaluation.plots import _detector_point
    from denpex_ml.evaluation.report import _abstention_rule

    with_detector = {"abstain_threshold": 0.425, "outside_threshold": 0.35}
    assert "out-of-taxonomy detector's probability reaches 0.35" in _abstention_rule(with_detector)
    assert _abstention_rule({"abstain_threshold": 0.425, "outside_threshold": None}) == "abstention threshold 0.425"
    # the coverage plot marks where the detector's answers put the model, not a point on the threshold curve
    assert _detector_point(with_detector, {"coverage": 0.97, "answered_accuracy": 0.88}) == (0.97, 0.88)
    assert _detector_point({"abstain_threshold": 0.425}, {"coverage": 0.97, "answered_accuracy": 0.88}) is None
