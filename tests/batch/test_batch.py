"""Batch scoring: job discovery, result files, resume, CLI exit codes, workers and Ray."""

from __future__ import annotations

import io
import json
import os
import tarfile
import zipfile
from pathlib import Path

import pytest

from denpex_ml.batch import (
    JobPattern,
    JobResult,
    ModelSpec,
    ResultSink,
    discover_jobs,
    read_results,
    score_archive,
)
from denpex_ml.batch.score import WorkerPool
from denpex_ml.cli import main
from denpex_ml.cli.console import EXIT_INPUT_ERROR, EXIT_OK, EXIT_PARTIAL, EXIT_USAGE
from denpex_ml.errors import InvalidInputError, LogNotFoundError, WorkerCrashedError
from denpex_ml.model.core import DenpexModel

OOM = "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n[rank0]: step 10 loss 2.1\n"
XID = "[rank0]: NVRM: Xid (PCI:0000:3b:00): 48, pid=1234, An uncorrectable double bit error (DBE) has been detected\n"
MODULE = "[rank0]: ModuleNotFoundError: No module named 'flash_attn'\n"


def _jobs_dir(root: Path) -> Path:
    """Three jobs: a single file, a per-rank folder and a gzipped log; plus a hidden file."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "job-a.log").write_text(OOM)
    (root / "job-b").mkdir()
    (root / "job-b" / "rank0.log").write_text(XID)
    (root / "job-b" / "rank1.log").write_text("step 3 loss 1.0\n")
    import gzip

    (root / "job-c.log.gz").write_bytes(gzip.compress(MODULE.encode()))
    (root / ".DS_Store").write_bytes(b"\x00\x01")
    return root


def _tar(path: Path, members: dict[str, bytes], *, links: tuple[str, ...] = ()) -> Path:
    with tarfile.open(path, "w:gz") as tf:
        for name, data in members.items():
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
        for name in links:
            ti = tarfile.TarInfo(name)
            ti.type = tarfile.SYMTYPE
            ti.linkname = "/etc/shadow"
            tf.addfile(ti)
    return path


# -- discovery ---------------------------------------------------------------------------------
def test_directory_top_level_entries_are_jobs(tmp_path: Path) -> None:
    batch = discover_jobs(_jobs_dir(tmp_path / "jobs"))
    assert batch.ids == ["job-a.log", "job-b", "job-c.log.gz"]  # hidden entry skipped, stable order
    assert len(batch) == 3
    assert discover_jobs(tmp_path / "jobs", exclude=["*.gz"]).ids == ["job-a.log", "job-b"]


def test_directory_symlink_entry_is_an_error_row_not_followed(tmp_path: Path) -> None:
    root = _jobs_dir(tmp_path / "jobs")
    secret = tmp_path / "secret.log"
    secret.write_text("token hf_abcdefghijklmnopqrstuvwxyz0123\n")
    os.symlink(secret, root / "zz-link")
    jobs = {j.id: j for j in discover_jobs(root)}
    assert jobs["zz-link"].error is not None and "symbolic link" in jobs["zz-link"].error[1]


def test_archive_with_single_root_folder_is_looked_through(tmp_path: Path) -> None:
    arc = _tar(tmp_path / "jobs.tar.gz", {"jobs/j1/rank0.log": OOM.encode(), "jobs/j2.log": XID.encode()})
    batch = discover_jobs(arc)
    assert batch.ids == ["j1", "j2.log"]  # ids are entry names
    jobs = list(batch)
    assert jobs[0].members == [("rank0.log", OOM.encode())]
    assert jobs[1].members == [("j2.log", XID.encode())]


def test_zip_archive_jobs(tmp_path: Path) -> None:
    arc = tmp_path / "jobs.zip"
    with zipfile.ZipFile(arc, "w") as zf:
        zf.writestr("j1/rank0.log", OOM)
        zf.writestr("j1/rank1.log", "ok\n")
        zf.writestr("j2.log", MODULE)
    jobs = list(discover_jobs(arc))
    assert [j.id for j in jobs] == ["j1", "j2.log"]
    assert sorted(n for n, _ in jobs[0].members) == ["rank0.log", "rank1.log"]


def test_unsafe_members_make_error_rows_and_the_batch_goes_on(tmp_path: Path, tiny_model: DenpexModel) -> None:
    arc = _tar(
        tmp_path / "bad.tar.gz",
        {
            "good/rank0.log": OOM.encode(),
            "evil/../../etc/passwd": b"root:x:0:0\n",
            "bin/blob.log": bytes(range(256)) * 8,
        },
        links=("linky/rank0.log",),
    )
    rows = {r.job_id: r for r in score_archive(arc, model=tiny_model)}
    assert set(rows) == {"good", "evil", "bin", "linky"}
    assert rows["good"].ok and rows["good"].label is not None
    assert rows["evil"].error_type == "UnsafeArchiveMemberError" and "'..'" in (rows["evil"].error or "")
    assert rows["linky"].error_type == "UnsafeArchiveMemberError" and "link" in (rows["linky"].error or "")
    assert rows["bin"].error_type == "NotALogError"


def test_a_row_says_which_failure_outside_the_taxonomy_it_shows(tmp_path: Path, tiny_model: DenpexModel) -> None:
    capacity = "ValueError: Failed Reason: CapacityError: Unable to provision requested ML compute capacity.\n"
    arc = _tar(tmp_path / "jobs.tar.gz", {"cap/job.log": capacity.encode(), "good/rank0.log": OOM.encode()})
    rows = {r.job_id: r for r in score_archive(arc, model=tiny_model)}
    assert rows["cap"].label == "unknown" and rows["cap"].abstained
    assert rows["cap"].outside_taxonomy.startswith("The cloud could not provide")
    assert rows["good"].outside_taxonomy == ""
    assert JobResult.from_dict(rows["cap"].to_dict()) == rows["cap"]


def test_a_row_carries_the_detectors_probability(tmp_path: Path) -> None:
    from denpex_ml.model.core import load_model

    model = load_model()  # the shipped model has an out-of-taxonomy detector
    assert model.outside is not None
    arc = _tar(tmp_path / "jobs.tar.gz", {"good/rank0.log": OOM.encode()})
    (row,) = score_archive(arc, model=model)
    assert row.ok and row.outside_probability is not None and 0.0 <= row.outside_probability < 0.5
    assert JobResult.from_dict(row.to_dict()) == row
    as_csv = dict(row.to_dict(), outside_probability=str(row.outside_probability))  # a CSV cell is text
    assert JobResult.from_dict(as_csv).outside_probability == pytest.approx(row.outside_probability)
    assert JobResult.from_dict(dict(row.to_dict(), outside_probability="")).outside_probability is None


def test_nested_archive_job_inside_a_batch_archive(tmp_path: Path, tiny_model: DenpexModel) -> None:
    inner = io.BytesIO()
    with tarfile.open(fileobj=inner, mode="w:gz") as tf:
        for name, text in {"rank0.log": "step 1\n", "rank3.log": OOM.replace("rank1", "rank3")}.items():
            ti = tarfile.TarInfo(name)
            ti.size = len(text.encode())
            tf.addfile(ti, io.BytesIO(text.encode()))
    arc = _tar(tmp_path / "outer.tar", {"job-7.tar.gz": inner.getvalue(), "job-8.log": MODULE.encode()})
    rows = {r.job_id: r for r in score_archive(arc, model=tiny_model)}
    assert rows["job-7.tar.gz"].ok and rows["job-7.tar.gz"].ranks == 2
    assert rows["job-8.log"].ok


def test_job_pattern_groups_files_into_jobs(tmp_path: Path, tiny_model: DenpexModel) -> None:
    for cluster, day, job in [("a", "d1", "100"), ("a", "d2", "101"), ("b", "d1", "100")]:
        d = tmp_path / "logs" / cluster / day / job
        d.mkdir(parents=True)
        (d / "rank0.log").write_text(OOM)
        (d / "rank1.log").write_text("step 1\n")
        (d / "notes.txt").write_text("not a log of this layout\n")
    batch = discover_jobs(tmp_path / "logs", pattern="{cluster}/{date}/{job}/rank*.log")
    assert batch.ids == ["a/d1/100", "a/d2/101", "b/d1/100"]
    assert len(batch.skipped) == 3  # the notes files
    rows = list(score_archive(tmp_path / "logs", model=tiny_model, job_pattern="{cluster}/{date}/{job}/rank*.log"))
    assert all(r.ok and r.ranks == 2 for r in rows)


def test_job_pattern_validation() -> None:
    assert JobPattern("{job}/**").job_id("x/a/b.log") == "x"
    assert JobPattern("*/{job}.log").job_id("c1/42.log") == "42"
    assert JobPattern("*/{job}.log").job_id("c1/sub/42.log") is None
    with pytest.raises(InvalidInputError, match="field"):
        JobPattern("*/*.log")
    with pytest.raises(InvalidInputError, match=r"\.\."):
        JobPattern("../{job}")


def test_missing_batch_path_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(LogNotFoundError):
        score_archive(tmp_path / "nope")


# -- scoring and results ---------------------------------------------------------------------------
def test_rows_carry_diagnosis_and_model_id(tmp_path: Path, tiny_model: DenpexModel) -> None:
    rows = list(score_archive(_jobs_dir(tmp_path / "jobs"), model=tiny_model))
    assert [r.job_id for r in rows] == ["job-a.log", "job-b", "job-c.log.gz"]
    for r in rows:
        assert r.ok and r.label in [*tiny_model.labels, "unknown"]
        assert 0.0 <= (r.confidence or 0.0) <= 1.0 and r.alternatives and r.model == tiny_model.model_id
        assert r.bytes and r.bytes > 0 and r.seconds > 0
    assert rows[1].ranks == 2


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_result_files_round_trip(tmp_path: Path, fmt: str) -> None:
    out = tmp_path / f"r.{fmt}"
    ok = JobResult(
        "j1",
        label="cuda-oom",
        title="CUDA OOM",
        confidence=0.9,
        abstained=False,
        alternatives=[{"label": "cuda-oom", "probability": 0.9}],
        initiating_rank=3,
        evidence=[{"rank": 3, "source": "rank3.log", "line": 7, "text": "OOM", "why": "fp"}],
        ranks=4,
        seconds=0.2,
    )
    bad = JobResult.failed("j2", "ArchiveError", "corrupt")
    with ResultSink(out) as sink:
        sink.write(ok)
        sink.write(bad)
    back = read_results(out)
    assert [r.to_dict() for r in back] == [ok.to_dict(), bad.to_dict()]


def test_resume_keeps_finished_rows_and_retries_errors(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    with ResultSink(out) as sink:
        sink.write(JobResult("j1", label="cuda-oom", confidence=0.9))
        sink.write(JobResult.failed("j2", "InternalError", "boom"))
    with out.open("a") as fh:
        fh.write('{"job_id": "j3", "status": "o')  # cut by an interruption
    sink = ResultSink(out, resume=True)
    assert sink.done == {"j1"}
    sink.close()
    assert [r.job_id for r in read_results(out)] == ["j1"]


def test_interrupted_parquet_run_keeps_its_journal(tmp_path: Path) -> None:
    out = tmp_path / "r.parquet"
    sink = ResultSink(out)
    sink.write(JobResult("j1", label="cuda-oom", confidence=0.9))
    sink.close(finalize=False)
    assert not out.exists() and sink.journal.exists()
    resumed = ResultSink(out, resume=True)
    assert resumed.done == {"j1"}
    resumed.write(JobResult("j2", label="host-oom", confidence=0.8))
    resumed.close()
    assert [r.job_id for r in read_results(out)] == ["j1", "j2"] and not sink.journal.exists()


def test_unknown_results_format_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="format"):
        ResultSink(tmp_path / "r.xlsx")


# -- CLI --------------------------------------------------------------------------------------------
def test_cli_exit_codes_and_resume(tmp_path: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    jobs = _jobs_dir(tmp_path / "jobs")
    out = tmp_path / "res.csv"
    args = ["score", str(jobs), "-o", str(out), "--model", str(tiny_model_dir)]
    assert main(args) == EXIT_OK
    printed = capsys.readouterr().out
    assert "3 jobs" in printed and "jobs per failure" in printed
    assert main(args) == EXIT_USAGE  # output exists: neither --resume nor --overwrite
    (jobs / "job-d.log").write_text(OOM)
    assert main([*args, "--resume"]) == EXIT_OK
    assert "3 already done" in capsys.readouterr().out
    assert sorted(r.job_id for r in read_results(out)) == ["job-a.log", "job-b", "job-c.log.gz", "job-d.log"]
    (jobs / "job-e.log").write_bytes(b"\x00\x01\x02" * 100)
    assert main([*args, "--overwrite", "--quiet"]) == EXIT_PARTIAL
    rows = {r.job_id: r for r in read_results(out)}
    assert len(rows) == 5 and rows["job-e.log"].error_type == "NotALogError"
    assert main(["score", str(tmp_path / "missing"), "-o", str(tmp_path / "x.jsonl")]) == EXIT_INPUT_ERROR


def test_worker_processes_give_the_same_results(tmp_path: Path, tiny_model_dir: Path, tiny_model: DenpexModel) -> None:
    jobs = _jobs_dir(tmp_path / "jobs")
    one = {r.job_id: (r.label, r.confidence) for r in score_archive(jobs, model=tiny_model)}
    two = {r.job_id: (r.label, r.confidence) for r in score_archive(jobs, model=tiny_model_dir, workers=2)}
    assert one == two


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # Ray Data's own (DataContext internals)
def test_ray_engine_matches_local(tmp_path: Path, tiny_model_dir: Path, tiny_model: DenpexModel) -> None:
    pytest.importorskip("ray.data")
    arc = _tar(
        tmp_path / "jobs.tar.gz", {"j1/rank0.log": OOM.encode(), "j2.log": XID.encode(), "j3.log": MODULE.encode()}
    )
    local = {r.job_id: (r.label, r.confidence) for r in score_archive(arc, model=tiny_model)}
    on_ray = {
        r.job_id: (r.label, r.confidence) for r in score_archive(arc, model=tiny_model_dir, engine="ray", workers=1)
    }
    assert on_ray == local


def test_row_json_has_no_secrets(tmp_path: Path, tiny_model: DenpexModel) -> None:
    root = tmp_path / "jobs"
    root.mkdir()
    (root / "j.log").write_text(
        "[rank0]: RuntimeError: NCCL error: remote process exited, peer 10.1.2.3 user alice@example.com token hf_abcdefghijklmnopqrstuvwxyz0123\n"
    )
    (row,) = score_archive(root, model=tiny_model)
    text = json.dumps(row.to_dict())
    for secret in ("10.1.2.3", "alice@example.com", "hf_abcdefghijklmnopqrstuvwxyz0123"):
        assert secret not in text


# -- a worker that dies -------------------------------------------------------------------------
class _DiesOnPoison:
    """Wraps a model; kills its own process on a job whose log says so (a native crash)."""

    def __init__(self, inner: DenpexModel) -> None:
        self.inner = inner
        self.model_id = inner.model_id

    def diagnose(self, bundle, started=None):  # type: ignore[no-untyped-def]
        if "POISON-KILLS-WORKER" in bundle.text():
            os._exit(13)
        return self.inner.diagnose(bundle, started=started)


class CrashingSpec(ModelSpec):
    def load(self):  # type: ignore[no-untyped-def]
        return _DiesOnPoison(super().load())


def test_a_job_that_kills_its_worker_is_an_error_row_and_the_rest_are_scored(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    root = _jobs_dir(tmp_path / "jobs")
    (root / "job-p.log").write_text("[rank0]: POISON-KILLS-WORKER\n")
    for i in range(4):
        (root / f"job-q{i}.log").write_text(OOM)
    pool = WorkerPool(2, CrashingSpec(str(tiny_model_dir)), None)
    rows = {r.job_id: r for r in pool.run(discover_jobs(root))}
    assert len(rows) == 8
    assert rows["job-p.log"].error_type == "WorkerCrashedError"
    assert all(r.ok for job_id, r in rows.items() if job_id != "job-p.log")


@pytest.mark.parametrize("refused", [1, 3])
def test_a_pool_that_breaks_between_waits_loses_no_job(tmp_path: Path, tiny_model_dir: Path, refused: int) -> None:
    """A worker that dies between two waits breaks the executor before its futures say so: the
    next submit is refused (``BrokenProcessPool``). That job never ran, so it is sent again once the
    pool is rebuilt, not made an error row nor dropped -- with jobs still in flight (the 3rd submit)
    and with none (the 1st). Simulated by refusing the ``refused``-th submit of the first pool."""
    from concurrent.futures.process import BrokenProcessPool

    root = _jobs_dir(tmp_path / "jobs")
    for i in range(3):
        (root / f"job-q{i}.log").write_text(OOM)
    pool = WorkerPool(1, ModelSpec(str(tiny_model_dir)), None)
    real_submit, calls = pool.executor.submit, [0]

    def flaky_submit(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls[0] += 1
        if calls[0] == refused:
            raise BrokenProcessPool("a child process terminated abruptly")
        return real_submit(*args, **kwargs)

    pool.executor.submit = flaky_submit  # type: ignore[method-assign]
    rows = {r.job_id: r for r in pool.run(discover_jobs(root))}
    assert calls[0] >= refused
    assert sorted(rows) == ["job-a.log", "job-b", "job-c.log.gz", "job-q0.log", "job-q1.log", "job-q2.log"]
    assert all(r.ok for r in rows.values()), [(r.job_id, r.error_type) for r in rows.values() if not r.ok]


def test_workers_that_cannot_work_end_the_batch_with_a_typed_error(tmp_path: Path, tiny_model_dir: Path) -> None:
    root = tmp_path / "jobs"
    root.mkdir()
    for i in range(5):
        (root / f"j{i}.log").write_text("[rank0]: POISON-KILLS-WORKER\n")
    with pytest.raises(WorkerCrashedError, match="in a row"):
        list(WorkerPool(2, CrashingSpec(str(tiny_model_dir)), None).run(discover_jobs(root)))


def test_parquet_nested_fields_are_arrow_lists_and_structs(tmp_path: Path) -> None:
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    from denpex_ml.batch.output import ResultSink
    from denpex_ml.batch.results import JobResult, read_results

    out = tmp_path / "r.parquet"
    row = JobResult(
        "job-1",
        label="gpu-xid-ecc-error",
        confidence=0.9,
        abstained=False,
        alternatives=[{"label": "gpu-xid-ecc-error", "probability": 0.9}, {"label": "cuda-oom", "probability": 0.05}],
        initiating_rank=6,
        evidence=[{"rank": 6, "source": "r6.log", "line": 12, "text": "uncorrectable ECC error", "why": "root cause"}],
        suspects=[
            {
                "host": "host-1",
                "gpu": 6,
                "bus_id": None,
                "ranks": [6],
                "reason": "ECC",
                "basis": "log",
                "entry": None,
                "xid": None,
            }
        ],
        warnings=["w"],
    )
    with ResultSink(out) as sink:
        sink.write(row)
        sink.write(JobResult.failed("job-2", "NotALogError", "binary"))
    schema = pq.read_schema(out)
    assert pa.types.is_list(schema.field("alternatives").type)
    assert pa.types.is_struct(schema.field("evidence").type.value_type)
    assert pa.types.is_list(schema.field("hang_suspects").type)
    table = pq.read_table(out)
    assert table.column("evidence").to_pylist()[0][0]["text"] == "uncorrectable ECC error"
    assert read_results(out)[0].to_dict() == row.to_dict()
    df = pd.read_parquet(out, dtype_backend="numpy_nullable")
    assert str(df["initiating_rank"].dtype) == "Int64" and df["initiating_rank"].tolist()[0] == 6
    assert df["initiating_rank"].isna().tolist() == [False, True]
