"""The CLI: commands, exit codes, output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from denpex_ml.cli import main
from denpex_ml.cli.console import EXIT_INPUT_ERROR, EXIT_OK, EXIT_USAGE

REPO = Path(__file__).resolve().parents[1]


def test_help_lists_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == EXIT_OK
    out = capsys.readouterr().out
    for cmd in (
        "classify",
        "eval",
        "incidents",
        "ingest",
        "mlflow-log",
        "report",
        "retrain",
        "score",
        "serve",
        "synth",
        "taxonomy",
        "train",
    ):
        assert f"    {cmd} " in out or f"    {cmd}\n" in out, cmd


def test_incidents_command_is_registered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``denpex-ml incidents`` as installed (no test-side registration)."""
    monkeypatch.setenv("DENPEX_INCIDENTS", str(tmp_path / "store"))
    assert main(["incidents", "list", "--json"]) == EXIT_OK
    assert json.loads(capsys.readouterr().out) == []


def test_taxonomy_list_and_show(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["taxonomy", "list"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "moe-ep-overlap-deadlock" in out and "unknown" in out
    assert main(["taxonomy", "show", "nccl-network-error", "--json"]) == EXIT_OK
    assert json.loads(capsys.readouterr().out)["id"] == "nccl-network-error"
    assert main(["taxonomy", "show", "no-such-id"]) == EXIT_INPUT_ERROR


def test_usage_and_input_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["no-such-command"]) == EXIT_USAGE
    assert main(["ingest", str(tmp_path / "missing.log")]) == EXIT_INPUT_ERROR
    err = capsys.readouterr().err
    assert "missing.log" in err and "Traceback" not in err


def test_synth_writes_jsonl_and_archives(tmp_path: Path) -> None:
    out = tmp_path / "s.jsonl"
    assert main(["synth", "--per-class", "1", "--seed", "1", "--label", "cuda-oom", "--out", str(out)]) == EXIT_OK
    rec = json.loads(out.read_text().splitlines()[0])
    assert rec["label"] == "cuda-oom" and rec["source"].startswith("synthetic:")
    assert main(["synth", "--per-class", "1", "--label", "host-oom", "--out", str(tmp_path / "a.tar.gz")]) == EXIT_OK
    assert (tmp_path / "a.tar.gz").stat().st_size > 0
    assert main(["synth", "--per-class", "0", "--out", str(tmp_path / "x.jsonl")]) == EXIT_USAGE


def test_classify_json_with_a_model(tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = REPO / "data" / "examples" / "jobs" / "cuda-oom"
    assert main(["classify", str(job), "--model", str(tiny_model_dir), "--json"]) == EXIT_OK
    d = json.loads(capsys.readouterr().out)
    assert d["label"] == "cuda-oom" and d["best_guess"] == "cuda-oom" and d["fix"]


def test_error_messages_are_masked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import io
    import tarfile

    archive = tmp_path / "a.tar"
    with tarfile.open(archive, "w") as tf:
        info = tarfile.TarInfo("../alice@example.com-10.1.2.3.log")
        info.size = 6
        tf.addfile(info, io.BytesIO(b"hello\n"))
    assert main(["classify", str(archive)]) == EXIT_INPUT_ERROR
    err = capsys.readouterr().err
    assert "contains '..'" in err  # the error still says what is wrong
    assert "alice" not in err and "example.com" not in err
