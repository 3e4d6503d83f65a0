"""The report in a real headless Chromium, opened from disk (``file://``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from browser_support import chromium
from denpex_ml.batch.results import JobResult, read_results
from denpex_ml.cli import main
from denpex_ml.report import build_report

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:  # the page's CSP forbids eval: waits use locators, not wait_for_function
    with chromium() as b:
        yield b


def expect(locator: Any) -> Any:
    from playwright.sync_api import expect as _expect

    return _expect(locator)


def _open(browser: Any, path: Path) -> tuple[Any, list[str], list[str]]:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    requests: list[str] = []
    errors: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    page.wait_for_selector("body[data-ready]", timeout=30_000)
    assert page.get_attribute("body", "data-ready") == "1", page.inner_text("#count")
    return page, requests, errors


def test_report_of_scored_examples_in_a_browser(browser: Any, scored_examples: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    assert main(["report", str(scored_examples), "-o", str(out), "-q"]) == 0
    rows = read_results(scored_examples)
    page, requests, errors = _open(browser, out)
    try:
        # every job is shown, and nothing was fetched but the file itself
        shown = page.eval_on_selector_all("#job-table tbody tr.job", "trs => trs.map(t => t.dataset.job)")
        assert sorted(shown) == sorted(r.job_id for r in rows)
        assert page.inner_text("#count") == f"{len(rows)} jobs"
        assert all(u.startswith(("file://", "data:")) for u in requests), requests
        # filter the table
        page.fill("#filter", "oom")
        expect(page.locator("#count")).to_contain_text(" of ")
        shown = page.eval_on_selector_all("#job-table tbody tr.job", "trs => trs.map(t => t.dataset.job)")
        expected = {r.job_id for r in rows if "oom" in f"{r.job_id} {r.label} {r.title}".lower()}
        assert set(shown) == expected and 0 < len(shown) < len(rows)
        page.fill("#filter", "")
        page.select_option("#label-filter", "cuda-oom")
        expect(page.locator("#job-table tbody tr.job")).to_have_count(2)
        # expand a job: title, evidence per rank, root cause, fix
        page.click('#job-table tbody tr.job[data-job="cuda-oom"]')
        detail = page.locator("#job-table tr.detail")
        assert "CUDA out of memory on a GPU" in detail.inner_text()
        assert "First failing rank: rank 3" in detail.inner_text()
        assert "CUDA out of memory. Tried to allocate" in detail.locator('ul.evidence[data-rank="rank 3"]').inner_text()
        assert "Root cause" in detail.inner_text() and "Fix" in detail.inner_text()
        # sort by confidence, descending on the second click
        page.select_option("#label-filter", "")
        page.click('th[data-sort="confidence"]')
        page.click('th[data-sort="confidence"]')
        confs = page.eval_on_selector_all(
            "#job-table tbody tr.job td:nth-child(3)", "tds => tds.map(t => parseFloat(t.textContent))"
        )
        assert confs == sorted(confs, reverse=True)
        page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
        assert (tmp_path / "report.png").stat().st_size > 10_000
        assert errors == []
    finally:
        page.close()


def test_large_compressed_report_pages_in_a_browser(browser: Any, tmp_path: Path) -> None:
    labels = ["cuda-oom", "host-oom", "nccl-network-error", "unknown"]
    rows = [
        JobResult(
            f"job-{i:05d}",
            label=labels[i % 4],
            confidence=0.5 + (i % 50) / 100,
            evidence=[{"rank": 1, "source": "a.log", "line": i, "text": f"line {i} <b>not bold</b>", "why": "w"}],
        )
        for i in range(1234)
    ]
    rows.append(JobResult.failed("broken-job", "ArchiveError", "truncated gzip <script>alert(1)</script>"))
    out = tmp_path / "big.html"
    out.write_text(build_report(rows, compress_over=0), encoding="utf-8")
    page, _, errors = _open(browser, out)
    try:
        assert page.inner_text("#page-info") == "1–100 of 1235"
        page.click("#next")
        assert page.inner_text("#page-info") == "101–200 of 1235"
        page.select_option("#status-filter", "error")
        expect(page.locator("#page-info")).to_have_text("1–1 of 1")
        page.click('#job-table tbody tr.job[data-job="broken-job"]')
        assert "truncated gzip <script>alert(1)</script>" in page.inner_text("#job-table tr.detail")
        page.select_option("#status-filter", "")
        page.fill("#filter", "job-00123")
        expect(page.locator("#page-info")).to_have_text("1–1 of 1")
        page.click('#job-table tbody tr.job[data-job="job-00123"]')
        assert "line 123 <b>not bold</b>" in page.inner_text("#job-table tr.detail")
        assert page.locator("#job-table b:text('not bold')").count() == 0  # shown as text, never as markup
        assert errors == []
    finally:
        page.close()
