"""Tests of the synthetic incident generator (denpex_ml.synthetic)."""

from __future__ import annotations

import json
import re
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest

from denpex_ml.synthetic import (
    HELD_OUT_LAUNCHERS,
    HELD_OUT_MSG_VERSIONS,
    LAUNCHERS,
    MSG_VERSIONS,
    RECIPES,
    TIMESTAMP_FORMATS,
    generate,
    iter_generate,
    make_splits,
    write_archive,
    write_job_dirs,
    write_jsonl,
)

REPO = Path(__file__).resolve().parents[1]
IDS_FILE = REPO.parent / "shared" / "taxonomy-ids.md"  # the shared folder beside the checkout
HANG_LABELS = [
    "subset-rank-collective-hang",
    "host-work-timeout",
    "zero3-divergent-forward-hang",
    "moe-pp-layout-aux-loss-hang",
    "collective-mismatch",
]
_ERRORISH = re.compile(r"Error|error|Watchdog|timed out|timeout|WARN|failed|terminate called")


def _taxonomy_ids() -> list[str]:
    if not IDS_FILE.exists():
        pytest.skip(f"{IDS_FILE} not available")
    return re.findall(r"^- ([a-z0-9]+(?:-[a-z0-9]+)*):", IDS_FILE.read_text(encoding="utf-8"), flags=re.M)


def _text(inc: dict[str, Any]) -> str:
    """All log text of an incident, with jsonl records decoded to their messages."""
    if "logs" in inc:
        return "\n".join(inc["logs"].values())
    if inc["meta"]["launcher"] == "jsonl":
        return "\n".join(json.loads(ln)["message"] for ln in inc["log"].splitlines() if ln)
    return inc["log"]


@pytest.fixture(scope="module")
def sample() -> list[dict[str, Any]]:
    return generate(3, seed=11, use_fingerprints=False)


def test_same_seed_same_output_and_different_seed_differs() -> None:
    a = generate(1, seed=3, use_fingerprints=False)
    b = generate(1, seed=3, use_fingerprints=False)
    c = generate(1, seed=4, use_fingerprints=False)
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    assert json.dumps(a, sort_keys=True) != json.dumps(c, sort_keys=True)


def test_incident_independent_of_requested_labels() -> None:
    one = generate(2, seed=5, labels=["cuda-oom"], include_unknown=False, use_fingerprints=False)
    many = [
        i
        for i in generate(
            2, seed=5, labels=["nccl-network-error", "cuda-oom"], include_unknown=False, use_fingerprints=False
        )
        if i["label"] == "cuda-oom"
    ]
    assert one == many


def test_every_taxonomy_id_has_a_recipe() -> None:
    ids = _taxonomy_ids()
    assert len(ids) >= 35
    missing = [i for i in ids if i not in RECIPES]
    assert not missing, f"no recipe for {missing}"


def test_record_format(sample: list[dict[str, Any]]) -> None:
    for inc in sample:
        assert set(inc) >= {"id", "label", "initiating_rank", "source", "meta"}
        assert ("log" in inc) != ("logs" in inc)
        assert inc["source"].startswith("synthetic:") and inc["source"].endswith(":11")
        meta = inc["meta"]
        for key in (
            "launcher",
            "msg_version",
            "n_ranks",
            "timestamps",
            "noise",
            "truncated",
            "hard_negative",
            "variant",
        ):
            assert key in meta
        assert 2 <= meta["n_ranks"] <= 1024
        assert inc["initiating_rank"] is None or 0 <= inc["initiating_rank"] < meta["n_ranks"]
    assert len({i["id"] for i in sample}) == len(sample)


def test_axes_are_exercised(sample: list[dict[str, Any]]) -> None:
    metas = [i["meta"] for i in sample]
    assert {m["launcher"] for m in metas} == set(LAUNCHERS)
    assert {m["msg_version"] for m in metas} == set(MSG_VERSIONS)
    assert {m["timestamps"] for m in metas} == set(TIMESTAMP_FORMATS)
    assert {m["truncated"] for m in metas} == {True, False}
    assert {m["hard_negative"] for m in metas} == {True, False}
    assert any(m["missing_ranks"] for m in metas)
    assert any(m["n_ranks"] >= 128 and m["visible_ranks"] < m["n_ranks"] for m in metas)
    assert any(i["initiating_rank"] is None for i in sample)
    assert len({m["variant"] for m in metas}) > 40


def test_launcher_prefixes() -> None:
    for launcher, pattern in (
        ("torchrun", r"^\[rank\d+\]:"),
        ("srun", r"^\d+: "),
        ("mpirun", r"^\[1,\d+\]<std(err|out)>:"),
        ("ray", r"^\(\w+ pid=\d+, ip=10\.0\.0\.\d+\) "),
    ):
        incs = generate(
            1, seed=2, labels=["cuda-oom"], launchers=[launcher], include_unknown=False, use_fingerprints=False
        )
        assert any(re.match(pattern, ln) for ln in incs[0]["log"].splitlines()), launcher
    js = generate(1, seed=2, labels=["cuda-oom"], launchers=["jsonl"], include_unknown=False, use_fingerprints=False)[0]
    recs = [json.loads(ln) for ln in js["log"].splitlines()]
    assert all({"pod", "rank", "message"} <= set(r) for r in recs)
    files = generate(
        1, seed=2, labels=["cuda-oom"], launchers=["per-rank-files"], include_unknown=False, use_fingerprints=False
    )[0]
    assert files["logs"] and "log" not in files


