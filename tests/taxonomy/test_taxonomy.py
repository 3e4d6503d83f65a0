"""The taxonomy: the label contract, schema validation with clear errors, user overrides."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from denpex_ml.errors import TaxonomyError, UnknownLabelError
from denpex_ml.taxonomy import FingerprintRole, bundled_taxonomy_dir, load_taxonomy

CONTRACT = Path(__file__).resolve().parents[3] / "shared" / "taxonomy-ids.md"
SEEDS = ("moe-ep-overlap-deadlock", "moe-pp-layout-aux-loss-hang", "moe-alltoall-nvlink-domain-timeout")


def contract_ids() -> list[str]:
    if not CONTRACT.is_file():
        pytest.skip("shared/taxonomy-ids.md not present")
    return re.findall(r"^- ([a-z0-9-]+):", CONTRACT.read_text(), flags=re.M)


def test_every_contract_id_is_present() -> None:
    tax = load_taxonomy()
    ids = contract_ids()
    assert len(ids) >= 35
    missing = [i for i in ids if i not in tax]
    assert not missing


def test_entries_are_deep_enough_to_act_on() -> None:
    for entry in load_taxonomy():
        if entry.is_unknown:
            continue
        assert len(entry.fingerprints) >= 4, entry.id
        assert any(fp.role is FingerprintRole.ROOT_CAUSE for fp in entry.fingerprints), entry.id
        assert entry.fix and any(step.commands for step in entry.fix), entry.id
        assert len(entry.confirm) >= 2 and entry.related and entry.references, entry.id


def test_seed_entries_carry_their_documents_signals() -> None:
    tax = load_taxonomy()
    text = {s: yaml.safe_dump(tax.get(s).model_dump(mode="json")) for s in SEEDS}
    assert "NCCL WARN [send] via NET/IB/0/GDRDMA failed" in text["moe-ep-overlap-deadlock"]
    assert "ncclAllGather failed" in text["moe-ep-overlap-deadlock"]
    assert "overlap-moe-expert-parallel-comm" in text["moe-ep-overlap-deadlock"]
    assert "NCCL_DEBUG_SUBSYS=COLL" in text["moe-ep-overlap-deadlock"]
    assert "reduce_aux_losses_tracker_across_ranks" in text["moe-pp-layout-aux-loss-hang"]
    assert "pipeline-model-parallel-layout" in text["moe-pp-layout-aux-loss-hang"]
    assert "dispatch/combine receives time out" in text["moe-alltoall-nvlink-domain-timeout"]


def test_get_unknown_id_suggests_close_matches() -> None:
    with pytest.raises(UnknownLabelError, match="did you mean cuda-oom"):
        load_taxonomy().get("cuda-oon")


def test_search() -> None:
    assert load_taxonomy().search("xid 79 fallen off the bus")[0].id == "gpu-fallen-off-bus"


def _copy_bundled(tmp_path: Path) -> Path:
    d = tmp_path / "tax"
    shutil.copytree(bundled_taxonomy_dir(), d)
    return d


def test_bad_file_names_file_field_and_expectation(tmp_path: Path) -> None:
    d = _copy_bundled(tmp_path)
    raw = yaml.safe_load((d / "cuda-oom.yaml").read_text())
    raw["fingerprints"][0]["role"] = "cause"
    (d / "cuda-oom.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(TaxonomyError) as exc:
        load_taxonomy([d], include_bundled=False)
    msg = str(exc.value)
    assert "cuda-oom.yaml" in msg and "fingerprints.0.role" in msg and "root-cause" in msg


def test_bad_regex_and_unknown_related_id(tmp_path: Path) -> None:
    d = _copy_bundled(tmp_path)
    raw = yaml.safe_load((d / "cuda-oom.yaml").read_text())
    raw["fingerprints"][0] = {"pattern": "([unclosed", "kind": "regex", "role": "root-cause", "source": "x"}
    (d / "cuda-oom.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(TaxonomyError, match="regular expression"):
        load_taxonomy([d], include_bundled=False)
    raw = yaml.safe_load((bundled_taxonomy_dir() / "cuda-oom.yaml").read_text())
    raw["related"] = [{"id": "no-such-entry", "note": "x"}]
    (d / "cuda-oom.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(TaxonomyError, match="no-such-entry"):
        load_taxonomy([d], include_bundled=False)


def test_user_directory_adds_and_overrides(tmp_path: Path) -> None:
    user = tmp_path / "mine"
    user.mkdir()
    raw = yaml.safe_load((bundled_taxonomy_dir() / "cuda-oom.yaml").read_text())
    raw["title"] = "Our own OOM title"
    (user / "cuda-oom.yaml").write_text(yaml.safe_dump(raw))
    raw["id"] = "licence-server-down"
    raw["title"] = "Licence server unreachable"
    (user / "licence-server-down.yaml").write_text(yaml.safe_dump(raw))
    tax = load_taxonomy([user])
    assert tax.get("cuda-oom").title == "Our own OOM title"
    assert "licence-server-down" in tax.label_ids
    assert tax.fingerprint_hash() != load_taxonomy().fingerprint_hash()


def test_file_name_must_match_id(tmp_path: Path) -> None:
    user = tmp_path / "mine"
    user.mkdir()
    shutil.copy(bundled_taxonomy_dir() / "cuda-oom.yaml", user / "oom.yaml")
    with pytest.raises(TaxonomyError, match="file name stem"):
        load_taxonomy([user])


def test_benign_messages_are_checked_and_change_the_fingerprint_hash(tmp_path: Path) -> None:
    d = _copy_bundled(tmp_path)
    raw = yaml.safe_load((d / "no-failure.yaml").read_text())
    assert raw["benign"], "the bundled no-failure entry declares NCCL's normal fallback messages"
    raw["benign"] = [*raw["benign"], {"pattern": "([unclosed", "kind": "regex", "source": "x"}]
    (d / "no-failure.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(TaxonomyError, match="regular expression"):
        load_taxonomy([d], include_bundled=False)
    raw["benign"] = raw["benign"][:1]
    (d / "no-failure.yaml").write_text(yaml.safe_dump(raw))
    assert load_taxonomy([d], include_bundled=False).fingerprint_hash() != load_taxonomy().fingerprint_hash()
