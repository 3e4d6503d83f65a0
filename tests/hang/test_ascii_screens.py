"""RE2 screens of the hang scan's Python patterns (``AsciiScreen``, the phase rules' RE2 set) answer
as the patterns do: on every line of the real logs and fixtures, and on generated ASCII text rich
in the constructs where RE2 and Python could differ (``\\s`` and its control characters, case)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import re2
from hypothesis import given, settings
from hypothesis import strategies as st

from denpex_ml.hang import phase, scan
from denpex_ml.logs.patterns import AsciiScreen, ascii_screen_source

REPO = Path(__file__).resolve().parents[2]
PATTERNS: list[re.Pattern[str]] = [
    scan._KEYS,
    scan._CONTEXT_HINT,
    *(r[2] for r in phase._RULES),
    *(r[1] for r in phase._RULES),
    *scan._CONTEXT.values(),
    scan._NRANKS,
    scan._STORE,
    scan._WATCHDOG,
    scan._PG,
    scan._ENQUEUED_SHORT,
]
WORDS = [
    "step", "loss", "Epoch", "eval", "Saving", "checkpoint", "moe", "MoE", "FSDP", "dispatch", "timed out",
    "time out", "generating", "token", "Rendezvous", "training done", "Map (num_proc=4):", "iter", "=", ":",
    "%", "| ", "Eval", "epoch 3 done", "loss: 1.5", "'loss': 2", "rollout", "zero", "pp_", "p2p", "Deep_EP",
    "Stage3", "store", "ocket", "imed out", "12", "3.5", " ", "\t", "\x0b", "\x0c", "\x1c", "\x1f", "\r",
]  # fmt: skip


def _same(text: str) -> None:
    for rx in PATTERNS:
        assert AsciiScreen(rx).search(text) == (rx.search(text) is not None), (rx.pattern, text)
    ref = next((p for p, _, r in phase._RULES if r.search(text)), phase.Phase.UNKNOWN)
    assert phase.phase_of([], [text]) == ref, text


def test_screens_compile() -> None:
    assert phase._LINE_SET is not None
    assert scan._KEYS_SCREEN._match is not None and scan._CONTEXT_HINT_SCREEN._match is not None


def test_screen_source_writes_out_python_whitespace() -> None:
    source = ascii_screen_source(r"a\s[\sb]x", re.IGNORECASE)
    assert source is not None
    rx = re2.compile(source)
    for ws in " \t\x0b\x0c\r\x1c\x1d\x1e\x1f":
        assert rx.search(f"A{ws}{ws}X") is not None
    assert ascii_screen_source(r"a{,3}") is None  # RE2 reads "{,3}" as text
    assert AsciiScreen(re.compile(r"(?<=a)b"))._match is None  # no RE2 reading: Python alone
    assert AsciiScreen(re.compile(r"b$")).search("ab\n")  # a newline goes to Python's re


def test_real_and_fixture_lines() -> None:
    texts: set[str] = set()
    for path in sorted((REPO / "data" / "real").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                texts.update(json.loads(line)["log"].split("\n"))
    for path in sorted((REPO / "tests" / "fixtures").rglob("*.log")):
        texts.update(path.read_text(encoding="utf-8", errors="replace").split("\n"))
    assert len(texts) > 1000
    for text in texts:
        _same(text)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(WORDS), st.characters(max_codepoint=127)), max_size=14))
def test_generated_ascii(parts: list[str]) -> None:
    _same("".join(parts))
