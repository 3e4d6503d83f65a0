"""The columnar ingestion path gives exactly the bundle the line-by-line path gives.

Every fast-path block of every input is read twice: by the reference path (``COLUMNAR_MIN_BYTES
= None``, each line a Python object) and by the columnar engine forced onto every block
(``COLUMNAR_MIN_BYTES = 0``: Arrow/RE2 kernels and numpy, deferred tails). The bundles must be
equal field for field (retained lines with their text, masks, ranks, salience, counts, masked
counts, launcher summary, warnings), streams in the same order, and the maskers must have given
the same pseudonyms to the same names in the same order.

Inputs: every file and job under tests/fixtures and data/examples, every ``log`` of the real
logs (data/real/*.jsonl, ../shared/real-logs/real-logs.jsonl), generated interleaved logs, and
hand-written edge cases; each once with the default retention and blocks and once with tiny
blocks and a tiny retention (tails deferred across many blocks, stream overflow).
"""

from __future__ import annotations

import functools
import io
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from denpex_ml.logs import ingest, read_logs
from denpex_ml.logs.bundle import LogBundle
from denpex_ml.logs.limits import Retention
from denpex_ml.logs.masking import Masker
from denpex_ml.logs.normalize import iter_blocks, iter_text_blocks
from denpex_ml.logs.patterns import _TEMPLATE, SALIENT_PATTERN, retention_templates

REPO = Path(__file__).resolve().parents[2]
FIXTURE_DIRS = [REPO / "tests" / "fixtures", REPO / "data" / "examples"]
REAL = [*sorted((REPO / "data" / "real").glob("*.jsonl")), REPO.parent / "shared" / "real-logs" / "real-logs.jsonl"]
TINY = Retention(head=2, tail=3, salient=4, per_template=1, max_streams=5)


def _fixture_paths() -> list[Path]:
    paths: list[Path] = []
    for root in FIXTURE_DIRS:
        if not root.is_dir():
            continue
        for p in sorted(root.rglob("*")):
            if p.is_file() and p.suffix not in {".py", ".pyc", ".md", ".json"}:
                paths.append(p)
            elif p.is_dir() and p.parent.name == "jobs":
                paths.append(p)  # a job directory: its files together
    return paths


def _real_logs() -> Iterator[tuple[str, str]]:
    for path in REAL:
        if not path.is_file():
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
            if not line.strip():
                continue
            row = json.loads(line)
            if isinstance(row.get("log"), str):
                yield f"{path.name}:{n}:{row.get('id', '')}", row["log"]


