"""Smoke tests of ``python -m bench``'s report building (tables, markdown, plot) on tiny inputs.

Nothing here is timed: the benchmark's numbers are made up, only the plumbing is checked.
"""

from __future__ import annotations

import importlib
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # ``bench`` lives next to src/, not in the installed package
    sys.path.insert(0, str(REPO))

bench_main = importlib.import_module("bench.__main__")
peers = importlib.import_module("bench.peers")
batch = importlib.import_module("bench.batch")
report = importlib.import_module("bench.report")
retrain = importlib.import_module("bench.retrain")


def _classify_row(size: str, n_bytes: int, ranks: int, secs: float) -> dict[str, Any]:
    return {
        "size": size,
        "ranks": ranks,
        "bytes": n_bytes,
        "load_s": 2.0,
        "classify_s": secs,
        "mb_s": n_bytes / 1e6 / secs,
        "peak_rss_mb": 270.0,
        "embedding_calls": 42,
        "templates": 40,
        "lines": 1000,
        "label": "cuda-oom",
        "initiating_rank": 12,
        "true_initiating_rank": 12,
        "runs": [],
    }


def _naive_runs() -> list[dict[str, Any]]:
    job = {"label": "cuda-oom", "true": None, "lines": 10_000, "embedded_lines": 100, "seconds": 50.0}
    return [{"setup_s": 7.0, "peak_rss_mb": 900.0, "facts": {"cap_lines": 100}, "jobs": [{**job, "measured_s": 0.6}]}]


def _report() -> dict[str, Any]:
    small = _classify_row("50K", 51_395, 2, 0.03)
    medium = _classify_row("5M", 5_243_052, 64, 0.5)
    big = _classify_row("20M", 20_971_620, 64, 1.9)
    syn = peers.JobSet("synthetic", Path("x.jsonl"), 3, "3 synthetic jobs")
    med = peers.JobSet("medium", Path("m.log"), 1, "5M log")
    den_syn = [
        {
            "setup_s": 2.0,
            "peak_rss_mb": 260.0,
            "facts": {"embedding_calls": 30},
            "jobs": [
                {"label": "a", "true": "a", "seconds": 0.01},
                {"label": "b", "true": "b", "seconds": 0.03},
                {"label": "x", "true": "c", "seconds": 0.02},
            ],
        }
    ]
    rule_syn = [
        {
            "setup_s": 1.0,
            "peak_rss_mb": 200.0,
            "jobs": [
                {"label": "a", "true": "a", "seconds": 0.005},
                {"label": "unknown", "true": "b", "seconds": 0.005},
                {"label": "c", "true": "c", "seconds": 0.005},
            ],
        }
    ]
    den_med = [{"setup_s": 2.0, "peak_rss_mb": 270.0, "jobs": [{"label": "cuda-oom", "true": None, "seconds": 0.5}]}]
    r_den = peers.aggregate(syn, "denpex_ml", den_syn, None)
    r_den_med = peers.aggregate(med, "denpex_ml", den_med, None)
    rows = [
        r_den_med,
        peers.aggregate(med, "naive-minilm", _naive_runs(), r_den_med["per_job_s"]),
        r_den,
        peers.aggregate(syn, "rule", rule_syn, r_den["per_job_s"]),
        {"jobset": "synthetic", "method": "tfidf", "error": "worker failed (see progress log)"},
    ]
    ingest_row = {
        "size": "10M",
        "ingest_mb_s": 24.0,
        "lines_per_s": 170_000.0,
        "peak_rss_mb": 37.0,
        "grep_mb_s": 2000.0,
        "grep_over_ingest": 83.0,
    }
    return {
        "created": "2026-01-01T00:00:00+00:00",
        "duration_s": 12.0,
        "params": {"quick": True, "repeat": 1},
        "machine": {
            "cpu_count": 2,
            "cpu_affinity": 2,
            "cpu_model": "Test CPU",
            "mem_total_gb": 24.0,
            "python": "3.11.7",
            "versions": {"numpy": "2.0", "torch": None},
            "git": {"commit": "abc123", "src_dirty": True},
        },
        "sections": {
            "ingest": {"results": [ingest_row]},
            "classify": {
                "jobs": [{"name": "small", "result": small}, {"name": "medium", "result": medium}],
                "scale_size": [medium, big],
                "scale_ranks": [small, medium],
                "plot": "scaling.png",
            },
            "batch": {
                "available": True,
                "n_jobs": 3,
                "job_size": "1M",
                "total_mb": 3.1,
                "jobs_dir": "cache/batch-3-1M-v1.1",
                "rows": [
                    {
                        "config": "1 worker",
                        "jobs": 3,
                        "scored_lines": 3,
                        "wall_s": 6.0,
                        "jobs_per_s": 0.5,
                        "max_worker_peak_mb": 280.0,
                        "tree_peak_mb": 280.0,
                        "processes": 1,
                    },
                    {"config": "2 workers", "failed": "exit code 1"},
                    {"config": "ray local, 2 workers", "skipped": "not available: ray is not installed"},
                ],
            },
            "baselines": {"rows": rows},
        },
    }


