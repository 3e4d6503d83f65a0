"""Batch scoring under stress: job time limits, workers that die with their parent, output paths
that would destroy the input, cut rows on resume, a full disk, and ``-o -``.

Most tests use a fake model (no model is loaded), so worker processes start fast.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

import denpex_ml.batch.output as output_mod
from denpex_ml.batch import JobResult, ModelSpec, ResultSink, discover_jobs, read_results, score_jobs
from denpex_ml.batch.output import check_output_path
from denpex_ml.batch.score import WorkerPool
from denpex_ml.batch.worker import score_job
from denpex_ml.cli import main
from denpex_ml.cli.console import EXIT_INPUT_ERROR, EXIT_OK, EXIT_PARTIAL, EXIT_USAGE
from denpex_ml.errors import InvalidInputError, OutputPathError, OutputWriteError
from denpex_ml.logs import LogBundle
from denpex_ml.model.diagnosis import Diagnosis
from denpex_ml.taxonomy import load_taxonomy

OOM = "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
SLOW = "[rank0]: SLEEP-FOREVER\n"
#: Set in the environment: a directory where the fake model notes which jobs it started.
MARKS = "DENPEX_TEST_MARKS"


class FakeModel:
    """Scores every job as ``unknown`` at once, or sleeps on a job whose log says so."""

    model_id = "fake@000000000000"

    def __init__(self) -> None:
        self.entry = load_taxonomy().get("unknown")

    def diagnose(self, bundle: LogBundle, started: float | None = None) -> Diagnosis:
        if "SLEEP-FOREVER" in bundle.text():
            marks = os.environ.get(MARKS)
            if marks:
                Path(marks, f"started-{os.getpid()}").touch()
            for _ in range(3600):
                try:
                    time.sleep(1.0)
                except Exception:  # swallows the first interruption: the timer must fire again
                    time.sleep(30.0)
        return Diagnosis(
            label="unknown", confidence=0.5, alternatives=[("unknown", 0.5)], initiating_rank=None, entry=self.entry
        )


class FakeSpec(ModelSpec):
    def load(self):  # type: ignore[no-untyped-def]
        return FakeModel()


def _jobs(root: Path, *, slow: int = 0, ok: int = 3) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(slow):
        (root / f"slow-{i}.log").write_text(SLOW)
    for i in range(ok):
        (root / f"job-{i}.log").write_text(OOM)
    return root


def _rows(n: int) -> list[JobResult]:
    out = []
    for i in range(n):
        out.append(
            JobResult(
                f"j{i}",
                label="cuda-oom",
                title="CUDA out of memory",
                confidence=0.9,
                abstained=False,
                alternatives=[{"label": "cuda-oom", "probability": 0.9}],
                evidence=[{"rank": 1, "source": "r.log", "line": 3, "text": 'a "quoted", line', "why": "fp"}],
                warnings=["w"],
                model="m@1",
            )
        )
    return out


# -- job time limit ------------------------------------------------------------------------------
def test_a_job_over_the_time_limit_is_a_timeout_row_its_worker_replaced(tmp_path: Path) -> None:
    root = _jobs(tmp_path / "jobs", slow=1, ok=4)
    pool = WorkerPool(2, FakeSpec("unused"), None, job_timeout=2.0)
    first = pool.executor
    rows = {r.job_id: r for r in pool.run(discover_jobs(root))}
    assert len(rows) == 5
    assert rows["slow-0.log"].error_type == "JobTimeoutError"
    assert "2 s" in (rows["slow-0.log"].error or "") and "replaced" in (rows["slow-0.log"].error or "")
    assert all(r.ok for job_id, r in rows.items() if job_id != "slow-0.log")
    assert pool.executor is not first  # the pool was rebuilt around the killed worker


def test_in_process_time_limit_interrupts_even_a_job_that_swallows_it(tmp_path: Path) -> None:
    (job,) = discover_jobs(_jobs(tmp_path / "jobs", slow=1, ok=0))
    t0 = time.monotonic()
    row = score_job(FakeModel(), job, timeout=0.5)  # type: ignore[arg-type]
    assert row.error_type == "JobTimeoutError"
    assert time.monotonic() - t0 < 20  # the job sleeps for an hour, and swallows the first interruption
    (fine,) = discover_jobs(_jobs(tmp_path / "fine", ok=1))
    assert score_job(FakeModel(), fine, timeout=5.0).ok  # type: ignore[arg-type]
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)  # the timer is disarmed afterwards


def test_score_jobs_validates_its_arguments(tmp_path: Path) -> None:
    jobs = discover_jobs(_jobs(tmp_path / "jobs", ok=1))
    for kwargs in ({"limits": "x"}, {"job_timeout": -1}, {"job_timeout": "soon"}, {"workers": 0}):
        with pytest.raises(InvalidInputError):
            next(score_jobs(jobs, model=tmp_path, **kwargs))  # type: ignore[arg-type]


def test_cli_passes_the_job_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []

    def fake_score_jobs(jobs: Any, **kwargs: Any) -> Iterator[JobResult]:
        seen.append(kwargs["job_timeout"])
        for j in jobs:
            yield JobResult(j.id, label="unknown", confidence=0.5)

    monkeypatch.setattr("denpex_ml.batch.score.score_jobs", fake_score_jobs)
    root = _jobs(tmp_path / "jobs", ok=2)
    assert main(["score", str(root), "-o", str(tmp_path / "a.jsonl"), "--quiet"]) == EXIT_OK
    assert main(["score", str(root), "-o", str(tmp_path / "b.jsonl"), "--quiet", "--job-timeout", "7.5"]) == EXIT_OK
    assert main(["score", str(root), "-o", str(tmp_path / "c.jsonl"), "--quiet", "--job-timeout", "0"]) == EXIT_OK
    assert seen == [300.0, 7.5, None]
    assert main(["score", str(root), "-o", str(tmp_path / "d.jsonl"), "--job-timeout", "-1"]) == EXIT_USAGE


# -- workers die with their parent -------------------------------------------------------------
_PARENT = """
import importlib, sys
if __name__ == "__main__":  # spawned workers import this file too
    spec_mod = importlib.import_module({module!r})
    import denpex_ml.batch.score as score
    score.ModelSpec = spec_mod.FakeSpec
    score.read_model_dir = lambda path: None
    from denpex_ml.cli import main
    sys.exit(main(["score", {jobs!r}, "-o", {out!r}, "--workers", "2", "--quiet"]))
