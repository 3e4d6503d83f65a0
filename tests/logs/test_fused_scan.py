"""One RE2 scan for a columnar block's three questions gives the bundle three scans give.

A columnar block of an unranked file is asked whether a line needs the general parser, which
lines masking may change and which lines are salient by one scan of the block, then the few lines
found by one scan each (``Builder._fused_scan``). Every input is read with ``FUSED_SCAN`` on and
off, with the columnar engine on every block, with default and tiny blocks and retention: the
bundles must be equal field for field and the pseudonyms given in the same order.
"""

from __future__ import annotations

import functools
import json
import random
from pathlib import Path
from typing import Any

import pytest

from denpex_ml.logs import ingest, read_logs
from denpex_ml.logs.bundle import LogBundle
from denpex_ml.logs.limits import Retention
from denpex_ml.logs.masking import MAX_FIRST_PIECES_REGEX, Masker
from denpex_ml.logs.normalize import iter_blocks

REPO = Path(__file__).resolve().parents[2]
TINY = Retention(head=2, tail=3, salient=4, per_template=1, max_streams=5)
REAL = [*sorted((REPO / "data" / "real").glob("*.jsonl")), REPO.parent / "shared" / "real-logs" / "real-logs.jsonl"]


def _read(source: Any, *, fused: bool, tiny: bool, block_chars: int = 211) -> tuple[LogBundle, Masker]:
    masker = Masker()
    saved = (ingest.FUSED_SCAN, ingest.COLUMNAR_MIN_BYTES, getattr(ingest, "iter_blocks"))  # noqa: B009
    ingest.FUSED_SCAN = fused
    ingest.COLUMNAR_MIN_BYTES = 0
    if tiny:
        setattr(ingest, "iter_blocks", functools.partial(iter_blocks, block_chars=block_chars))  # noqa: B010
    try:
        retention = TINY if tiny else None
        if isinstance(source, Path):
            bundle = read_logs(source, retention=retention, masker=masker)
        else:
            bundle = read_logs(text=source, retention=retention, masker=masker)
    finally:
        ingest.FUSED_SCAN, ingest.COLUMNAR_MIN_BYTES = saved[0], saved[1]
        setattr(ingest, "iter_blocks", saved[2])  # noqa: B010
    return bundle, masker


def _assert_same(source: Any) -> None:
    for tiny in (False, True):
        try:
            ref, ref_masker = _read(source, fused=False, tiny=tiny)
        except Exception as exc:  # the same error, by both paths
            with pytest.raises(type(exc)) as info:
                _read(source, fused=True, tiny=tiny)
            assert str(info.value) == str(exc)
            continue
        new, new_masker = _read(source, fused=True, tiny=tiny)
        assert list(new.streams) == list(ref.streams)
        for key, st in ref.streams.items():
            assert new.streams[key] == st, (key, tiny)
        assert new == ref
        assert new.summary() == ref.summary()
        assert list(new_masker.reveal_map().items()) == list(ref_masker.reveal_map().items())


def _inputs() -> list[Path]:
    paths: list[Path] = []
    for root in (REPO / "tests" / "fixtures", REPO / "data" / "examples"):
        for p in sorted(root.rglob("*")):
            a_file = p.is_file() and p.suffix not in {".py", ".pyc", ".md", ".json"}
            if a_file or (p.is_dir() and p.parent.name == "jobs"):  # a job directory: its files together
                paths.append(p)
    return paths


@pytest.mark.parametrize("path", _inputs(), ids=lambda p: str(p.relative_to(REPO)))
def test_fixtures(path: Path) -> None:
    _assert_same(path)


def test_real_logs() -> None:
    n = 0
    for path in REAL:
        if not path.is_file():
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line) if line.strip() else {}
            if isinstance(row.get("log"), str):
                _assert_same(row["log"])
                n += 1
    assert n > 100


def _nccl(rng: random.Random, host: str, rank: int) -> str:
    pid = rng.randint(100, 999)
    return f"[rank{rank}]:{host}:{pid}:{pid + 7} [{rank % 8}] NCCL INFO Channel 0/1 via {rng.choice(['P2P', host])}"


