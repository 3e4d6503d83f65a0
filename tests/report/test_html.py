"""The HTML report without a browser: rows in, one self-contained page out."""

from __future__ import annotations

import base64
import gzip
import json
import re
from pathlib import Path
from typing import Any

import pytest

from denpex_ml.batch.output import ResultSink
from denpex_ml.batch.results import JobResult, read_results
from denpex_ml.cli import main
from denpex_ml.errors import InvalidInputError, LogNotFoundError, OutputPathError
from denpex_ml.report import build_report, write_report
from denpex_ml.report.payload import FIELDS, evidence_budget
from denpex_ml.report.rows import job_nodes, job_time, read_rows
from denpex_ml.report.summary import summarise


def _row(i: int, label: str = "cuda-oom", **kw: Any) -> JobResult:
    ev = [
        {
            "rank": i % 4,
            "source": "job.log",
            "line": 10 + i,
            "text": f"RuntimeError: CUDA out of memory {i}",
            "why": "fp",
        }
    ]
    base: dict[str, Any] = {
        "job_id": f"job-{i:04d}",
        "label": label,
        "title": "CUDA out of memory on a GPU",
        "confidence": 0.9,
        "abstained": label == "unknown",
        "alternatives": [{"label": label, "probability": 0.9}, {"label": "host-oom", "probability": 0.05}],
        "initiating_rank": i % 4,
        "evidence": ev,
        "ranks": 4,
        "lines": 100,
        "bytes": 5000,
        "seconds": 0.01 * i,
        "model": "default@test",
    }
    base.update(kw)
    return JobResult(**base)


def _blob(page: str) -> dict[str, Any]:
    m = re.search(
        r'<script type="application/json" id="report-data" data-encoding="([^"]+)">(.*?)</script>', page, re.S
    )
    assert m is not None
    text = m.group(2)
    if m.group(1) == "gzip+base64":
        text = gzip.decompress(base64.b64decode(text)).decode("utf-8")
    return json.loads(text)  # type: ignore[no-any-return]


def test_report_has_every_job_and_the_taxonomy_text() -> None:
    rows = [_row(i) for i in range(5)] + [JobResult.failed("bad-job", "NotALogError", "not a text log")]
    page = build_report(rows, source="results.jsonl")
    assert page.startswith("<!DOCTYPE html>")
    data = _blob(page)
    assert data["fields"] == list(FIELDS)
    assert [r[0] for r in data["rows"]] == [f"job-{i:04d}" for i in range(5)] + ["bad-job"]
    assert data["entries"]["cuda-oom"]["root_cause"]  # root cause, fix and confirm come from the taxonomy
    assert data["entries"]["cuda-oom"]["fix"] and data["entries"]["cuda-oom"]["confirm"]
    assert "Jobs that could not be scored" in page and "NotALogError" in page
    assert 'id="nodes"' not in page and 'id="time"' not in page  # rows carry neither


def test_untrusted_text_is_escaped_everywhere() -> None:
    evil = "</script><script>alert(1)</script><img src=x onerror=alert(2)>"
    rows = [_row(0, evidence=[{"rank": 0, "source": evil, "line": 1, "text": evil, "why": evil}], job_id=evil)]
    page = build_report(rows, title=evil)
    assert "<script>alert" not in page and "<img src=x" not in page
    assert page.count("<script") == 2  # the data blob and the page's own script
    assert evil in json.dumps(_blob(page))  # the text itself survives, as data
    assert "&lt;/script&gt;" in page  # in the title and the slowest-jobs table, escaped by Jinja


def test_no_network_at_view_time() -> None:
    page = build_report([_row(0)])
    assert "default-src 'none'" in page
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)


def test_large_blob_is_compressed_and_round_trips() -> None:
    rows = [_row(i) for i in range(50)]
    plain = _blob(build_report(rows))
    page = build_report(rows, compress_over=0)
    assert 'data-encoding="gzip+base64"' in page
    assert _blob(page)["rows"] == plain["rows"]


def test_evidence_is_cut_to_keep_the_file_small() -> None:
    long = "x" * 3000
    rows = [
        _row(
            i, evidence=[{"rank": 0, "source": "a", "line": j, "text": f"{i} {j} {long}", "why": "w"} for j in range(6)]
        )
        for i in range(200)
    ]
    page = build_report(rows, max_bytes=200_000, compress_over=10**9)
    assert len(page.encode()) <= 200_000
    assert "Evidence is cut to" in page
    data = _blob(page)
    assert all(r[FIELDS.index("evidence_cut")] > 0 for r in data["rows"])
    assert evidence_budget(100_000) < evidence_budget(10)