def test_markdown_report_has_every_section_and_number() -> None:
    rep = _report()
    md = report.markdown_report(rep)
    for title in report.TITLES.values():
        assert f"## {title}" in md
    assert "| 10M | 24.0 | 170,000 | 37 | 2000 | 83x |" in md  # bench.ingest's table
    assert "| small | 50K | 2 |" in md and "| medium | 5M | 64 |" in md
    assert "Time vs size at 64 ranks:" in md and "Time vs ranks at 50K:" in md
    assert "![classify time vs log size and vs ranks](scaling.png)" in md
    assert "| 1 worker | 3 | 6.0 | 0.50 | 280 | 280 | 1 | 3 |" in md
    assert "failed: exit code 1" in md and "not available: ray is not installed" in md
    assert "abc123 (src/ has uncommitted changes)" in md and "| torch | not installed |" in md
    assert "worker failed" in md
    json.dumps(rep, default=str)  # the report stays JSON-serialisable


def test_section_not_run_and_failed() -> None:
    rep = _report()
    rep["sections"] = {"ingest": {"error": "RuntimeError: boom"}}
    md = report.markdown_report(rep)
    assert "**failed**: RuntimeError: boom" in md
    assert md.count("not run (`--only`)") == len(report.SECTIONS) - 1


def test_baseline_rows_ratio_accuracy_and_extrapolation_note() -> None:
    rows = _report()["sections"]["baselines"]["rows"]
    den_med, naive, den_syn, rule = rows[:4]
    assert den_med["s_per_job"] == pytest.approx(0.5) and den_med["label"] == "cuda-oom"
    assert naive["ratio"] == pytest.approx(100.0)
    assert "first 100 lines per job (100 of 10,000)" in naive["note"] and "x100.0 extrapolated" in naive["note"]
    assert den_syn["accuracy"] == pytest.approx(2 / 3) and den_syn["s_per_job"] == pytest.approx(0.02)
    assert rule["ratio"] == pytest.approx(0.25) and rule["accuracy"] == pytest.approx(2 / 3)
    table = peers.markdown_table(rows)
    assert "| synthetic | denpex_ml | 3 | 2 | 0.02 | 1 (ref) | 260 | top-1 acc 0.67 |" in table
    assert "| medium | naive-minilm | 1 | 7 | 50 | 100x | 900 | cuda-oom |" in table


def test_baseline_ratio_uses_the_same_prefix_of_jobs() -> None:
    js = peers.JobSet("synthetic", Path("x.jsonl"), 4, "4 jobs")
    runs = [{"setup_s": 1.0, "peak_rss_mb": 1.0, "jobs": [{"label": "a", "true": "a", "seconds": 1.0}] * 2}]
    row = peers.aggregate(
        js,
        "naive-minilm",
        [{**runs[0], "jobs": [{**j, "lines": 5, "embedded_lines": 5, "measured_s": 1.0} for j in runs[0]["jobs"]]}],
        [0.5, 0.5, 100.0, 100.0],
    )
    assert row["ratio"] == pytest.approx(2.0)
    assert "first 2 of 4 jobs" in row["note"] and "all 10 lines embedded" in row["note"]