EDGE_CASES = {
    "blank-and-space": "\n \n\t\n\x1c\n\u3000\n[rank0]: \n[rank0]:\nx\n",
    "timestamps": (
        "2024-05-01 17:04:45,123 [rank3]: RuntimeError: boom\n"
        "[2024-05-01T17:04:45.5Z] [rank1]:step 1\n"
        "2024-05-01 17:04:45 nranks 8 here\n"
        "2024-05-01 17:04:45 \n"
        "[2024-05-01 17:04:45]: [default7]: ok host=gpu-node-9\n"
        "12345: not a prefix\n"
    ),
    "rank-forms": (
        "[rank0000012]: seven digits\n[rank123456]: six digits\n[rank]: none\n[rank5]:x\n[rank5]:  two spaces\n"
        "[default3]: d\n[rank7] no colon\n[Rank 4] Watchdog caught collective operation timeout\n"
        "[PG ID 0 PG GUID 0(default_pg) Rank 2] ProcessGroupNCCL timed out\nglobal line\n"
    ),
    "unicode": "[rank1]: ｒａｎｋ … résumé 東京 Error ✓\n[rank٣]: arabic digit\n١٢٣٤-05-01 00:00:00 x\n",
    "nccl-hosts": (
        "[rank0]:gpu-a1:1:2 [0] NCCL INFO ring; peer gpu-b2:3:4 [1] NCCL INFO x\n"
        "[rank1]:gpu-b2:3:4 [1] NCCL INFO NET/IB : Using ib0:10.1.2.3<0> addr fe80::1\n"
        "[rank2]: talking to gpu-a1 and gpu-b2.cluster.local, MASTER_ADDR=gpu-c3 token=abcdef1234567890\n"
    ),
    "cr-and-secrets": (
        "[rank0]:  10%|#   | 1/10\r 100%|####| 10/10\r\n"
        "[rank0]: -----BEGIN RSA PRIVATE KEY-----\n[rank0]: MIIEowIBAAKCAQEA7x\n"
        "[rank0]: -----END RSA PRIVATE KEY-----\n[rank1]: curl -u bob:hunter2 https://x.io --password p4ss\n"
        "[rank1]: saved to /home/alice/ckpt, mail bob@example.com\n"
    ),
    "truncated": "[rank0]: " + "x" * 70_000 + "\n[rank0]: after\n",
    # streams grouped by a 16-bit sort, and by a 64-bit one when a rank does not fit
    "many-streams": "".join(f"[rank{(i * 37) % 300}]: step {i} Error {i % 3}\n" for i in range(3000)),
    "large-ranks": "".join(
        f"[rank{r}]: step {i} loss 1.0\n" for i, r in enumerate([7, 40000, 7, 999999, 32767, 32768, 5, 65541] * 40)
    ),
    "all-blank": "\n \n\t\n" * 200,
    # a longer name learned after lines holding it were masked: they keep the names known then
    "names-learned-later": "[rank0]:gpu-1:1:2 [0] NCCL INFO ring\n"
    + "[rank1]: peer gpu-1 and gpu-1-b ok\n" * 3
    + "[rank2]: step 1 loss 2.0 filler line\n" * 6
    + "[rank3]:gpu-1-b:3:4 [1] NCCL INFO ring\n"
    + "[rank2]: step 1 loss 2.0 filler line\n" * 80,
}


def _read(source: Any, *, columnar: bool, retention: Retention | None, tiny_blocks: bool) -> tuple[LogBundle, Masker]:
    masker = Masker()
    saved_min, saved_blocks = ingest.COLUMNAR_MIN_BYTES, getattr(ingest, "iter_blocks")  # noqa: B009
    ingest.COLUMNAR_MIN_BYTES = 0 if columnar else None
    # the reference reads every block as decoded text; the fast path reads ASCII blocks as bytes
    reader = iter_blocks if columnar else iter_text_blocks
    setattr(ingest, "iter_blocks", functools.partial(reader, block_chars=97) if tiny_blocks else reader)  # noqa: B010
    try:
        if isinstance(source, Path):
            bundle = read_logs(source, retention=retention, masker=masker)
        else:
            bundle = read_logs(text=source, retention=retention, masker=masker)
    finally:
        ingest.COLUMNAR_MIN_BYTES = saved_min
        setattr(ingest, "iter_blocks", saved_blocks)  # noqa: B010
    return bundle, masker


def _assert_same(source: Any, *, retention: Retention | None = None, tiny_blocks: bool = False) -> None:
    try:
        ref, ref_masker = _read(source, columnar=False, retention=retention, tiny_blocks=tiny_blocks)
    except Exception as exc:  # the same error, by both paths
        with pytest.raises(type(exc)) as info:
            _read(source, columnar=True, retention=retention, tiny_blocks=tiny_blocks)
        assert str(info.value) == str(exc)
        return
    new, new_masker = _read(source, columnar=True, retention=retention, tiny_blocks=tiny_blocks)
    assert list(new.streams) == list(ref.streams)
    for key, st in ref.streams.items():
        assert new.streams[key] == st, key
    assert new == ref
    assert new.summary() == ref.summary()
    assert new_masker.reveal_map() == ref_masker.reveal_map()
    assert list(new_masker.reveal_map()) == list(ref_masker.reveal_map())  # pseudonyms given in the same order


@pytest.mark.parametrize("path", _fixture_paths(), ids=lambda p: str(p.relative_to(REPO)))
def test_fixtures(path: Path) -> None:
    _assert_same(path)
    _assert_same(path, retention=TINY, tiny_blocks=True)


