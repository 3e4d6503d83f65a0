"""Every recipe's logs ingest and split back to the right ranks; the initiator survives."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from denpex_ml.batch import discover_jobs
from denpex_ml.logs import read_logs
from denpex_ml.synthetic import generate, write_archive
from denpex_ml.taxonomy import load_taxonomy

RANKED_LAUNCHERS = ["torchrun", "torchrun-default", "srun", "mpirun", "per-rank-files", "jsonl"]
LABELS = load_taxonomy().ids
PREFIX = re.compile(r"^(?:\S+Z )?(?:\[(?:rank|default)(\d+)\]:|\[[\w.-]+:\d+ ?:\d+:\d+\] )")


def bundle_of(inc):  # type: ignore[no-untyped-def]
    src = inc.get("logs") or inc["log"]
    return read_logs(src) if isinstance(src, dict) else read_logs(text=src)


@pytest.mark.parametrize("label", LABELS)
def test_recipe_round_trip(label: str) -> None:
    for inc in generate(1, seed=5, labels=[label], launchers=RANKED_LAUNCHERS, include_unknown=label == "unknown"):
        if inc["label"] != label:
            continue
        b = bundle_of(inc)
        assert not b.is_empty
        r = inc["initiating_rank"]
        if r is not None and r not in inc["meta"].get("missing_ranks", []):
            assert r in b.ranks, (inc["meta"]["launcher"], r, b.ranks[:10])
            texts = _unmask(" ".join(ln.text for ln in b.rank(r).lines))
            keys = [k for k in inc["meta"].get("key_lines", []) if k]
            # at least one of the initiator's root-cause lines ends up in its own stream
            assert not keys or any(_core(k) in texts for k in keys), (label, keys[:2])


def _core(line: str) -> str:
    """The message part of a key line (launcher prefix and timestamps removed)."""
    text = PREFIX.sub("", line)
    return _unmask(text.strip())[-60:]


def _unmask(text: str) -> str:
    """Drop what masking rewrites (IP addresses and their pseudonyms) before comparing."""
    return re.sub(r"\b(?:\d{1,3}\.){3}\d{1,3}\b|\bip-\d+\b", "", text)


def test_torchrun_lines_land_in_their_rank() -> None:
    for inc in generate(2, seed=9, launchers=["torchrun"], include_unknown=False)[:20]:
        b = bundle_of(inc)
        expected: dict[int, int] = {}
        for line in inc["log"].split("\n"):
            m = PREFIX.match(line)
            if m and line[m.end() :].strip():
                expected[int(m.group(1))] = expected.get(int(m.group(1)), 0) + 1
        for rank, n in expected.items():
            # every prefixed line is in its rank's stream (unprefixed lines that state
            # "[Rank N]" inside the message may join it too)
            assert b.rank(rank).n_lines >= n


@pytest.mark.parametrize("suffix", [".tar.gz", ".zip"])
def test_archive_round_trip(tmp_path: Path, suffix: str) -> None:
    """Written, then read back by the library's own archive reader: one job per incident,
    every log byte for byte, the incident's metadata, and the initiator's rank in the logs."""
    incs = generate(
        1, seed=2, labels=["cuda-oom", "nccl-network-error"], launchers=["per-rank-files"], include_unknown=False
    )
    out = tmp_path / f"jobs{suffix}"
    assert write_archive(incs, out) == len(incs) == 2
    jobs = {j.id: j for j in discover_jobs(out)}
    assert set(jobs) == {inc["id"] for inc in incs}
    for inc in incs:
        job = jobs[inc["id"]]
        assert job.error is None
        files: dict[int | str, str] = {name: data.decode("utf-8") for name, data in job.members}
        info = json.loads(files.pop("incident.json"))
        assert files == inc["logs"]
        assert info == {k: v for k, v in inc.items() if k != "logs"}
        assert info["label"] == inc["label"] and info["initiating_rank"] == inc["initiating_rank"]
        bundle = read_logs(files)
        assert inc["initiating_rank"] in bundle.ranks