def test_plot_scaling_writes_a_png(tmp_path: Path) -> None:
    sec = _report()["sections"]["classify"]
    out = report.plot_scaling(sec["scale_size"], sec["scale_ranks"], tmp_path / "scaling.png")
    assert out is not None and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert report.plot_scaling([], [], tmp_path / "none.png") is None


def test_pad_rank_files_reaches_the_size_and_keeps_the_failure_last() -> None:
    files = {
        "rank0.log": "x NCCL INFO init\nstep 1\nTraceback: boom\n",
        "rank1.log": "waiting\n",
        "launcher.log": "ChildFailedError\n",
    }
    out = batch.pad_rank_files(files, 20_000, seed=1)
    total = sum(len(t.encode()) for t in out.values())
    assert 20_000 <= total < 21_000
    assert out["launcher.log"] == files["launcher.log"]
    assert out["rank0.log"].startswith("x NCCL INFO init\n") and out["rank0.log"].endswith("Traceback: boom\n")
    assert out["rank1.log"].endswith("waiting\n") and len(out["rank1.log"]) > 100
    assert batch.pad_rank_files(files, 10, seed=1) == files


def test_batch_configs_and_skip_rows() -> None:
    score = batch.ScoreCommand(True, ("denpex-ml",), engine_flag=False)
    configs, skipped = batch.batch_configs([1, 2], score)
    assert [(c.name, c.workers, c.engine) for c in configs] == [("1 worker", 1, None), ("2 workers", 2, None)]
    assert skipped[0]["config"] == "ray local, 2 workers" and "--engine" in skipped[0]["skipped"]
    gone = batch.bench_batch(
        cache=Path("unused"),
        n_jobs=1,
        size_bytes=1,
        size_text="1",
        workers=[1, 2],
        repeat=1,
        timeout_s=1,
        score=batch.ScoreCommand(False, ("denpex-ml",), reason="not available: no score command"),
        log=lambda _m: None,
    )
    assert not gone["available"] and all("not available" in r["skipped"] for r in gone["rows"])
    assert "not available: no score command" in batch.markdown_table(gone["rows"])


def test_tree_sample_summary() -> None:
    s = batch.TreeSample(
        root_pid=1, peak_by_pid={1: 100_000_000, 7: 300_000_000, 8: 200_000_000}, tree_peak=550_000_000
    )
    got = s.summary()
    assert got["main_peak_mb"] == 100 and got["max_worker_peak_mb"] == 300 and got["tree_peak_mb"] == 550
    assert got["child_processes"] == 2
    alone = batch.TreeSample(root_pid=1, peak_by_pid={1: 100_000_000}).summary()
    assert alone["max_worker_peak_mb"] == 100  # no children: the main process is the worker


def test_run_score_once_with_a_fake_command(tmp_path: Path) -> None:
    """The timing/polling plumbing against a stand-in for ``denpex-ml score`` (no timing asserted)."""
    pytest.importorskip("psutil")
    fake = tmp_path / "fake_cli.py"
    fake.write_text(
        textwrap.dedent(
            """
            import argparse, sys
            from pathlib import Path
            ap = argparse.ArgumentParser()
            ap.add_argument("cmd"); ap.add_argument("path"); ap.add_argument("-o", required=True)
            ap.add_argument("--workers", type=int); ap.add_argument("--engine")
            a = ap.parse_args()
            jobs = sorted(p for p in Path(a.path).iterdir() if p.is_dir())
            Path(a.o).write_text("".join('{"job": "%s"}\\n' % p.name for p in jobs))
            print(f"scored {len(jobs)} jobs")
            """
        )
    )
    jobs = tmp_path / "jobs"
    for i in range(3):
        (jobs / f"job-{i:04d}").mkdir(parents=True)
    score = batch.ScoreCommand(True, (sys.executable, str(fake)), engine_flag=True)
    r = batch.run_score_once(score, jobs, batch.BatchConfig("1 worker", 1, "local"), 3, timeout_s=60)
    assert r["ok"] and r["scored_lines"] == 3 and r["jobs_per_s"] > 0
    assert r["stdout_tail"] == ["scored 3 jobs"]
    assert r["argv"][-4:] == ["--workers", "1", "--engine", "local"]