def test_real_logs() -> None:
    logs = list(_real_logs())
    assert len(logs) > 100
    for _name, text in logs:
        _assert_same(text)
        _assert_same(text, retention=TINY, tiny_blocks=True)


@pytest.mark.parametrize("name", sorted(EDGE_CASES))
def test_edge_cases(name: str) -> None:
    text = EDGE_CASES[name]
    _assert_same(text)
    _assert_same(text, retention=TINY, tiny_blocks=True)
    _assert_same(text * 50, retention=TINY)


@pytest.mark.parametrize(("size", "ranks"), [(300_000, 8), (2_500_000, 64)])
def test_generated_interleaved(tmp_path: Path, size: int, ranks: int) -> None:
    gen_log = pytest.importorskip("bench.gen_log")
    path = tmp_path / "job.log"
    gen_log.write_interleaved_log(path, size, ranks, 3)
    _assert_same(path)
    _assert_same(path, retention=Retention(head=3, tail=20, salient=10, per_template=1, max_streams=40))


@pytest.mark.parametrize("tiny_blocks", [False, True])
@pytest.mark.parametrize(
    "retention",
    [
        Retention(head=3, tail=4, salient=5, per_template=2, max_streams=64),
        Retention(head=0, tail=0, salient=2, per_template=1, max_streams=9),
        Retention(head=40, tail=2, salient=50, per_template=3, max_streams=300),
    ],
    ids=["small", "no-head-no-tail", "large"],
)
def test_salient_lines_of_many_streams_offered_from_one_batch(tiny_blocks: bool, retention: Retention) -> None:
    """A columnar block makes all its kept salient lines strings and templates at once, and each
    stream offers its own from that batch: heads that end inside a block, budgets (the global
    stream's four times larger) spent part-way, templates kept ``per_template`` times, masked
    salient lines, overflow streams; the same bundle as the line path."""
    rng = random.Random(retention.head)
    kinds = [
        "Error {n} in step {n}",
        "Warning: slow shard {n}",
        "RuntimeError: host=gpu-node-{r} failed",
        "step {n} loss 1.{n}",
        "NCCL WARN timeout {n}",
        "Traceback (most recent call last):",
    ]
    lines = []
    for _ in range(6000):
        r = rng.randrange(80)
        text = rng.choice(kinds).format(n=rng.randrange(1000), r=r)
        lines.append(text if rng.random() < 0.08 else f"[rank{r}]: {text}")  # some global lines
    text = "\n".join(lines) + "\n"
    _assert_same(text, retention=retention, tiny_blocks=tiny_blocks)


