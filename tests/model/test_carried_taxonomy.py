"""A model directory carries the taxonomy it was trained with (#17 item 9): a model trained on
the user's own entries loads with ``load_model(DIR)`` alone, checked like the head."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from denpex_ml import load_model, read_logs
from denpex_ml.errors import ModelError, TaxonomyError
from denpex_ml.model.core import DenpexModel
from denpex_ml.model.persistence import TAXONOMY_FILE
from denpex_ml.taxonomy import Taxonomy, load_taxonomy


def _users_model(tiny_model: DenpexModel, out: Path) -> Path:
    """The tiny model re-saved with a taxonomy the package does not ship (one entry's
    fingerprint reworded, as a user's own taxonomy directory would)."""
    doc = json.loads(tiny_model.taxonomy.to_json())
    entry = next(e for e in doc["entries"] if e["id"] == "cuda-oom")
    entry["fingerprints"][0]["pattern"] = "MY CLUSTER SAYS: GPU memory exhausted"
    entry["fingerprints"][0]["kind"] = "literal"
    own = Taxonomy.from_json(json.dumps(doc))
    model = DenpexModel(
        taxonomy=own,
        encoder=tiny_model.encoder,
        head=tiny_model.head,
        labels=tiny_model.labels,
        abstain_threshold=tiny_model.abstain_threshold,
        manifest=dict(tiny_model.manifest),
    )
    return model.save(out)


def test_taxonomy_json_round_trip_keeps_the_fingerprint_hash() -> None:
    tax = load_taxonomy()
    again = Taxonomy.from_json(tax.to_json())
    assert again.fingerprint_hash() == tax.fingerprint_hash()
    assert again.ids == tax.ids


def test_a_model_on_the_users_own_taxonomy_loads_from_its_directory_alone(
    tiny_model: DenpexModel, tmp_path: Path
) -> None:
    d = _users_model(tiny_model, tmp_path / "mine")
    assert (d / TAXONOMY_FILE).is_file()
    assert TAXONOMY_FILE in json.loads((d / "manifest.json").read_text())["files"]
    m = load_model(d)
    assert m.taxonomy.fingerprint_hash() != load_taxonomy().fingerprint_hash()
    assert m.taxonomy.get("cuda-oom").fingerprints[0].pattern == "MY CLUSTER SAYS: GPU memory exhausted"
    bundle = read_logs(text="[rank2]: MY CLUSTER SAYS: GPU memory exhausted\n")
    assert {h.entry_id for h in m.matcher.scan(bundle.iter_lines())} == {"cuda-oom"}


def test_the_bundled_taxonomy_is_used_when_it_is_the_one_the_model_was_trained_on(tiny_model_dir: Path) -> None:
    m = load_model(tiny_model_dir)
    assert m.taxonomy.fingerprint_hash() == load_taxonomy().fingerprint_hash()
    assert m.taxonomy.sources  # read from the YAML files, not the carried copy


def test_a_modified_carried_taxonomy_is_refused(tiny_model: DenpexModel, tmp_path: Path) -> None:
    d = _users_model(tiny_model, tmp_path / "mine")
    path = d / TAXONOMY_FILE
    path.write_text(path.read_text().replace("MY CLUSTER SAYS", "SOMEONE ELSE SAYS"))
    with pytest.raises(ModelError, match="checksum"):
        load_model(d)


def test_a_model_without_its_taxonomy_names_the_mismatch(tiny_model: DenpexModel, tmp_path: Path) -> None:
    d = _users_model(tiny_model, tmp_path / "mine")
    bare = tmp_path / "bare"
    shutil.copytree(d, bare)
    manifest = json.loads((bare / "manifest.json").read_text())
    del manifest["files"][TAXONOMY_FILE]
    (bare / "manifest.json").write_text(json.dumps(manifest))
    (bare / TAXONOMY_FILE).unlink()
    with pytest.raises(ModelError, match="taxonomy"):
        load_model(bare)


def test_broken_taxonomy_json_is_a_taxonomy_error_naming_the_field() -> None:
    doc = json.loads(load_taxonomy().to_json())
    doc["entries"][0]["fingerprints"][0]["role"] = "whatever"
    with pytest.raises(TaxonomyError, match="entry 0: field fingerprints"):
        Taxonomy.from_json(json.dumps(doc))
