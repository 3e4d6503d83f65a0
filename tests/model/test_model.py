"""End to end: train (tiny, hashing encoder) -> save -> load -> classify; persistence checks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from denpex_ml import Diagnosis, ModelError, classify
from denpex_ml.errors import NotALogError
from denpex_ml.model.core import DenpexModel, load_model
from denpex_ml.model.diagnosis import Alternative
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
    assert d.label == "cuda-oom" and d.best_guess == "cuda-oom" and not d.abstained
    assert d.confidence == d.alternatives[0][1] >= tiny_model.abstain_threshold
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


def test_a_log_without_any_failure_evidence_is_no_failure(tiny_model: DenpexModel) -> None:
    d = tiny_model.classify(text="hello world\njust a line\nstep 10 loss 2.31\n")
    assert d.label == "no-failure" and d.no_failure and not d.abstained
    assert d.initiating_rank is None
    assert d.to_dict()["no_failure"] is True


@pytest.mark.parametrize("text", ["", "\n\n   \n"])
def test_empty_input_is_not_a_log(tiny_model: DenpexModel, text: str) -> None:
    with pytest.raises(NotALogError, match="no log lines"):
        tiny_model.classify(text=text)


def test_hang_report_and_advice_reach_the_diagnosis(tiny_model: DenpexModel) -> None:
    wd = (
        "[rank{r}]:[E1201 10:00:00.0 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum={s}, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600042 "
        "milliseconds before timing out."
    )
    d = tiny_model.classify(text="\n".join(wd.format(r=r, s=9 if r else 11) for r in range(4)))
    assert d.hang is not None and d.hang.is_hang
    assert d.hang.suspects == (0,)
    out = d.to_dict()
    assert out["hang"]["suspects"] == [0] and out["hang"]["ranks"][0]["rank"] == 0
    assert "Hang in phase" in d.summary()


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


def _pickled_copy(model_dir: Path, dest: Path) -> Path:
    """``model_dir`` copied with one head array (``temperature``) stored as Python objects
    (a pickle) and the manifest's checksum updated: the only thing wrong with it is the pickle."""
    from denpex_ml.model.persistence import sha256_file

    shutil.copytree(model_dir, dest)
    with np.load(model_dir / "head.npz") as npz:
        arrays = {k: npz[k] for k in npz.files}
    arrays["temperature"] = np.array([float(arrays["temperature"][0])], dtype=object)
    np.savez(dest / "head.npz", **arrays)
    mf = json.loads((dest / "manifest.json").read_text())
    mf["files"]["head.npz"] = sha256_file(dest / "head.npz")
    (dest / "manifest.json").write_text(json.dumps(mf))
    return dest


def test_npz_is_loaded_without_pickle(tiny_model_dir: Path, tmp_path: Path) -> None:
    bad = _pickled_copy(tiny_model_dir, tmp_path / "pickled")
    with pytest.raises(ModelError, match=r"array temperature holds Python objects \(a pickle\); refused"):
        load_model(bad)


