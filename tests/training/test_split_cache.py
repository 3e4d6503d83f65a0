"""training/cache.py's SplitStore: generated synthetic splits read back instead of drawn again."""

from __future__ import annotations

from pathlib import Path

from denpex_ml.taxonomy import load_taxonomy
from denpex_ml.training.cache import SplitStore, generator_signature
from denpex_ml.training.data import build_data


def test_cached_splits_are_the_generated_ones(tmp_path: Path) -> None:
    tax = load_taxonomy()
    fresh = build_data(taxonomy=tax, seed=3, per_class=(1, 1, 1), real_data=None)
    first = build_data(taxonomy=tax, seed=3, per_class=(1, 1, 1), real_data=None, cache_dir=tmp_path)
    files = list((tmp_path / "synthetic").glob("*.json"))
    assert len(files) == 1
    again = build_data(taxonomy=tax, seed=3, per_class=(1, 1, 1), real_data=None, cache_dir=tmp_path)
    for name in ("train", "val", "test"):
        assert [(e.id, e.label, e.source) for e in first[name]] == [(e.id, e.label, e.source) for e in fresh[name]]
        assert [(e.id, e.label, e.source, e.meta) for e in again[name]] == [
            (e.id, e.label, e.source, e.meta) for e in fresh[name]
        ]


def test_the_signature_follows_sizes_seed_and_taxonomy(tmp_path: Path) -> None:
    tax = load_taxonomy()
    base = generator_signature(tax, (1, 1, 1), 3)
    assert generator_signature(tax, (1, 1, 1), 3) == base
    assert generator_signature(tax, (2, 1, 1), 3) != base
    assert generator_signature(tax, (1, 1, 1), 4) != base
    extra = Path(__file__).resolve().parents[1] / "fixtures" / "new_class" / "taxonomy"
    assert generator_signature(load_taxonomy([extra]), (1, 1, 1), 3) != base


def test_a_damaged_cache_file_is_drawn_again(tmp_path: Path) -> None:
    tax = load_taxonomy()
    store = SplitStore(tmp_path, generator_signature(tax, (1, 0, 0), 3))
    store.path.parent.mkdir(parents=True)
    store.path.write_text('{"train": [1, 2]', encoding="utf-8")
    assert store.load() is None
    data = build_data(taxonomy=tax, seed=3, per_class=(1, 0, 0), real_data=None, cache_dir=tmp_path)
    assert data["train"] and store.load() is not None
