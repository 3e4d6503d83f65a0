"""Retraining on new incidents: cached features, the promotion gate, promotion, lineage."""

from __future__ import annotations

import json
import logging
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from denpex_ml.cli import main
from denpex_ml.cli.console import EXIT_GATE_FAILED, EXIT_OK
from denpex_ml.errors import InvalidInputError
from denpex_ml.incidents import IncidentStore
from denpex_ml.model.core import load_model
from denpex_ml.training import TrainConfig, retrain, train
from denpex_ml.training.cache import FeatureStore
from denpex_ml.training.promotion import GateReport, class_rows, compare_models


@pytest.fixture(scope="module")
def base_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("retrain") / "base"
    cfg = TrainConfig(
        per_class_train=4,
        per_class_val=2,
        per_class_test=6,
        cv_folds=2,
        head_folds=2,
        encoder="hashing:64",
        seed=5,
        real_data=None,
    )
    train(cfg, out=out)
    return out


def _oom_incidents(path: Path, n: int = 5, label: str = "cuda-oom") -> Path:
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            log = f"[rank{i}]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {i + 1}.00 GiB\n[rank0]: step {i}\n"
            fh.write(json.dumps({"id": f"u{i}", "label": label, "log": log, "source": f"local:u{i}"}) + "\n")
    return path


def _cache_counts(caplog: pytest.LogCaptureFixture) -> tuple[int, int]:
    """(hits, misses) of the feature cache in the last training logged."""
    (msg,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("feature cache:")][-1:]
    m = re.match(r"feature cache: (\d+) hits, (\d+) misses", msg)
    assert m, msg
    caplog.clear()
    return int(m.group(1)), int(m.group(2))


def test_retrain_writes_model_gate_and_lineage_and_reuses_the_cache(
    base_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="denpex_ml.training.trainer")
    inc = _oom_incidents(tmp_path / "inc.jsonl")
    cache = tmp_path / "cache"
    first = retrain(
        base_dir, [inc], out=tmp_path / "v2", cache_dir=cache, track=False, tolerance=0.5, class_tolerance=0.9
    )
    hits, misses = _cache_counts(caplog)
    assert hits == 0 and misses > 100  # a cold cache: every example featurised
    assert first.gate.passed and not first.promoted  # passing, but nowhere to promote to
    for name in ("manifest.json", "head.npz", "gate.json", "gate.md", "lineage.json"):
        assert (first.model_dir / name).exists()
    lineage = json.loads((first.model_dir / "lineage.json").read_text())
    assert lineage["base"]["dir"] == str(base_dir) and str(inc) in lineage["incidents"]
    model = load_model(first.model_dir)
    assert model.manifest["training_counts"]["user"] == 5
    # the second retrain featurises nothing again: every example comes from the cache
    stores = list((cache / "features").iterdir())
    assert len(stores) == 1 and len(FeatureStore(cache, stores[0].name, model.featurizer.n_base_features)) > 100
    second = retrain(
        base_dir, [inc], out=tmp_path / "v3", cache_dir=cache, track=False, tolerance=0.5, class_tolerance=0.9
    )
    # what the cache did, not how long it took (wall-clock time depends on the machine's load)
    assert _cache_counts(caplog) == (misses, 0)  # warm: every example read back, none featurised again
    assert second.train.model.manifest["training_data_hash"] == first.train.model.manifest["training_data_hash"]


def test_relabel_and_remove_in_the_store_change_the_next_retrain(base_dir: Path, tmp_path: Path) -> None:
    store = IncidentStore(tmp_path / "store")
    a = store.add(
        {"rank0.log": "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB\n"},
        label="cuda-oom",
    )
    store.add({"rank1.log": "[rank1]: ModuleNotFoundError: No module named 'apex'\n"}, label="missing-module")
    kw = {"cache_dir": tmp_path / "cache", "track": False, "tolerance": 0.5, "class_tolerance": 0.9}
    r1 = retrain(base_dir, [tmp_path / "store"], out=tmp_path / "m1", **kw)  # type: ignore[arg-type]
    store.relabel(a.id, "host-oom")
    r2 = retrain(base_dir, [tmp_path / "store"], out=tmp_path / "m2", **kw)  # type: ignore[arg-type]
    assert r1.lineage["incidents"] != r2.lineage["incidents"]
    assert r1.train.model.manifest["training_data_hash"] != r2.train.model.manifest["training_data_hash"]
    store.remove(a.id)
    r3 = retrain(base_dir, [tmp_path / "store"], out=tmp_path / "m3", **kw)  # type: ignore[arg-type]
    assert r3.train.model.manifest["training_counts"]["user"] == 1


