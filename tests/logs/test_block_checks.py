"""Cheap block-level checks stand in for a pass over the block only where they agree with it."""

from __future__ import annotations

import json
import random

import pytest

from denpex_ml.logs import normalize


@pytest.mark.parametrize("limit", [1, 2, 3, 7, 8, 64, 65, 1000])
def test_no_line_longer_only_where_no_line_is_longer(limit: int) -> None:
    """``_no_line_longer`` (a search per run of limit // 2 bytes) is never true where ``_longest_line``
    (numpy, every newline) finds a longer line, and the block is cleaned as before."""
    rng = random.Random(limit)
    lengths = [0, 1, limit // 2 - 1, limit // 2, limit // 2 + 1, limit - 1, limit, limit + 1, limit + 2, 2 * limit]
    for _ in range(400):
        lines = [b"x" * rng.choice([*lengths, rng.randint(0, 3 * limit)]) for _ in range(rng.randint(1, 30))]
        raw = b"\n".join(lines) + rng.choice([b"\n", b""])
        if normalize._no_line_longer(raw, limit):
            assert normalize._longest_line(raw) <= limit
        saved = normalize._no_line_longer
        try:
            normalize._no_line_longer = lambda _raw, _limit: False  # type: ignore[assignment]
            reference = normalize._clean_block(raw + b"\n", limit)
        finally:
            normalize._no_line_longer = saved  # type: ignore[assignment]
        assert normalize._clean_block(raw + b"\n", limit) == reference
    assert normalize._no_line_longer(b"ab\n" * 1000, 64)  # the common case takes the cheap answer


@pytest.mark.parametrize("seed", range(4))
def test_line_windows_equal_the_index_path(seed: int) -> None:
    """``LineTable.window`` by sliding windows reads what an index per byte reads, past the end too."""
    import numpy as np

    from denpex_ml.logs.columnar import LineTable

    rng = random.Random(seed)
    for _ in range(200):
        raw = b"".join(b"y" * rng.randint(0, 30) + b"\n" for _ in range(rng.randint(1, 40)))
        table = LineTable(raw)
        data = np.frombuffer(raw, dtype=np.uint8)
        for width in (1, 5, 18, 64, len(raw), len(raw) + 3):
            rows = np.array(sorted(rng.sample(range(table.n), rng.randint(0, table.n))), dtype=np.int64)
            skip = np.array([rng.randint(0, 40) for _ in rows], dtype=np.int64)
            for args, first in (((), table.starts), ((rows, skip), table.starts[rows] + skip)):
                got = table.window(raw, width, *args)
                want = LineTable._window_by_index(data, first, width)
                assert got.shape == want.shape and (got == want).all()


def test_contains_is_the_substring_test() -> None:
    """``patterns.contains`` (RE2, Latin-1, literal) answers as ``literal in data`` on any bytes."""
    from denpex_ml.logs.normalize import TRUNCATION_MARK
    from denpex_ml.logs.patterns import contains

    rng = random.Random(1)
    alphabet = b"PF\xe2\x80\xa6ab\n \x00\xff.*("
    for _ in range(20000):
        literal = bytes(rng.choice(alphabet) for _ in range(rng.randint(1, 4)))
        data = bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        assert contains(literal, data) == (literal in data), (literal, data)
    for literal in (b"Failures:", b"PRIVATE KEY"):
        assert contains(literal, b"x\xff\n" + literal + b"\n")
        assert not contains(literal, b"x\xff\n" + literal[:-1] + b"\n" + literal[1:])
    assert not TRUNCATION_MARK.isascii()  # an ASCII block holds no truncation mark: it is not counted


@pytest.mark.parametrize("seed", range(4))
def test_nccl_hosts_of_lines_equal_nccl_hosts(seed: int) -> None:
    """The hosts of a block's NCCL lines found with numpy and one findall are ``nccl_hosts``' own."""
    from denpex_ml.logs.columnar import LineTable
    from denpex_ml.logs.nccl_lines import nccl_hosts, nccl_hosts_of_lines

    rng = random.Random(seed)
    heads = [b"", b"[rank3]:", b"[rank3]: ", b"[default12]:", b"[rank]:", b"x ", b"2024-05-01 10:00:00 ", b"  "]
    hosts = [b"gpu-1", b"node017.cluster.local", b"a_b", b"-x", b"10.1.2.3", b"h" * 300, b"", b"g:h"]
    tails = [
        b" NCCL INFO ring",
        b" NCCL WARN x NCCL",
        b" NCCLX",
        b" NCC",
        b" NCCL INFO peer gpu-b2:3:4 [1] NCCL INFO y",
    ]
    for _ in range(300):
        lines = []
        for _ in range(rng.randint(0, 12)):
            pid = b"%d:%d" % (rng.randint(0, 99), rng.randint(0, 99)) if rng.random() < 0.9 else b"1:x"
            dev = b" [%d]" % rng.randint(0, 9) if rng.random() < 0.9 else b"[1]"
            lines.append(rng.choice(heads) + rng.choice(hosts) + b":" + pid + dev + rng.choice(tails))
            if rng.random() < 0.3:
                lines.append(b"plain line " + rng.choice(tails))
        raw = b"".join(line + b"\n" for line in lines)
        table = LineTable(raw)
        assert nccl_hosts_of_lines(raw, table.starts, table.ends) == nccl_hosts(raw), raw
    raw = b"[rank1]:gpu-9:1:2 [0] NCCL INFO x\n" * 50
    table = LineTable(raw)
    assert nccl_hosts_of_lines(raw, table.starts, table.ends) == {b"gpu-9"}


def _corpus() -> list[str]:
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    texts = [
        p.read_text(encoding="utf-8", errors="replace") for p in sorted((root / "tests" / "fixtures").rglob("*.log"))
    ]
    for path in sorted((root / "data" / "real").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines()[:150]:
            row = json.loads(line) if line.strip() else {}
            if isinstance(row.get("log"), str):
                texts.append(row["log"])
    rng = random.Random(7)
    words = ["gpu-node-7.cluster.local", "10.0.0.1", "fe80::1", "host=n1", "/home/bob/x", "token=abc123def456",
             "bob@example.com", "ip-1.com", "a.b.local-", "x", " ", "\n", "--host n2", "::", "node-3", "KEY-----1.2.3.4.com"]  # fmt: skip
    texts += ["".join(rng.choice(words) for _ in range(rng.randint(0, 60))) for _ in range(400)]
    return texts


def test_masking_without_a_generator_masks_as_through_finditer(monkeypatch: pytest.MonkeyPatch) -> None:
    """``_substitute`` stepping through the matches itself gives ``_finditer``'s substitution, and the
    FQDN stage's learned-name cache gives what asking again gives: the same text, counts, pseudonyms."""
    from denpex_ml.logs import masking, secret_rules
    from denpex_ml.logs.masking import Masker

    class NoStore(dict[bytes, bytes]):
        def __setitem__(self, key: bytes, value: bytes) -> None:
            pass

    def run(cache: bool) -> tuple[list[str], dict[str, int], list[tuple[str, str]]]:
        masker = Masker()
        if not cache:
            masker._fqdn_known = NoStore()
        out = [masker.mask(text) for text in _corpus()]
        out += [masker.mask(text) for text in _corpus()[-50:]]  # names learned: the cache answers
        return out, dict(masker.counts), list(masker.reveal_map().items())

    fast = run(True)
    monkeypatch.setattr(secret_rules, "_substitute", secret_rules._substitute_iter)
    monkeypatch.setattr(masking, "_substitute", secret_rules._substitute_iter)
    assert run(False) == fast


@pytest.mark.parametrize("seed", range(5))
def test_factored_names_substitute_as_the_look_behind_pattern(seed: int) -> None:
    """Learned names with their common prefix first are replaced where and as ``_known_rx`` replaces them."""
    import re

    from denpex_ml.logs.masking import Masker, _factored_names

    rng = random.Random(seed)
    prefix = rng.choice(["gpu-node-", "gpu", "n.1", "ab-"])
    names = sorted({prefix + rng.choice(["", "1", "12", "1.cluster.local", "2", "x", "-3", "1-2"]) for _ in range(12)})
    names = [n for n in names if n] or [prefix + "1"]
    masker = Masker()
    masker.learn_hosts(names)
    free = masker._free
    ordered = sorted(free, key=len, reverse=True)
    factored = _factored_names(ordered)
    if len(min(ordered, key=len)) < 3 or factored is None:
        return
    reference = re.compile(rb"(?<![A-Za-z0-9])(?:" + b"|".join(re.escape(h) for h in ordered) + rb")(?![A-Za-z0-9])")
    pieces = [n.encode() for n in names] + [b"x", b"1", b" ", b"\n", b"-", b".", b"gpu", b"node-", b"A", b":"]
    for _ in range(2000):
        data = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        assert factored.sub(lambda m: free[m.group()], data) == reference.sub(lambda m: free[m.group()], data), data
        assert masker._mask_known(data) == masker._sub_known(data), data