EDGE_CASES = {
    # hosts learned from NCCL lines in the block that also holds lines naming them in free text
    "hosts-learned-in-block": "".join(
        f"[rank{i}]:gpu-a{i}:1{i}:2{i} [0] NCCL INFO ring\n[rank{i + 1}]: talking to gpu-a{i} (saved ok)\n"
        for i in range(40)
    ),
    # salient lines that need masking, salient lines that do not, and lines that need only masking
    "salient-and-masked": (
        "[rank0]: Error connecting to 10.0.0.7\n[rank1]: Error: no such thing\n[rank2]: MASTER_ADDR=gpu-c3\n"
        "[rank3]: Traceback (most recent call last):\n[rank4]: step 1 loss 2.0\n[rank5]: host gpu-c3.cluster.local\n"
    )
    * 30,
    # a line for the general parser in the middle of a block: the whole block goes there
    "general-line-mid-block": "[rank0]: step 1\n" * 20 + "gpu-n1: launcher line\n" + "[rank1]: step 2 error\n" * 20,
    "root-cause-mid-block": "[rank0]: step 1\n" * 20
    + "Root Cause (first observed failure):\n[0]:\n  time : 2024\n  host : gpu-n9\n  rank : 3\n"
    + "[rank1]: step 2\n" * 20,
    "failures-line": "[rank0]: step 1\n" * 10 + "   \nFailures:\n  <NO_OTHER_FAILURES>\n" + "[rank0]: x\n" * 10,
    "private-key": "[rank0]: -----BEGIN RSA PRIVATE KEY-----\n[rank0]: MIIEowIBAAKCAQEA7x\n"
    "[rank0]: -----END RSA PRIVATE KEY-----\n[rank0]: Error after key\n" * 5,
    # names whose first piece is no piece of a name matched in free text, or an address
    "odd-nccl-hosts": "".join(
        f"[rank{i}]:{h}:12:34 [0] NCCL INFO x {h} failed\n"
        for i, h in enumerate(
            ["main", "node-1", "10.1.2.3", "a" * 300, "x.y", "a-b-c-d-e-f-g-h-i-j", "gpu-1.c", "gpu-1"]
        )
    ),
}


@pytest.mark.parametrize("name", sorted(EDGE_CASES))
def test_edge_cases(name: str) -> None:
    _assert_same(EDGE_CASES[name])
    _assert_same(EDGE_CASES[name] * 20)


def test_more_first_pieces_than_one_regex_holds() -> None:
    rng = random.Random(5)
    hosts = [f"h{i:04d}x-{rng.randint(0, 9)}" for i in range(MAX_FIRST_PIECES_REGEX + 40)]
    text = "".join(_nccl(rng, h, i) + f"\n[rank{i}]: Error on {h}\n" for i, h in enumerate(hosts))
    _assert_same(text)


@pytest.mark.parametrize(("size", "ranks"), [(300_000, 8), (2_500_000, 64), (1_500_000, 512)])
def test_generated_interleaved(tmp_path: Path, size: int, ranks: int) -> None:
    gen_log = pytest.importorskip("bench.gen_log")
    path = tmp_path / "job.log"
    gen_log.write_interleaved_log(path, size, ranks, 3)
    _assert_same(path)


def test_the_fused_scan_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    answers: list[bool] = []
    original = ingest.Builder._fused_scan

    def spy(self: Any, raw: bytes, masker: Masker) -> Any:
        out = original(self, raw, masker)
        answers.append(out is not None and out.hit is not None)
        return out

    monkeypatch.setattr(ingest.Builder, "_fused_scan", spy)
    assert ingest.COLUMNAR_MIN_BYTES is not None
    line = "[rank3]:gpu-9:1:2 [0] NCCL INFO x\n[rank3]: step 1 Error on gpu-9.cluster.local 10.1.2.3\n"
    read_logs(text=line * (ingest.COLUMNAR_MIN_BYTES // len(line) + 10))
    assert answers and all(answers)


def test_first_pieces_after_learning() -> None:
    rng = random.Random(11)
    parts = ["gpu", "node", "a1", "x", "main", "10", "1", "localhost", "node-3", "ip-2", "<masked", "Z9"]
    for _ in range(300):
        masker = Masker()
        for _ in range(rng.randint(0, 3)):
            names = [
                rng.choice(["", "-", "."]).join(rng.choice(parts) for _ in range(rng.randint(1, 4)))
                for _ in range(rng.randint(0, 6))
            ]
            expected = masker.first_pieces_after(names)
            masker.learn_hosts(names)
            assert expected == set(masker._first), names
