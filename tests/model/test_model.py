"""End to end: train (tiny, hashing encoder) -> save -> load -> classify; persistence checks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from denpex_ml import Diagnosis, ModelError, classify
from denpex_ml.model.core import DenpexModel, load_model
from denpex_ml.model.persistence import read_model_dir

OOM = "[rank0]: step 10 loss 2.0\n[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"


def test_manifest_records_what_users_need(tiny_model_dir: Path) -> None:
    manifest, arrays = read_model_dir(tiny_model_dir)
    for key in (
        "format_version",
        "versions",
        "encoder",
        "taxonomy_hash",
        "labels",
        "training_data_hash",
        "metrics",
        "files",
    ):
        assert key in manifest, key
    assert manifest["encoder"] == "hashing:64"
    assert "stage1_coef" in arrays and arrays["stage1_coef"].dtype == np.float64


def test_classify_returns_a_complete_diagnosis(tiny_model: DenpexModel) -> None:
    d = classify(text=OOM, model=tiny_model)
    assert isinstance(d, Diagnosis)
    assert d.best_guess == "cuda-oom"
    assert 0.0 <= d.confidence <= 1.0
    assert d.alternatives[0][0] == "cuda-oom" and len(d.alternatives) >= 3
    assert d.initiating_rank == 1
    assert any("CUDA out of memory" in ev.text for ev in d.evidence)
    out = d.to_dict()
    json.dumps(out)
    assert out["fix"] and out["confirm"] and out["root_cause"]
    assert "First failing rank: rank 1" in d.summary()


def test_same_data_and_seed_reproduce_predictions(tiny_model_dir: Path, tmp_path: Path) -> None:
    from denpex_ml.training import TrainConfig
    from denpex_ml.training.trainer import train

    cfg = TrainConfig(**json.loads((tiny_model_dir / "manifest.json").read_text())["config"])
    train(cfg, out=tmp_path / "again")
    a = load_model(tiny_model_dir).classify(text=OOM)
    b = load_model(tmp_path / "again").classify(text=OOM)
    assert a.alternatives == b.alternatives


def test_no_evidence_abstains(tiny_model: DenpexModel) -> None:
    d = tiny_model.classify(text="hello world\njust a line\n")
    assert d.label == "unknown" and d.abstained


def test_corrupt_head_is_refused(tiny_model_dir: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    shutil.copytree(tiny_model_dir, bad)
    data = bytearray((bad / "head.npz").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (bad / "head.npz").write_bytes(bytes(data))
    with pytest.raises(ModelError, match="checksum"):
        load_model(bad)


def test_unknown_format_version_is_refused(tiny_model_dir: Path, tmp_path: Path) -> None:
    bad = tmp_path / "future"
    shutil.copytree(tiny_model_dir, bad)
    mf = json.loads((bad / "manifest.json").read_text())
    mf["format_version"] = 99
    (bad / "manifest.json").write_text(json.dumps(mf))
    with pytest.raises(ModelError, match="format_version"):
        load_model(bad)


def test_taxonomy_mismatch_is_refused(tiny_model_dir: Path, tmp_path: Path) -> None:
    bad = tmp_path / "othertax"
    shutil.copytree(tiny_model_dir, bad)
    mf = json.loads((bad / "manifest.json").read_text())
    mf["taxonomy_hash"] = "0" * 16
    (bad / "manifest.json").write_text(json.dumps(mf))
    with pytest.raises(ModelError, match="taxonomy"):
        load_model(bad)


def test_missing_model_dir(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="not a model directory"):
        load_model(tmp_path)


def test_npz_is_loaded_without_pickle(tiny_model_dir: Path, tmp_path: Path) -> None:
    bad = tmp_path / "pickled"
    shutil.copytree(tiny_model_dir, bad)
    np.savez(bad / "head.npz", evil=np.array([object()], dtype=object))
    mf = json.loads((bad / "manifest.json").read_text())
    from denpex_ml.model.persistence import sha256_file

    mf["files"]["head.npz"] = sha256_file(bad / "head.npz")
    (bad / "manifest.json").write_text(json.dumps(mf))
    with pytest.raises(ModelError):
        load_model(bad)
