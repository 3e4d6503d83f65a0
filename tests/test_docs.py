"""The README and the docs are run, so they cannot drift from the code (#17).

* every ``denpex-ml …`` command shown in a code block parses with the real command line;
* the first-hour walk-through runs as written, with the shipped model: classify an example,
  make and score an archive, read the results with pandas (the doc's own Python blocks),
  label an incident; retraining and mlflow are exercised by their own tests.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest

from denpex_ml.cli import build_parser, main

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def _blocks(path: Path, lang: str | None = None) -> list[str]:
    text = path.read_text(encoding="utf-8")
    out = []
    for m in re.finditer(r"^```([a-z]*)\n(.*?)^```", text, re.S | re.M):
        if lang is None or m.group(1) == lang:
            out.append(m.group(2))
    return out


def _commands() -> list[tuple[str, str]]:
    """(where, command line) of every ``denpex-ml`` invocation in a code block."""
    found = []
    for path in DOCS:
        for block in _blocks(path):
            text = block.replace("\\\n", " ")
            for line in text.splitlines():
                line = line.strip().removeprefix("$ ")
                for part in re.split(r"&&|\|\|", line):
                    part = re.sub(r"\s+#.*$", "", part).strip()
                    if part.startswith("denpex-ml "):
                        found.append((f"{path.name}: {part}", part))
    return found


COMMANDS = _commands()


def test_the_docs_show_commands() -> None:
    assert len(COMMANDS) >= 15


@pytest.mark.parametrize(("where", "command"), COMMANDS, ids=[w for w, _ in COMMANDS])
def test_every_documented_command_parses(where: str, command: str) -> None:
    argv = shlex.split(re.sub(r"\[[^\]]*\]", "", command))[1:]  # optional [--flags] shown in brackets
    if {"--version", "--help", "-h"} & set(argv):
        return
    try:
        build_parser().parse_args(argv)
    except SystemExit as exc:  # argparse's usage error
        pytest.fail(f"{where}: does not parse (exit {exc.code})")


def test_first_hour_walkthrough_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = REPO / "docs" / "first-hour.md"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").symlink_to(REPO / "data")
    # classify one job: the doc's first output line
    assert main(["classify", "data/examples/jobs/cuda-oom"]) == 0
    shown = next(b for b in _blocks(doc, "console") if "denpex-ml classify data/examples" in b)
    assert shown.splitlines()[1] in capsys.readouterr().out
    # an archive of jobs, scored (fewer jobs than the doc's 72, same commands)
    assert main(["synth", "--per-class", "1", "--seed", "7", "--out", "failed-jobs.tar.gz"]) == 0
    assert main(["score", "failed-jobs.tar.gz", "-o", "results.parquet", "--workers", "1"]) == 0
    # the doc's Python blocks, in order (the mlflow registry and notebook-only ones aside)
    namespace: dict[str, object] = {}
    for block in _blocks(doc, "python"):
        if "mlflow" in block:
            continue
        exec(compile(block.replace("workers=2", "workers=1"), f"{doc.name} block", "exec"), namespace)
    assert "df" in namespace and len(namespace["df"]) > 0  # type: ignore[arg-type]
    # label an incident, as shown
    add = next(
        line.removeprefix("$ ") for b in _blocks(doc, "console") for line in b.splitlines() if "incidents add" in line
    )
    assert main(shlex.split(add)[1:]) == 0
    assert (tmp_path / "incidents" / "incidents.jsonl").is_file()
    assert os.listdir(tmp_path / "incidents")
