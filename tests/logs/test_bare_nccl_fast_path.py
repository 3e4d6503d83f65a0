"""NCCL debug lines of a per-rank file take the fast path and give the general parser's bundle.

A rank file (``rank3.log``, ``worker-3.log``) holding ``host:pid:tid [dev] NCCL ...`` lines used to
send every block holding one through the general, line-by-line parser. Now those lines stay on
the fast path (per line or columnar), their host learned in line order as the general parser
learns it. Every input is read with ``BARE_NCCL_FAST`` on and off, each way on the per-line and
on the columnar path, with default and tiny blocks and retention: the bundles must be equal field
for field (lines, hosts of the lines and streams, formats, masks) and the pseudonyms given in the
same order.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest

from denpex_ml.logs import ingest, read_logs
from denpex_ml.logs.bundle import LogBundle
from denpex_ml.logs.limits import Retention
from denpex_ml.logs.masking import Masker
from denpex_ml.logs.nccl_lines import NCCL_SHAPE
from denpex_ml.logs.normalize import iter_blocks

REPO = Path(__file__).resolve().parents[2]
TINY = Retention(head=2, tail=3, salient=4, per_template=1, max_streams=5)


def _read(path: Path, *, fast: bool, columnar: bool, tiny: bool) -> tuple[LogBundle, Masker]:
    masker = Masker()
    saved = (ingest.BARE_NCCL_FAST, ingest.COLUMNAR_MIN_BYTES, getattr(ingest, "iter_blocks"))  # noqa: B009
    ingest.BARE_NCCL_FAST = fast
    ingest.COLUMNAR_MIN_BYTES = 0 if columnar else None
    if tiny:
        setattr(ingest, "iter_blocks", functools.partial(iter_blocks, block_chars=211))  # noqa: B010
    try:
        bundle = read_logs(path, retention=TINY if tiny else None, masker=masker)
    finally:
        ingest.BARE_NCCL_FAST, ingest.COLUMNAR_MIN_BYTES = saved[0], saved[1]
        setattr(ingest, "iter_blocks", saved[2])  # noqa: B010
    return bundle, masker


def _assert_same(path: Path) -> None:
    for columnar in (False, True):
        for tiny in (False, True):
            ref, ref_masker = _read(path, fast=False, columnar=columnar, tiny=tiny)
            new, new_masker = _read(path, fast=True, columnar=columnar, tiny=tiny)
            assert list(new.streams) == list(ref.streams)
            for key, st in ref.streams.items():
                assert new.streams[key] == st, (key, columnar, tiny)
                assert [ln.host for ln in new.streams[key].lines] == [ln.host for ln in st.lines]
            assert new == ref
            assert new.summary() == ref.summary()
            assert list(new_masker.reveal_map().items()) == list(ref_masker.reveal_map().items())


def _job_dirs() -> list[Path]:
    return [p for root in (REPO / "tests" / "fixtures", REPO / "data" / "examples") for p in sorted(root.rglob("*"))
            if p.is_dir() and p.parent.name == "jobs"]  # fmt: skip


@pytest.mark.parametrize("job", _job_dirs(), ids=lambda p: str(p.relative_to(REPO)))
def test_bundled_jobs(job: Path) -> None:
    _assert_same(job)


def _write_job(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / Path(name).name).write_text(text, encoding="utf-8")
    return root


def test_real_logs_as_rank_files(tmp_path: Path) -> None:
    """Every real log holding a bare NCCL line, read as one rank's file (its multi-file jobs as they are)."""
    import re

    shape = re.compile(NCCL_SHAPE, re.MULTILINE)
    paths = [*sorted((REPO / "data" / "real").glob("*.jsonl")), REPO / "data" / "reproduced" / "reproduced.jsonl"]
    jobs = 0
    for path in paths:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
            row = json.loads(line) if line.strip() else {}
            files = row.get("logs") if isinstance(row.get("logs"), dict) else {"rank3.log": row.get("log") or ""}
            if any(shape.search("\n" + t) for t in files.values()):
                _assert_same(_write_job(tmp_path / f"{path.stem}-{n}", files))
                jobs += 1
    assert jobs >= 20


NCCL_EDGE = {
    "rank0.log": (
        "gpu-b2:11:12 [0] NCCL INFO Bootstrap : Using ib0:10.1.2.3<0>\n"
        "gpu-a1:11:13 [0] NCCL INFO comm 0x1 rank 0 nranks 8 cudaDev 0 - Init START\n"
        "gpu-a1:11:12 [0] misc/socket.cc:50 NCCL WARN socketStartConnect: Connect to gpu-c3<1234> failed\n"
        "10.9.8.7:11:12 [0] NCCL INFO an address as the host\n"
        "_odd:11:12 [0] NCCL INFO not a host name\n"
        "gpu-a1:11:12 [0] something else entirely\n"
        "gpu-a1:11:12 [0x1] not a device\n"
        "2024-05-01T17:04:45Z gpu-a1:11:12 [0] NCCL INFO behind a timestamp\n"
        "step 1 loss 2.0 on gpu-a1\n"
        "gpu-a1:11:12 [0] NCCL INFO  10%|#   | 1/10\r 100%|####| 10/10\r\n"
        "RuntimeError: NCCL error, MASTER_ADDR=gpu-a1 token=abcdef1234567890\n"
    ),
    "rank1.log": (
        "[rank1]:gpu-b2:21:22 [1] NCCL INFO prefixed\n"
        "gpu-b2:21:22 [1] NCCL INFO bare\n"
        "gpu-d4.cluster.local:21:22 [1] NCCL INFO fqdn\n"
        "Traceback (most recent call last):\n"
        "torch.distributed.DistBackendError: NCCL communicator was aborted\n"
    ),
}