"""


def test_sigkill_of_the_parent_leaves_no_worker_running(tmp_path: Path) -> None:
    root = _jobs(tmp_path / "jobs", slow=2, ok=0)
    marks = tmp_path / "marks"
    marks.mkdir()
    script = tmp_path / "parent.py"
    script.write_text(_PARENT.format(module=FakeSpec.__module__, jobs=str(root), out=str(tmp_path / "out.jsonl")))
    env = {**os.environ, MARKS: str(marks), "PYTHONPATH": os.pathsep.join(sys.path)}
    parent = subprocess.Popen([sys.executable, str(script)], env=env)
    try:
        deadline = time.monotonic() + 120
        while len(list(marks.iterdir())) < 2 and time.monotonic() < deadline and parent.poll() is None:
            time.sleep(0.2)
        assert len(list(marks.iterdir())) == 2, "the workers never started their jobs"
        children = psutil.Process(parent.pid).children(recursive=True)
        worker_pids = {int(p.name.split("-")[1]) for p in marks.iterdir()}
        assert worker_pids <= {c.pid for c in children}
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    _gone, alive = psutil.wait_procs(children, timeout=30)
    for proc in alive:  # leave nothing behind, even when the test fails
        proc.kill()
    assert not alive, f"still running after the parent was killed: {[p.pid for p in alive]}"


# -- nothing destroyed ---------------------------------------------------------------------------
def test_output_that_is_an_input_job_is_refused_even_with_overwrite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _jobs(tmp_path / "jobs", ok=2)
    victim = root / "job.jsonl"
    victim.write_text(OOM)
    for extra in ([], ["--overwrite"], ["--resume"]):
        assert main(["score", str(root), "-o", str(victim), *extra]) == EXIT_USAGE
        assert "inside the input directory" in capsys.readouterr().err
    assert victim.read_text() == OOM
    assert main(["score", str(root), "-o", str(root / "sub" / "new.csv")]) == EXIT_USAGE
    assert not (root / "sub").exists()
    assert sorted(p.name for p in root.iterdir()) == ["job-0.log", "job-1.log", "job.jsonl"]  # no stray file


def test_output_equal_to_the_input_file_or_archive_is_refused(tmp_path: Path) -> None:
    log = tmp_path / "one.jsonl"
    log.write_text(OOM)
    arc = tmp_path / "jobs.tar"
    with tarfile.open(arc, "w") as tf:
        tf.add(log, arcname="j1/rank0.log")
    before = arc.read_bytes()
    assert main(["score", str(log), "-o", str(log), "--overwrite"]) == EXIT_USAGE
    assert main(["score", str(arc), "-o", str(arc), "--format", "jsonl", "--overwrite"]) == EXIT_USAGE
    link = tmp_path / "link.jsonl"
    link.symlink_to(log)
    assert main(["score", str(log), "-o", str(link), "--overwrite"]) == EXIT_USAGE
    assert log.read_text() == OOM and arc.read_bytes() == before
    # a temporary next to the output would replace the input: refused too
    tmp_input = tmp_path / "r.jsonl.tmp"
    tmp_input.write_text(OOM)
    with pytest.raises(OutputPathError, match=r"r\.jsonl\.tmp"):
        check_output_path(tmp_path / "r.jsonl", source=tmp_input)


def test_output_inside_the_input_is_fine_where_it_is_never_read(tmp_path: Path) -> None:
    root = _jobs(tmp_path / "jobs", ok=1)
    check_output_path(root / ".results.jsonl", source=root)
    check_output_path(root / "results.csv", source=root, exclude=["results*"])
    check_output_path(tmp_path / "elsewhere.jsonl", source=root)
    with pytest.raises(OutputPathError, match="would be read as job"):
        check_output_path(root / "results.csv", source=root)


# -- output paths that cannot be written ---------------------------------------------------------
def _unwritable_dir(tmp_path: Path) -> Path:
    if os.geteuid() != 0:
        d = tmp_path / "ro"
        d.mkdir()
        d.chmod(0o500)
        return d
    try:  # root writes everywhere, except in sysfs
        fd = os.open("/sys/denpex-probe", os.O_CREAT | os.O_WRONLY, 0o600)
    except OSError:
        return Path("/sys")
    os.close(fd)
    pytest.skip("no directory this user cannot write in")


def test_output_path_problems_are_usage_errors_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def must_not_run(*a: Any, **k: Any) -> Any:
        raise AssertionError("work started")

    monkeypatch.setattr("denpex_ml.batch.jobs.discover_jobs", must_not_run)
    root = _jobs(tmp_path / "jobs", ok=1)
    a_file = tmp_path / "plain.txt"
    a_file.write_text("x")
    a_dir = tmp_path / "outdir"
    a_dir.mkdir()
    cases = {
        "is a directory": a_dir,
        "is a file, not a directory": a_file / "r.jsonl",
        "cannot create files": _unwritable_dir(tmp_path) / "r.jsonl",
    }
    for needle, out in cases.items():
        assert main(["score", str(root), "-o", str(out), "--overwrite"]) == EXIT_USAGE
        err = capsys.readouterr().err
        assert needle in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jobs", "outdir", "plain.txt"]  # no stray .tmp
    assert list(a_dir.iterdir()) == []
    assert main(["score", str(root), "-o", "-", "--format", "parquet"]) == EXIT_USAGE
    assert main(["score", str(root), "-o", "-", "--resume"]) == EXIT_USAGE


def test_dash_writes_jsonl_rows_to_stdout_and_the_summary_to_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def fake_score_jobs(jobs: Any, **kwargs: Any) -> Iterator[JobResult]:
        for j in jobs:
            yield JobResult(j.id, label="unknown", confidence=0.5)

    monkeypatch.setattr("denpex_ml.batch.score.score_jobs", fake_score_jobs)
    root = _jobs(tmp_path / "jobs", ok=2)
    assert main(["score", str(root), "-o", "-", "--format", "jsonl"]) == EXIT_OK
    captured = capsys.readouterr()
    rows = [json.loads(line) for line in captured.out.splitlines()]
    assert [r["job_id"] for r in rows] == ["job-0.log", "job-1.log"]
    assert "2 jobs" in captured.err
    assert not (tmp_path / "-").exists() and not Path("-").exists()


# -- resume reads only whole rows ----------------------------------------------------------------
@pytest.mark.parametrize(
    "tail",
    [
        'j9,ok,cuda-oom,CUDA OOM,0.9,False,cuda-oom,"[{""label"": ""cu',  # cut inside a JSON field
        "j9,ok,cuda-oom",  # cut after status,label
        "j9,ok,cuda-oom,CUDA OOM,0.9,False,cuda-oom,[],,,,[],[],1,2,3,0.1,[],,,m@",  # cut in the last field
    ],
)
def test_csv_resume_rescores_a_cut_row(tmp_path: Path, tail: str) -> None:
    out = tmp_path / "r.csv"
    with ResultSink(out) as sink:
        for r in _rows(2):
            sink.write(r)
    with out.open("a", encoding="utf-8", newline="") as fh:
        fh.write(tail)
    sink = ResultSink(out, resume=True)
    assert sink.done == {"j0", "j1"}
    sink.close()
    assert [r.job_id for r in read_results(out)] == ["j0", "j1"]


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])  # Parquet runs resume from a JSONL journal
def test_resume_after_a_cut_at_every_byte_keeps_only_whole_rows(
    tmp_path: Path, fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "fsync", lambda fd: None)  # thousands of rewrites; durability is not under test
    out = tmp_path / f"r.{fmt}"
    rows = _rows(2)
    sink = ResultSink(out)
    for r in rows:
        sink.write(r)
    sink.close()
    journal = sink.journal
    data = journal.read_bytes()
    want = {r.job_id: r.to_dict() for r in rows}
    for cut in range(len(data) + 1):
        journal.write_bytes(data[:cut])
        resumed = ResultSink(out, resume=True)
        resumed.close(finalize=False)
        kept = read_results(resumed.journal, "csv" if fmt == "csv" else "jsonl")
        assert {r.job_id for r in kept} == resumed.done
        assert all(r.to_dict() == want[r.job_id] for r in kept), cut
    assert resumed.done == set(want)


def test_resume_refuses_to_rewrite_a_file_that_is_not_a_results_file(tmp_path: Path) -> None:
    notes = tmp_path / "notes.csv"
    notes.write_text("name,amount\nrent,1200\n")
    with pytest.raises(OutputPathError, match="does not look like"):
        ResultSink(notes, resume=True)
    assert notes.read_text() == "name,amount\nrent,1200\n"
    other = tmp_path / "other.jsonl"
    other.write_text('{"a": 1}\n[2]\n')
    with pytest.raises(OutputPathError, match="does not look like"):
        ResultSink(other, resume=True)


def test_a_job_id_that_is_not_utf8_round_trips(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    with ResultSink(out) as sink:
        sink.write(JobResult("r\udcff.log", label="unknown", confidence=0.5))
    out.read_bytes().decode("utf-8")  # the file is valid UTF-8
    assert ResultSink(out, resume=True).done == {"r\udcff.log"}


def test_parquet_keeps_the_hang_fields(tmp_path: Path) -> None:
    out = tmp_path / "r.parquet"
    row = JobResult("j", label="subset-rank-collective-hang", confidence=0.7, hang_phase="forward", hang_suspects=[3])
    with ResultSink(out) as sink:
        sink.write(row)
    assert read_results(out)[0].to_dict() == row.to_dict()


# -- a full disk ---------------------------------------------------------------------------------
def _disk_fills_after(monkeypatch: pytest.MonkeyPatch, calls: int) -> None:
    real = os.write
    count = {"n": 0}

    def write(fd: int, data: Any) -> int:
        count["n"] += 1
        if count["n"] > calls:
            real(fd, bytes(data[: max(1, len(data) // 2)]))  # half a row lands, then the disk is full
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data)

    monkeypatch.setattr(output_mod, "_os_write", write)


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_disk_full_is_a_clear_error_and_the_file_stays_resumable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    out = tmp_path / f"r.{fmt}"
    rows = _rows(4)
    sink = ResultSink(out)
    _disk_fills_after(monkeypatch, 2)
    sink.write(rows[0])
    sink.write(rows[1])
    with pytest.raises(OutputWriteError, match="--resume") as info:
        sink.write(rows[2])
    assert "No space left" in str(info.value) and isinstance(info.value, OSError)
    sink.close()
    monkeypatch.undo()
    assert [r.to_dict() for r in read_results(out)] == [r.to_dict() for r in rows[:2]]  # no half row
    assert ResultSink(out, resume=True).done == {"j0", "j1"}


def test_disk_full_during_a_cli_run_ends_with_one_clear_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def fake_score_jobs(jobs: Any, **kwargs: Any) -> Iterator[JobResult]:
        for j in jobs:
            yield JobResult(j.id, label="unknown", confidence=0.5)

    monkeypatch.setattr("denpex_ml.batch.score.score_jobs", fake_score_jobs)
    root = _jobs(tmp_path / "jobs", ok=4)
    out = tmp_path / "r.jsonl"
    _disk_fills_after(monkeypatch, 2)  # two rows land, the third finds the disk full
    assert main(["score", str(root), "-o", str(out), "--quiet"]) == EXIT_INPUT_ERROR
    err = capsys.readouterr().err
    assert "No space left" in err and "--resume" in err and "Traceback" not in err
    assert err.count("denpex-ml: error:") == 1
    monkeypatch.setattr(output_mod, "_os_write", os.write)
    assert len(read_results(out)) == 2
    assert main(["score", str(root), "-o", str(out), "--quiet", "--resume"]) == EXIT_OK
    assert sorted(r.job_id for r in read_results(out)) == [f"job-{i}.log" for i in range(4)]


def test_error_rows_still_give_partial_exit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def fake_score_jobs(jobs: Any, **kwargs: Any) -> Iterator[JobResult]:
        for j in jobs:
            yield JobResult.failed(j.id, "JobTimeoutError", "slow")

    monkeypatch.setattr("denpex_ml.batch.score.score_jobs", fake_score_jobs)
    root = _jobs(tmp_path / "jobs", ok=1)
    assert main(["score", str(root), "-o", str(tmp_path / "r.csv"), "--quiet"]) == EXIT_PARTIAL


# -- job ids leave masked ------------------------------------------------------------------------
def test_job_ids_with_personal_data_leave_masked_unique_and_resumable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import denpex_ml.batch.score as score_mod

    monkeypatch.setattr(score_mod, "DenpexModel", FakeModel)  # score in-process with the fake
    root = tmp_path / "jobs"
    root.mkdir()
    for name in ("alice@example.com-run.log", "bob@example.com-run.log", "job-7.log"):
        (root / name).write_text(OOM)
    batch = discover_jobs(root)
    rows = list(score_jobs(iter(batch), model=FakeModel(), job_timeout=None))  # type: ignore[arg-type]
    assert all(r.ok for r in rows)
    ids = sorted(r.job_id for r in rows)
    assert len(set(ids)) == 3
    assert not any("alice" in i or "bob" in i or "example.com" in i for i in ids)
    assert "job-7.log" in ids  # nothing to mask: the id is unchanged
    # --resume compares the ids that results files hold: nothing is scored twice
    assert list(score_mod.pending_jobs(discover_jobs(root), set(ids))) == []