def test_nodes_and_time_sections_when_rows_carry_them() -> None:
    rows = [
        {**_row(i).to_dict(), "time": f"2026-11-{1 + i % 20:02d}T10:00:00Z", "suspects": [{"node": "node-3", "gpu": 2}]}
        for i in range(20)
    ]
    rows.append(
        {**_row(99, label="nccl-network-error").to_dict(), "time": "2026-11-20T12:00:00Z", "suspects": ["node-7"]}
    )
    page = build_report(rows)
    assert 'id="nodes"' in page and "node-3 gpu 2" in page and "node-7" in page
    assert 'id="time"' in page and "New in the last 7 days" in page and "nccl-network-error" in page
    s = summarise(rows)
    assert s.nodes[0].node == "node-3 gpu 2" and s.nodes[0].jobs == 20
    assert [c.label for c in s.classes if c.new] == ["nccl-network-error"]
    assert job_time({"started": 86400}) == 86400.0 and job_time({"time": "not a time"}) is None
    assert job_nodes({"nodes": ["node-1", "node-1", "node-2"]}) == ["node-1", "node-2"]


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_reads_every_results_format(tmp_path: Path, fmt: str) -> None:
    out = tmp_path / f"results.{fmt}"
    rows = [_row(i) for i in range(3)] + [JobResult.failed("bad", "ArchiveError", "corrupt")]
    with ResultSink(out) as sink:
        for r in rows:
            sink.write(r)
    read = read_rows(out)
    assert [r["job_id"] for r in read.rows] == [r.job_id for r in read_results(out)]
    assert read.rows[0]["evidence"][0]["text"].startswith("RuntimeError") and read.dropped == 0


def test_cut_and_foreign_rows_are_skipped(tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"
    good = json.dumps(_row(1).to_dict())
    out.write_text(good + "\n" + '{"not": "a row"}\n' + good[:40], encoding="utf-8")
    read = read_rows(out)
    assert len(read.rows) == 1 and read.dropped == 2
    (tmp_path / "other.jsonl").write_text('{"a": 1}\n', encoding="utf-8")
    with pytest.raises(InvalidInputError, match="none of its 1 rows"):
        read_rows(tmp_path / "other.jsonl")
    with pytest.raises(LogNotFoundError):
        read_rows(tmp_path / "missing.jsonl")


def test_write_report_and_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results.jsonl"
    with ResultSink(results) as sink:
        for i in range(4):
            sink.write(_row(i))
    info = write_report([_row(0)], tmp_path / "py" / "r.html")
    assert info.path.is_file() and info.jobs == 1
    with pytest.raises(OutputPathError):
        write_report(results, tmp_path)
    assert main(["report", str(results), "-o", str(tmp_path / "report.html")]) == 0
    assert "report of 4 jobs written to" in capsys.readouterr().err
    assert "job-0003" in (tmp_path / "report.html").read_text(encoding="utf-8")
    assert main(["report", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "x.html")]) == 3
    assert "no such results file" in capsys.readouterr().err


def test_report_of_the_scored_examples(scored_examples: Path, tmp_path: Path) -> None:
    info = write_report(scored_examples, tmp_path / "report.html")
    rows = read_results(scored_examples)
    assert info.jobs == len(rows) == 12
    data = _blob(info.path.read_text(encoding="utf-8"))
    assert sorted(r[0] for r in data["rows"]) == sorted(r.job_id for r in rows)


def test_the_report_lists_the_jobs_likeliest_outside_the_taxonomy() -> None:
    rows = [
        _row(0, outside_probability=0.02),
        _row(1, label="unknown", best_guess="uncaught-exception-crash", outside_probability=0.91),
        _row(2, label="unknown", best_guess="cuda-oom", outside_probability=0.45),
        _row(3, outside_probability=None),  # a model without a detector
    ]
    s = summarise([r.to_dict() for r in rows])
    assert [r["job_id"] for r in s.outside] == ["job-0001", "job-0002"]  # likeliest first, none below 0.3
    page = build_report(rows)
    section = page[page.index('<section id="outside">') : page.index('<section id="jobs">')]
    assert "job-0001" in section and "91%" in section and "uncaught-exception-crash" in section
    assert "job-0000" not in section
    assert '<section id="outside">' not in build_report([_row(0, outside_probability=0.02)])