def test_edge_cases(tmp_path: Path) -> None:
    job = _write_job(tmp_path / "edge", NCCL_EDGE)
    _assert_same(job)
    bundle = read_logs(job)
    assert bundle.formats["nccl"] >= 6
    assert bundle.streams[0].hosts  # the hosts NCCL printed belong to the rank's stream


def test_generated_rank_files_take_the_fast_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    batch = pytest.importorskip("bench.batch")
    jobs, _ = batch.write_batch_jobs(tmp_path, 3, 400_000, "400K", log=lambda _m: None)
    for job in sorted(p for p in jobs.iterdir() if p.is_dir()):
        _assert_same(job)
    general: list[int] = []
    original = ingest.Builder._add_block_general

    def spy(self: Any, block: str, *args: Any) -> int:
        general.append(len(block))
        return original(self, block, *args)

    monkeypatch.setattr(ingest.Builder, "_add_block_general", spy)
    job = next(p for p in sorted(jobs.iterdir()) if p.is_dir())
    n_nccl = sum(f.read_text(encoding="utf-8").count(" NCCL ") for f in job.iterdir())
    assert n_nccl > 10
    assert read_logs(job).formats["nccl"] > 10
    total = sum(f.stat().st_size for f in job.iterdir())
    assert sum(general) < total // 10  # NCCL lines no longer send whole blocks to the general parser


def test_nccl_hosts_equals_the_findall_it_replaces() -> None:
    """``nccl_hosts`` (each line head read once) finds what a findall over the block finds."""
    from denpex_ml.logs.nccl_lines import _NCCL_HOST_IN_TEXT, nccl_hosts

    texts = list(NCCL_EDGE.values())
    for path in sorted((REPO / "data" / "real").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line) if line.strip() else {}
            texts.extend(t for t in [row.get("log") or "", *(row.get("logs") or {}).values()] if " NCCL" in t)
    assert len(texts) > 50
    for text in texts:
        raw = text.encode("utf-8", "replace")
        assert nccl_hosts(raw) == set(_NCCL_HOST_IN_TEXT.findall(raw))


@pytest.mark.parametrize(
    "head",
    [
        "gpu-node-7:1234:1290 [3] NCCL",
        "Gpu7.cluster.local:1:2 [0] NCCL",
        "a:0:0 [12] NCCL",
        "h_1-b.c:99999:1 [7] NCCL",
        "x" * 255 + ":1:2 [0] NCCL",
    ],
)
def test_plain_nccl_head_reads_as_parse_prefix_does(head: str) -> None:
    """A head the shortcut reads without ``parse_prefix`` gets the host ``parse_prefix`` gives it,
    whatever follows it on the line; one it does not read is left to ``parse_prefix``."""
    from denpex_ml.logs.nccl_lines import _PLAIN_HEAD
    from denpex_ml.logs.prefixes import parse_prefix

    m = _PLAIN_HEAD.fullmatch(head.encode())
    assert m is not None
    for rest in ("", " INFO Init COMPLETE", " WARN x: y", "X", " NCCL again"):
        p = parse_prefix(head + rest)
        assert p is not None and p.format == "nccl" and p.rank is None
        assert p.host == m.group(1).decode()
    for other in ("x" * 256 + ":1:2 [0] NCCL", "2024-05-02T10:42:28 [1] NCCL", "a b:1:2 [0] NCCL", "é:1:2 [0] NCCL"):
        assert _PLAIN_HEAD.fullmatch(other.encode()) is None


def test_nccl_hosts_plain_keys_equal_the_findall() -> None:
    """Line heads read off without RE2 (``[rankN]:host:pid:tid [dev] NCCL``) and their near misses."""
    import random

    from denpex_ml.logs.nccl_lines import _NCCL_HOST_IN_TEXT, nccl_hosts

    rng = random.Random(5)
    heads = ["[rank3]:", "[rank3]: ", "[default12]:", "[rank]:", "[rank1]", "x [rank1]:", "[rank1]:[rank2]:", "", " "]
    hosts = ["gpu-node-1", "10.0.0.1", "a", "Gpu_7.x", "-bad", ".x", "é", "h:1", "h]", ""]
    tails = [" NCCL INFO x", " NCCL", " NCCL INFO NCCL version", "NCCL", " NCCLX", " foo NCCL", ""]
    for _ in range(3000):
        lines = [
            f"{rng.choice(heads)}{rng.choice(hosts)}:{rng.choice(['1', '22', 'x', ''])}:{rng.choice(['3', ''])} "
            f"[{rng.choice(['0', '12', 'a', ''])}]{rng.choice(tails)}"
            for _ in range(rng.randint(1, 6))
        ]
        raw = "\n".join(lines).encode()
        assert nccl_hosts(raw) == set(_NCCL_HOST_IN_TEXT.findall(raw)), raw