def test_quick_defaults_and_job_specs() -> None:
    args = bench_main._parser().parse_args(["--quick", "--repeat", "2"])
    p = bench_main._resolve(args)
    assert p["repeat"] == 2 and p["sizes"] == "10M" and p["batch_jobs"] == 100
    assert [n for n, _, _ in bench_main._job_specs(p["classify_jobs"])] == ["small", "medium"]
    full = bench_main._resolve(bench_main._parser().parse_args([]))
    assert bench_main._job_specs(full["classify_jobs"])[-1] == ("large", "200M", 512)
    assert full["sizes"] == "10M,100M,1G" and full["batch_jobs"] == 1000 and full["repeat"] == 3


def test_retrain_pairs_with_a_fake_command(tmp_path: Path) -> None:
    """Cold then warm retrain runs against a stand-in for ``denpex-ml`` that records its cache
    directory and fails its gate on the second call (exit 4: still a measured run)."""
    fake = tmp_path / "fake_cli.py"
    seen = tmp_path / "seen.txt"
    fake.write_text(
        textwrap.dedent(
            f"""
            import os, sys
            from pathlib import Path
            assert sys.argv[1] == "retrain" and "--no-track" in sys.argv
            seen = Path({str(seen)!r})
            calls = seen.read_text().splitlines() if seen.exists() else []
            seen.write_text("\\n".join([*calls, os.environ["DENPEX_CACHE"]]) + "\\n")
            sys.exit(4 if len(calls) % 2 else 0)
            """
        )
    )
    res = retrain.bench_retrain(repeat=2, cli=[sys.executable, str(fake)], log=lambda m: None)
    rows = {r["config"]: r for r in res["rows"]}
    assert rows["cold cache"]["runs"] == 2 and rows["warm cache"]["runs"] == 2
    assert rows["cold cache"]["gate"] == "passed" and rows["warm cache"]["gate"] == "failed"
    assert rows["warm cache"]["target_s"] == 30 and rows["cold cache"]["wall_s"] > 0
    caches = seen.read_text().split()
    assert len(caches) == 4 and caches[0] == caches[1] and caches[2] == caches[3] and caches[0] != caches[2]
    md = retrain.markdown_table(res["rows"])
    assert "| warm cache | 2 |" in md and "failed:" not in md


def test_retrain_failure_is_a_row() -> None:
    res = retrain.bench_retrain(repeat=1, cli=[sys.executable, "-c", "import sys; sys.exit(2)"], log=lambda m: None)
    assert all("failed" in r for r in res["rows"])
    assert "failed: exit code 2" in retrain.markdown_table(res["rows"])


def test_ingest_bench_times_a_job_of_rank_files(tmp_path: Path) -> None:
    """``python -m bench.ingest --rank-files``: one per-rank-files job, timed like a log, grep over its files."""
    from bench import ingest as bench_ingest

    r = bench_ingest.bench_size(300_000, repeat=1, cache=None, tmp=tmp_path, ranks=64, seed=0, rank_files=True)
    assert "rank files" in str(r["size"])
    assert int(r["size_bytes"]) > 200_000  # type: ignore[call-overload]
    assert int(r["grep_count"]) >= int(r["lines"]) > 1000  # type: ignore[call-overload]
    assert float(r["ingest_mb_s"]) > 0  # type: ignore[arg-type]


def test_small_real_jobs_are_the_first_real_logs_one_file_each(tmp_path: Path) -> None:
    src = tmp_path / "real.jsonl"
    src.write_text(
        "\n".join(json.dumps({"id": i, "log": f"log of {i}"}) for i in ("c", "a", "b", "d")) + "\n", encoding="utf-8"
    )
    root, total = batch.write_small_real_jobs(tmp_path / "cache", 3, src)
    files = sorted(root.iterdir())
    assert [f.read_text() for f in files] == ["log of a\n", "log of b\n", "log of c\n"]
    assert total == sum(f.stat().st_size for f in files)
    assert batch.write_small_real_jobs(tmp_path / "cache", 3, src)[0] == root  # written once, then reused
    with pytest.raises(RuntimeError, match="holds 4 logs, 5 asked"):
        batch.write_small_real_jobs(tmp_path / "cache2", 5, src)
