"""training/cache.py's FeatureStore: feature rows and texts of featurised jobs, kept between trainings."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from denpex_ml.training.cache import FeatureStore

TEXTS = ["plain line\nsecond", "ünïcödé ✓ 日本", "", "lone surrogate \udcff kept", "x" * 5000]


def _filled(root: Path) -> FeatureStore:
    store = FeatureStore(root, "sig", 3)
    for i, text in enumerate(TEXTS):
        store.put(f"k{i}", np.full(3, i, dtype=np.float32), text)
    store.save()
    return store


def test_rows_and_texts_come_back_from_disk_as_put(tmp_path: Path) -> None:
    _filled(tmp_path)
    again = FeatureStore(tmp_path, "sig", 3)
    assert len(again) == len(TEXTS)
    for i, text in enumerate(TEXTS):
        hit = again.get(f"k{i}")
        assert hit is not None
        np.testing.assert_array_equal(hit[0], np.full(3, i, dtype=np.float32))
        assert hit[1] == text
    assert again.get("missing") is None and (again.hits, again.misses) == (len(TEXTS), 1)


def test_a_cache_of_the_older_layout_is_read_and_rewritten(tmp_path: Path) -> None:
    d = tmp_path / "features" / "sig"
    d.mkdir(parents=True)
    np.save(d / "X.npy", np.arange(6, dtype=np.float32).reshape(2, 3))
    (d / "keys.json").write_text(json.dumps(["a", "b"]))
    (d / "texts.jsonl").write_text("".join(json.dumps(t) + "\n" for t in ["one", "twö"]), encoding="utf-8")
    store = FeatureStore(tmp_path, "sig", 3)
    assert store.get("b") is not None and store.get("b")[1] == "twö"  # type: ignore[index]
    store.save()
    assert not (d / "texts.jsonl").exists() and (d / "texts.bin").exists()
    assert FeatureStore(tmp_path, "sig", 3).get("a")[1] == "one"  # type: ignore[index]


def test_text_ends_that_do_not_fit_the_texts_leave_the_cache_empty(tmp_path: Path) -> None:
    _filled(tmp_path)
    ends = tmp_path / "features" / "sig" / "text_ends.npy"
    for wrong in ([3, 2, 99], [1, 2, 3, 4, 5]):  # not increasing; one end per text but short of the file
        np.save(ends, np.array(wrong, dtype=np.int64))
        assert len(FeatureStore(tmp_path, "sig", 3)) == 0