def test_arrays_are_read_with_pickle_disabled(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second line of defence: even past the header check, numpy may not unpickle."""
    calls: list[object] = []
    real_load = np.load

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs.get("allow_pickle", False))
        return real_load(*args, **kwargs)

    monkeypatch.setattr(np, "load", spy)
    load_model(tiny_model_dir)
    assert calls and all(allowed is False for allowed in calls)


def test_a_confidence_map_restates_the_answer_and_its_alternatives(tiny_model_dir: Path, tmp_path: Path) -> None:
    plain = load_model(tiny_model_dir).classify(text=OOM)
    shrunk_dir = tmp_path / "shrunk"
    shutil.copytree(tiny_model_dir, shrunk_dir)
    mf = json.loads((shrunk_dir / "manifest.json").read_text())
    assert mf["confidence_map"] == [1.0, 0.0]  # the tiny model was trained without one
    mf["confidence_map"] = [0.5, -0.2]
    (shrunk_dir / "manifest.json").write_text(json.dumps(mf))
    shrunk = load_model(shrunk_dir).classify(text=OOM)
    assert shrunk.label == plain.label == "cuda-oom"  # the answer does not change, only how sure it is
    c = min(max(plain.confidence, 1e-6), 1 - 1e-6)
    expected = 1 / (1 + np.exp(-(0.5 * np.log(c / (1 - c)) - 0.2)))
    assert shrunk.confidence == pytest.approx(expected) and shrunk.confidence < plain.confidence
    assert shrunk.alternatives[0] == ("cuda-oom", shrunk.confidence)
    assert [a.label for a in shrunk.alternatives] == [a.label for a in plain.alternatives]
    assert sum(a.probability for a in shrunk.alternatives) <= 1 + 1e-9
    mf["confidence_map"] = [-1.0, 0.0]  # decreasing: refused on load
    (shrunk_dir / "manifest.json").write_text(json.dumps(mf))
    with pytest.raises(ModelError, match="confidence_map"):
        load_model(shrunk_dir)


@pytest.mark.parametrize(("a", "b"), [(0.5, -1.5), (1.5, 0.8)])  # pulls the answer down; pushes it up
def test_a_confidence_map_keeps_the_alternatives_apart_and_in_order(tiny_model_dir: Path, a: float, b: float) -> None:
    # an unsure answer (0.30) pulled down to ~0.13 once scaled the others up and clipped them at the
    # answer's value: three alternatives then read 13% each, and their order was lost
    m = load_model(tiny_model_dir)
    m.confidence_map = (a, b)
    alts = [Alternative("cuda-oom", 0.30), Alternative("host-oom", 0.25), Alternative("file-not-found", 0.20)]
    alts.append(Alternative("missing-module", 0.15))
    new, out = m.recalibrated("cuda-oom", 0.30, alts)
    assert out[0] == ("cuda-oom", new)
    ps = [x.probability for x in out]
    assert ps == sorted(ps, reverse=True) and len(set(ps)) == len(ps)  # strictly in the head's order
    assert ps[1] / ps[2] == pytest.approx(0.25 / 0.20) and ps[2] / ps[3] == pytest.approx(0.20 / 0.15)
    assert sum(ps) <= 1 + 1e-9


def test_recalibrated_alternatives_follow_the_answer_when_its_confidence_was_renormalised(tiny_model_dir: Path) -> None:
    # a Flight Recorder finding renormalises the answer's confidence over the entries it allows
    # (0.43 of the head's mass -> 0.47); the rivals must still read below the stated confidence
    m = load_model(tiny_model_dir)
    m.confidence_map = (0.5, -1.5)
    alts = [Alternative("collective-mismatch", 0.43), Alternative("subset-rank-collective-hang", 0.41)]
    alts.append(Alternative("host-work-timeout", 0.03))
    new, out = m.recalibrated("collective-mismatch", 0.47, alts)
    assert out[0] == ("collective-mismatch", new)
    assert out[1].probability < new and out[2].probability < out[1].probability
    assert out[1].probability / out[2].probability == pytest.approx(0.41 / 0.03)


_GLOO_SIZE = (
    "[rank1]: RuntimeError: [enforce fail at /pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:456]"
    " op.preamble.length <= op.nbytes. 8192 vs 6144. Received data size doesn't match expected size.\n"
)


def test_a_decisive_hang_signal_restricts_the_answer_to_the_entries_declaring_it(tiny_model: DenpexModel) -> None:
    c10d = "/env/site-packages/torch/distributed/distributed_c10d.py"
    recv = (
        "[rank1]: Traceback (most recent call last):\n"
        '[rank1]:   File "/job/stage.py", line 21, in forward_step\n'
        f'[rank1]:   File "{c10d}", line 2799, in recv\n'
    )
    assert tiny_model.classify(text=recv + _GLOO_SIZE).label == "pipeline-p2p-shape-mismatch"
    unshard = (
        "[rank1]: Traceback (most recent call last):\n"
        '[rank1]:   File "/env/site-packages/torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py", line 407,'
        " in unshard\n"
        '[rank1]:   File "/env/site-packages/torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py", line 364,'
        " in foreach_all_gather\n"
    )
    sharded = tiny_model.classify(text=unshard + _GLOO_SIZE)
    assert sharded.label in {"fsdp-divergent-init-hang", "zero3-divergent-forward-hang"}
