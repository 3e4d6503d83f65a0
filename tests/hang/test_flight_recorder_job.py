"""A job folder holding Flight Recorder dumps: read safely at ingestion, analysed across ranks."""

from __future__ import annotations

import os
import pickle
import shutil
from pathlib import Path

import pytest

from denpex_ml.errors import FlightRecorderError
from denpex_ml.features.structure import analyse_structure
from denpex_ml.hang.analysis import analyse_hang
from denpex_ml.hang.flight_recorder import analyse_flight_recorder
from denpex_ml.logs import read_logs

FR = Path(__file__).resolve().parents[1] / "fixtures" / "flight_recorder"


def _report(path: Path):  # type: ignore[no-untyped-def]
    b = read_logs(path)
    fr = analyse_flight_recorder(b.flight_recorder) if b.flight_recorder else None
    return b, analyse_hang(b, analyse_structure(b), flight_recorder=fr)


@pytest.mark.parametrize(("case", "signal", "blamed"), [("mismatch", "mismatch", 2), ("missing", "missing-rank", 3)])
def test_dumps_in_a_job_folder_blame_the_rank(case: str, signal: str, blamed: int) -> None:
    b, rep = _report(FR / case)
    assert sorted(b.flight_recorder) == [0, 1, 2, 3]
    assert b.formats["flight-recorder"] == 8  # pickle and JSON dump of every rank
    assert rep.is_hang and rep.suspects == (blamed,)
    assert f"signal:flight-recorder-{signal}" in rep.signals
    assert rep.flight_recorder is not None and rep.flight_recorder["kind"] == signal


def test_healthy_dumps_are_no_hang() -> None:
    _, rep = _report(FR / "healthy")
    assert not rep.is_hang


class _Evil:
    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (os.system, (f"touch {self.target}",))

    target = ""


def test_hostile_pickle_among_the_logs_is_skipped_never_run(tmp_path: Path) -> None:
    job = tmp_path / "job"
    shutil.copytree(FR / "missing", job)
    (job / "rank0.log").write_text("[rank0]: step 3 loss 1.0\n")
    evil = _Evil()
    evil.target = str(tmp_path / "pwned")
    payload = pickle.dumps({"version": "2.10", "pg_config": {}, "entries": [evil]}, protocol=2)
    (job / "fr_trace_rank_9").write_bytes(payload)
    b = read_logs(job)
    assert not (tmp_path / "pwned").exists()
    assert 9 not in b.flight_recorder and sorted(b.flight_recorder) == [0, 1, 2, 3]
    assert any("fr_trace_rank_9" in w for w in b.warnings)
    # read as a single file it is refused with the typed error
    with pytest.raises(FlightRecorderError):
        read_logs(job / "fr_trace_rank_9")
    assert not (tmp_path / "pwned").exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("case", "label", "rank"),
    [("mismatch", "collective-mismatch", 2), ("missing", "subset-rank-collective-hang", 3)],
)
def test_a_job_of_dumps_alone_is_diagnosed_from_them(case: str, label: str, rank: int) -> None:
    from denpex_ml import classify

    d = classify(FR / case)
    assert (d.label, d.initiating_rank) == (label, rank)
    assert d.hang is not None and d.hang.flight_recorder is not None
    assert "Flight Recorder:" in d.summary()