def test_initiator_evidence_present(sample: list[dict[str, Any]]) -> None:
    for inc in sample:
        text = _text(inc)
        for line in inc["meta"]["key_lines"]:
            assert line in text, (inc["id"], line)
    torchrun = generate(2, seed=9, launchers=["torchrun"], include_unknown=False, use_fingerprints=False)
    for inc in torchrun:
        r = inc["initiating_rank"]
        if r is None or not inc["meta"]["key_lines"]:
            continue
        if any(re.match(rf"^(?:\S+Z )?\[rank{r}\]:", ln) for ln in inc["log"].splitlines()):
            continue
        # a rank killed by the kernel prints nothing itself; its evidence is a node-level line
        assert inc["label"] in (
            "host-oom",
            "gpu-xid-ecc-error",
            "gpu-fallen-off-bus",
            "nvlink-xid74-fabric-manager",
            "cuda-illegal-memory-access",
        ), inc["id"]


def test_hang_errors_come_mostly_from_waiting_ranks() -> None:
    incs = generate(
        4, seed=21, labels=HANG_LABELS, launchers=["torchrun"], include_unknown=False, use_fingerprints=False
    )
    ratios = []
    for inc in incs:
        init = inc["initiating_rank"]
        if init is None:
            continue
        own = other = 0
        for ln in inc["log"].splitlines():
            m = re.match(r"^(?:\S+Z )?\[rank(\d+)\]:", ln)
            if m and _ERRORISH.search(ln):
                if int(m.group(1)) == init:
                    own += 1
                else:
                    other += 1
        if own + other:
            ratios.append(other > own)
    assert sum(ratios) >= 0.7 * len(ratios)


def test_held_out_variants_only_in_test() -> None:
    splits = make_splits(1, 1, 2, seed=1, use_fingerprints=False)
    for name in ("train", "val"):
        for inc in splits[name]:
            assert inc["meta"]["launcher"] not in HELD_OUT_LAUNCHERS
            assert inc["meta"]["msg_version"] not in HELD_OUT_MSG_VERSIONS
    test = splits["test"]
    assert {i["meta"]["launcher"] for i in test} & set(HELD_OUT_LAUNCHERS)
    assert {i["meta"]["msg_version"] for i in test} & set(HELD_OUT_MSG_VERSIONS)
    ids = [i["id"] for s in splits.values() for i in s]
    assert len(ids) == len(set(ids))


def test_noise_parameter_controls_volume() -> None:
    small = generate(
        1,
        seed=1,
        labels=["cuda-oom"],
        include_unknown=False,
        noise=(10, 10),
        launchers=["plain"],
        use_fingerprints=False,
    )[0]
    big = next(
        iter_generate(
            1,
            1,
            labels=["cuda-oom"],
            include_unknown=False,
            noise=(20000, 20000),
            launchers=["plain"],
            use_fingerprints=False,
        )
    )
    assert big["meta"]["noise"] == 20000
    assert big["log"].count("\n") > small["log"].count("\n") + 15000


def test_unknown_label_rejected() -> None:
    with pytest.raises(KeyError):
        generate(1, seed=0, labels=["no-such-failure"], use_fingerprints=False)


def test_writers(tmp_path: Path, sample: list[dict[str, Any]]) -> None:
    incs = sample[:12]
    n = write_jsonl(incs, tmp_path / "x.jsonl")
    back = [json.loads(ln) for ln in (tmp_path / "x.jsonl").read_text(encoding="utf-8").splitlines()]
    assert n == len(incs) and back == incs
    dirs = write_job_dirs(incs, tmp_path / "jobs")
    assert len(dirs) == len(incs)
    for inc, d in zip(incs, dirs, strict=True):
        assert (d / "incident.json").is_file()
        if "logs" in inc:
            for name, text in inc["logs"].items():
                assert (d / name).read_bytes().decode("utf-8") == text
        else:
            assert (d / "job.log").read_bytes().decode("utf-8") == inc["log"]
    assert write_archive(incs, tmp_path / "a.tar.gz") == len(incs)
    with tarfile.open(tmp_path / "a.tar.gz") as tar:
        names = tar.getnames()
        assert f"{incs[0]['id']}/incident.json" in names
    assert write_archive(incs, tmp_path / "a.zip") == len(incs)
    with zipfile.ZipFile(tmp_path / "a.zip") as zf:
        assert f"{incs[0]['id']}/incident.json" in zf.namelist()