def test_gate_failure_exits_4_and_names_the_regressions(
    base_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # wrongly labelled incidents (CUDA OOM logs labelled host-oom) must not get through
    inc = _oom_incidents(tmp_path / "inc.jsonl", n=12, label="host-oom")
    args = [
        "retrain",
        "--base",
        str(base_dir),
        "--incidents",
        str(inc),
        "--out",
        str(tmp_path / "cand"),
        "--cache",
        str(tmp_path / "cache"),
        "--no-track",
        "--promote-to",
        str(tmp_path / "active"),
    ]
    holdout = _oom_incidents(tmp_path / "holdout.jsonl", n=6)  # correctly labelled
    assert main([*args, "--holdout", str(holdout)]) == EXIT_GATE_FAILED  # default tolerances, a promotion asked for
    gate = json.loads((tmp_path / "cand" / "gate.json").read_text())
    assert gate["regressions"] and not gate["passed"] and not (tmp_path / "active").exists()
    # the held-out OOM logs, correctly labelled, expose the candidate's mislabelled lesson
    assert any(r.startswith("holdout: class cuda-oom F1 ") for r in gate["regressions"]), gate["regressions"]
    assert "Regressions" in (tmp_path / "cand" / "gate.md").read_text()
    out, err = capsys.readouterr()
    assert "Regressions" in out and "NOT promoted" in err
    assert "regressed: " in err and all(f"class {c} " in err for c in gate["regressed_classes"])
    # no promotion asked for: the candidate is written, the gate's verdict printed, exit 0 (the same
    # holdout, whose regression does not hang on how the small base model reads its synthetic split)
    assert main([*args[:6], str(tmp_path / "cand-np"), *args[7:-2], "--holdout", str(holdout)]) == EXIT_OK
    err = capsys.readouterr().err
    assert "gate FAILED" in err and "no promotion asked for" in err and "regressed: " in err
    if gate["regressed_classes"]:
        assert "classes that regressed: " in err
    # a tolerant gate passes and promotes; promoting again keeps the previous model
    assert (
        main([*args[:6], str(tmp_path / "cand2"), *args[7:], "--tolerance", "0.9", "--class-tolerance", "0.99"])
        == EXIT_OK
    )
    assert (tmp_path / "active" / "manifest.json").exists()
    assert (
        main([*args[:6], str(tmp_path / "cand3"), *args[7:], "--tolerance", "0.9", "--class-tolerance", "0.99"])
        == EXIT_OK
    )
    assert (tmp_path / "active.prev" / "manifest.json").exists()


def test_class_regressions_respect_tolerance_and_support() -> None:
    report = GateReport(passed=False, tolerance=0.01, class_tolerance=0.05, min_support=5)
    base = {"a": {"f1": 0.9, "support": 10}, "b": {"f1": 0.9, "support": 3}, "c": {"f1": 0.8, "support": 10}}
    cand = {
        "a": {"f1": 0.8, "support": 10},
        "b": {"f1": 0.1, "support": 3},
        "c": {"f1": 0.78, "support": 10},
        "new": {"f1": 0.9, "support": 6},
    }
    class_rows(report, "set", base, cand, new_labels={"new"})
    assert len(report.regressions) == 1 and "class a " in report.regressions[0]  # b: too few rows, c: within tolerance
    rows = {r["label"]: r for r in report.per_class["set"]}
    assert rows["new"]["new"] and rows["new"]["f1_base"] == 0.0


def test_bad_arguments_are_typed_errors(base_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="do not exist"):
        retrain(base_dir, [tmp_path / "missing.jsonl"], out=tmp_path / "x", track=False)
    with pytest.raises(InvalidInputError, match="differ"):
        retrain(base_dir, [_oom_incidents(tmp_path / "i.jsonl")], out=base_dir, track=False)


def _with_real_figures(model_dir: Path, dest: Path, macro_f1: float, class_f1: float) -> Path:
    """A copy of ``model_dir`` whose manifest records grouped-CV figures on real incidents (as
    a training run with ``real_data`` writes them), with its per-class table."""
    shutil.copytree(model_dir, dest)
    real = dest.parent / "real.jsonl"
    if not real.exists():
        _oom_incidents(real)
    mf = json.loads((dest / "manifest.json").read_text())
    mf["config"]["real_data"] = str(real)
    mf["metrics"].update({"real/macro_f1": macro_f1, "real/top1": macro_f1 + 0.05, "real/n": 40.0})
    (dest / "manifest.json").write_text(json.dumps(mf))
    per_class: dict[str, Any] = {}
    if (dest / "per_class.json").exists():
        per_class = json.loads((dest / "per_class.json").read_text())
    per_class["real"] = [
        {"label": "cuda-oom", "precision": class_f1, "recall": class_f1, "f1": class_f1, "support": 20},
        {"label": "host-oom", "precision": 0.9, "recall": 0.9, "f1": 0.9, "support": 20},
    ]
    (dest / "per_class.json").write_text(json.dumps(per_class))
    return dest


def test_gate_compares_real_incidents_recorded_at_training(base_dir: Path, tmp_path: Path) -> None:
    base = _with_real_figures(base_dir, tmp_path / "base", macro_f1=0.8, class_f1=0.9)
    same = _with_real_figures(base_dir, tmp_path / "same", macro_f1=0.8, class_f1=0.9)
    worse = _with_real_figures(base_dir, tmp_path / "worse", macro_f1=0.7, class_f1=0.6)

    ok = compare_models(base, same)
    assert ok.passed, ok.regressions
    assert {(r["set"], r["figure"]) for r in ok.overall} >= {("real_cv", "macro_f1"), ("real_cv", "top1")}

    bad = compare_models(base, worse)
    assert not bad.passed
    assert any(r.startswith("real_cv: macro_f1 0.800 -> 0.700") for r in bad.regressions), bad.regressions
    assert any(r.startswith("real_cv: class cuda-oom F1 0.900 -> 0.600") for r in bad.regressions)
    assert bad.regressed_classes == ["cuda-oom"]
    # everything else is identical: the real incidents are the only reason it fails
    assert all(r.startswith("real_cv: ") for r in bad.regressions)


def test_gate_scores_holdout_incidents_with_both_models(base_dir: Path, tmp_path: Path) -> None:
    cand = tmp_path / "cand"
    shutil.copytree(base_dir, cand)
    holdout = _oom_incidents(tmp_path / "holdout.jsonl", n=6)
    report = compare_models(base_dir, cand, holdout=[holdout])
    assert report.passed
    rows = {r["label"]: r for r in report.per_class["holdout"]}
    assert rows["cuda-oom"]["support"] == 6 and rows["cuda-oom"]["delta"] == 0.0
    assert {r["figure"] for r in report.overall if r["set"] == "holdout"} == {"macro_f1", "top1"}
    assert "holdout" not in compare_models(base_dir, cand).per_class


def test_a_class_without_fingerprints_is_learned_from_incidents_and_its_model_loads_alone(
    base_dir: Path, tmp_path: Path
) -> None:
    import yaml

    from denpex_ml.taxonomy import load_taxonomy

    src = Path(__file__).resolve().parents[1] / "fixtures" / "new_class" / "taxonomy" / "hf-hub-rate-limit.yaml"
    entry = yaml.safe_load(src.read_text(encoding="utf-8"))
    entry.pop("fingerprints")  # a user with labelled incidents and no regex
    tax = tmp_path / "my-taxonomy"
    tax.mkdir()
    (tax / "hf-hub-rate-limit.yaml").write_text(yaml.safe_dump(entry), encoding="utf-8")
    assert load_taxonomy([tax]).get("hf-hub-rate-limit").fingerprints == []
    inc = tmp_path / "inc.jsonl"
    with inc.open("w", encoding="utf-8") as fh:
        for i in range(6):
            log = (
                f"[rank{i}]: huggingface_hub.errors.HfHubHTTPError: 429 Client Error: Too Many Requests for url: "
                f"https://huggingface.co/org/model-{i}/resolve/main/config.json\n[rank0]: step {i}\n"
            )
            fh.write(json.dumps({"id": f"h{i}", "label": "hf-hub-rate-limit", "log": log, "source": f"local:h{i}"}))
            fh.write("\n")
    result = retrain(
        base_dir, [inc], out=tmp_path / "v2", taxonomy_dirs=[tax], track=False, tolerance=0.5, class_tolerance=0.9
    )
    model = load_model(result.model_dir)  # the directory alone: it carries its taxonomy
    assert "hf-hub-rate-limit" in model.labels
    assert model.taxonomy.get("hf-hub-rate-limit").fingerprints == []