def test_the_columnar_path_is_taken_for_large_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    original = ingest.Builder._add_block_columnar

    def spy(self: Any, raw: bytes, *args: Any) -> int:
        calls.append(len(raw))
        return original(self, raw, *args)

    monkeypatch.setattr(ingest.Builder, "_add_block_columnar", spy)
    assert ingest.COLUMNAR_MIN_BYTES is not None
    line = "[rank3]: step 1 loss 2.0\n"
    read_logs(text=line * (ingest.COLUMNAR_MIN_BYTES // len(line) + 10))
    assert calls
    calls.clear()
    read_logs(text=line * 10)  # small: line by line, pyarrow not needed
    assert not calls


def _timestamp_like(rng: random.Random) -> str:
    pieces = [
        rng.choice(["", "[", "[["]),
        rng.choice(["2024", "202", "20245", "١٢٣٤"]),
        rng.choice(["-05-01", "-5-01", "-05-01x"]),
        rng.choice(["T", " ", "_", ""]),
        rng.choice(["17:04:52", "17:04", "17:04:5x"]),
        rng.choice(["", ".5", ",123456", "." + "7" * rng.randint(0, 70), ".", ",x"]),
        rng.choice(["", "Z", "+01:00", "-0130", "+01:", "+1", "+01:0", "-01:00Z"]),
        rng.choice(["", "]", "]]"]),
        rng.choice(["", ":", "::"]),
        rng.choice(["", " ", "\t", " \t ", " " * rng.randint(0, 80), "x"]),
        rng.choice(["", "[rank3]: ", "[rank3]:x", "[default12]:  y", "[rank1234567]: z", "msg"]),
    ]
    return "".join(pieces)


def test_timestamps_and_rank_prefixes_read_as_the_line_parser_reads_them() -> None:
    rng = random.Random(19)
    lines = [_timestamp_like(rng) for _ in range(4000)]
    text = "".join(f"{line} error {i}\n" for i, line in enumerate(lines))
    _assert_same(text)
    _assert_same(text, retention=TINY, tiny_blocks=True)
    ascii_only = "".join(f"{line} error {i}\n" for i, line in enumerate(lines) if line.isascii())
    _assert_same(ascii_only, retention=Retention(head=1, tail=2000, salient=0, per_template=1))


@pytest.mark.parametrize("block", [97, 98, 99, 100, 101, 150, 4096])
def test_a_launcher_summary_cut_by_a_block_boundary_is_read_whole(block: int) -> None:
    """The summary's field lines after the cut carry no launcher marker: they are still fed on."""
    path = REPO / "data/examples/jobs/host-oom"
    saved = getattr(ingest, "iter_blocks")  # noqa: B009
    setattr(ingest, "iter_blocks", functools.partial(iter_blocks, block_chars=block))  # noqa: B010
    try:
        bundle = read_logs(path, retention=TINY)
    finally:
        setattr(ingest, "iter_blocks", saved)  # noqa: B010
    assert bundle.launcher is not None and bundle.launcher.root_cause is not None
    root = bundle.launcher.root_cause
    assert (root.rank, root.exitcode, root.signal, root.host) == (5, -9, "SIGKILL", "node-1")


@pytest.mark.parametrize("block", [7, 64, 97, 1 << 20])
def test_ascii_blocks_stay_bytes_and_read_as_the_text_reader_reads(block: int) -> None:
    data = (
        b"[rank0]: step 1 ok\n[rank1]: caf\xc3\xa9 \xe2\x96\x88 50%\r 100%\n[rank0]: \x1b[31mred\x1b[0m\n"
        b"[rank1]: bad \xff byte\n[rank0]: " + b"y" * 300 + b"\n[rank0]: done\r\n[rank1]: last"
    )
    fast = list(iter_blocks(io.BytesIO(data), name="x", max_line_chars=120, block_chars=block))
    text = "".join(iter_text_blocks(io.BytesIO(data), name="x", max_line_chars=120, block_chars=block))
    assert "".join(b if isinstance(b, str) else b.decode("ascii") for b in fast) == text
    assert all(isinstance(b, str) or b.isascii() for b in fast)
    plain = list(iter_blocks(io.BytesIO(b"[rank0]: a\n[rank1]: b\n" * 50), name="x", max_line_chars=120))
    assert plain and all(isinstance(b, bytes) for b in plain)


def test_matching_line_ends_equal_matching_lines() -> None:
    """``matching_line_ends`` (anchored, skipping lines) ends where ``matching_lines`` (unanchored) does."""
    from denpex_ml.logs.columnar import matching_line_ends, matching_lines
    from denpex_ml.logs.secret_rules import _OPTIONS

    masker = Masker()
    masker.learn_hosts(["gpu-node-7.cluster.local", "node017", "h1x"])
    patterns = [
        (SALIENT_PATTERN.encode(), None),
        (masker._gate().pattern, _OPTIONS),
        (masker._gate().pattern + b"|" + masker._first_regex().pattern, _OPTIONS),
        (rb"(?m:^)[ \t]*x", None),
        (rb"\bab|cd\b", None),
    ]
    rng = random.Random(3)
    words = [
        b"ab",
        b"cd",
        b" x",
        b"x",
        b"ERROR",
        b"host=",
        b"gpu-node-7",
        b"10.0.0.1",
        b"\n",
        b"\n\n",
        b" ",
        b"\t",
        b"q",
    ]
    blocks = [b"", b"\n", b"x", b"ab\n", b"\nab", b"Error\n\nfail", "caf\u00e9 ERROR\nab\n".encode()]
    for path in sorted((REPO / "tests" / "fixtures").rglob("*.log"))[:40]:
        blocks.append(path.read_bytes())
    blocks += [b"".join(rng.choice(words) for _ in range(rng.randint(0, 40))) for _ in range(300)]
    for raw in blocks:
        for pattern, options in patterns:
            assert matching_line_ends(pattern, raw, options) == [e for _, e in matching_lines(pattern, raw, options)]


def test_retention_templates_equal_the_substitution() -> None:
    """Retention templates made once per digit-masked line (cached across calls) are the substitution's."""
    parts = ["0x", "0X", "x", "0", "1", "9", "07", "0xff", "0xG", "ab", "٣", "é", " ", "step", "-", "1.5"]
    rng = random.Random(9)
    texts = ["".join(rng.choice(parts) for _ in range(rng.randint(0, 12))) for _ in range(5000)]
    variants = ["".join(rng.choice("123456789") if c in "123456789" else c for c in t) for t in texts]
    for batch in (texts, variants, [t.replace("1", "0") for t in texts]):
        assert retention_templates(batch) == [_TEMPLATE.sub("#", t) for t in batch]


def _rank_prefixes_reference(head: Any) -> tuple[Any, Any, Any]:
    """The previous ``columnar.rank_prefixes`` (byte comparisons row-wise, cumulative products)."""
    import numpy as np

    n = len(head)
    pre = np.zeros(n, dtype=np.int64)
    ranks = np.full(n, -1, dtype=np.int64)
    for word in (b"[rank", b"[default"):
        off = len(word)
        rows = np.flatnonzero((head[:, :off] == np.frombuffer(word, dtype=np.uint8)).all(axis=1))
        if not len(rows):
            continue
        h = head[rows, off : off + 10].astype(np.int64)
        digit = (h >= 48) & (h <= 57)
        run = np.cumprod(digit[:, :7], axis=1).sum(axis=1)
        at = np.arange(len(rows))
        close = np.minimum(run, 7)
        ok = (run >= 1) & (run <= 6) & (h[at, close] == 93) & (h[at, np.minimum(close + 1, 9)] == 58)
        value = np.zeros(len(rows), dtype=np.int64)
        for k in range(6):
            value = np.where(k < run, value * 10 + (h[:, k] - 48), value)
        space = h[at, np.minimum(close + 2, 9)] == 32
        pre[rows] = np.where(ok, off + run + 2 + space, 0)
        ranks[rows] = np.where(ok, value, -1)
    return np.zeros(n, dtype=np.int64), pre, ranks


@pytest.mark.parametrize("seed", range(6))
def test_rank_prefixes_equal_the_reference(seed: int) -> None:
    """Word-wise, column-by-column ``rank_prefixes`` reads every window as the row-wise reference."""
    import numpy as np

    from denpex_ml.logs.columnar import rank_prefixes

    rng = random.Random(seed)
    heads = [b"[rank", b"[default", b"[ran", b"[defaul", b"[Rank", b"x[rank", b"", b"[rank[rank"]
    tails = [b"0", b"7", b"12", b"123456", b"1234567", b"00000012", b"", b"/", b":", b"\xff", b"9" * 9]
    ends = [b"]:", b"]: ", b"]:  ", b"]", b"] :", b":]", b"]:x", b"]\n", b"]:\n"]
    rows = []
    for _ in range(3000):
        line = rng.choice(heads) + rng.choice(tails) + rng.choice(ends) + bytes(rng.randrange(256) for _ in range(4))
        if rng.random() < 0.1:
            line = bytes(rng.randrange(256) for _ in range(rng.randint(0, 18)))
        rows.append((line + b"\n" * 18)[:18])
    uniform = [(b"[rank%d]: x" % rng.randrange(10**6) + b" " * 18)[:18] for _ in range(500)]
    for group in (rows, uniform, rows[:1], rows[:0]):
        head = np.frombuffer(b"".join(group), dtype=np.uint8).reshape(len(group), 18)
        for got, want in zip(rank_prefixes(head), _rank_prefixes_reference(head), strict=True):
            assert got.tolist() == want.tolist()
