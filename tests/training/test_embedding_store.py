"""training/cache.py's EmbeddingStore: template embeddings saved beside the feature cache, and
rewritten only when the encoder's cache holds something the file lacks."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from denpex_ml.embedding import CachedEncoder, HashingEncoder
from denpex_ml.training.cache import EmbeddingStore


def _store_and_encoder(root: Path) -> tuple[EmbeddingStore, CachedEncoder]:
    encoder = CachedEncoder(HashingEncoder(16))
    return EmbeddingStore(root, encoder.name), encoder


def test_a_warm_cache_that_embedded_nothing_new_is_not_rewritten(tmp_path: Path) -> None:
    store, enc = _store_and_encoder(tmp_path)
    enc.encode(["NCCL WARN <*>", "step <*> loss <*>"])
    store.save_from(enc)
    first = store.path.stat().st_mtime_ns
    store2, enc2 = _store_and_encoder(tmp_path)
    assert store2.load_into(enc2) == 2
    enc2.encode(["step <*> loss <*>"])  # already cached: nothing new
    store2.path.touch()
    os_time = store2.path.stat().st_mtime_ns
    store2.save_from(enc2)
    assert store2.path.stat().st_mtime_ns == os_time >= first


def test_a_new_template_or_a_preloaded_one_is_written(tmp_path: Path) -> None:
    store, enc = _store_and_encoder(tmp_path)
    enc.encode(["a <*>"])
    store.save_from(enc)
    store2, enc2 = _store_and_encoder(tmp_path)
    store2.load_into(enc2)
    enc2.encode(["b <*>"])
    enc2.preload([("c <*>", np.ones(16, dtype=np.float32))])  # what a featurising worker embedded
    store2.save_from(enc2)
    store3, enc3 = _store_and_encoder(tmp_path)
    assert store3.load_into(enc3) == 3
    assert {t for t, _ in enc3.items()} == {"a <*>", "b <*>", "c <*>"}


def test_an_encoder_filled_before_loading_is_saved(tmp_path: Path) -> None:
    store, enc = _store_and_encoder(tmp_path)
    enc.encode(["a <*>"])
    store.save_from(enc)
    store2, enc2 = _store_and_encoder(tmp_path)
    enc2.encode(["z <*>"])  # cached before the file was read: the file lacks it
    store2.load_into(enc2)
    store2.save_from(enc2)
    store3, enc3 = _store_and_encoder(tmp_path)
    assert store3.load_into(enc3) == 2


def test_texts_round_trip_whatever_their_length_or_characters(tmp_path: Path) -> None:
    texts = ["", "x" * 5000, "ünïcode ✓ <*>", "trailing nul\x00", "tab\tand\nnewline", "lone \udc80 surrogate"]
    store, enc = _store_and_encoder(tmp_path)
    enc.encode(texts)
    store.save_from(enc)
    assert store.path.stat().st_size < 200_000  # not padded to the longest text per row
    store2, enc2 = _store_and_encoder(tmp_path)
    assert store2.load_into(enc2) == len(texts)
    assert dict(enc2.items()).keys() == dict(enc.items()).keys()
    np.testing.assert_array_equal(enc2.encode(texts), enc.encode(texts))


def test_a_file_of_the_older_fixed_width_layout_still_loads(tmp_path: Path) -> None:
    store, enc = _store_and_encoder(tmp_path)
    store.path.parent.mkdir(parents=True)
    vecs = np.arange(32, dtype=np.float32).reshape(2, 16)
    np.savez(store.path, texts=np.asarray(["a <*>", "b <*>"], dtype=str), vectors=vecs)
    assert store.load_into(enc) == 2
    np.testing.assert_array_equal(enc.encode(["b <*>"])[0], vecs[1])
    assert enc.calls == 0
    store.save_from(enc)  # rewritten in the current layout
    with np.load(store.path) as z:
        assert "text_utf8" in z.files


def test_a_second_training_setup_on_the_same_cache_rewrites_nothing(tmp_path: Path) -> None:
    """The trainer reads the file before the featurizer embeds its line bank: otherwise those
    lines count as new and every warm retrain rewrote the whole file."""
    from denpex_ml.training.config import TrainConfig
    from denpex_ml.training.trainer import _setup

    cfg = TrainConfig(encoder="hashing:64")
    first = _setup(cfg, tmp_path)
    assert first.emb_store is not None
    first.emb_store.save_from(first.encoder)
    written = first.emb_store.path.stat().st_mtime_ns
    again = _setup(cfg, tmp_path)
    assert again.emb_store is not None
    again.emb_store.path.touch()
    touched = again.emb_store.path.stat().st_mtime_ns
    again.emb_store.save_from(again.encoder)
    assert again.emb_store.path.stat().st_mtime_ns == touched >= written
