"""The served page in a real headless Chromium: paste a log, drop files, see errors."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from browser_support import chromium

from .conftest import Server
from .test_app import OOM

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def page(server: Server) -> Iterator[Any]:
    with chromium() as browser:
        p = browser.new_page(viewport={"width": 1280, "height": 1000})
        errors: list[str] = []
        p.on("pageerror", lambda e: errors.append(str(e)))
        p.goto(server.url + "/")
        p.wait_for_selector("body[data-ready]")
        yield p
        assert errors == []
        p.close()


def expect(locator: Any) -> Any:
    from playwright.sync_api import expect as _expect

    return _expect(locator)


def _reset(page: Any) -> None:
    page.fill("#log", "")
    page.set_input_files("#files", [])


def test_paste_a_log_and_see_the_diagnosis(page: Any, tmp_path: Path) -> None:
    _reset(page)
    page.fill("#log", OOM)
    page.click("#diagnose")
    expect(page.locator("#label")).to_have_text("[cuda-oom]", timeout=60_000)
    assert page.inner_text("#title") == "CUDA out of memory on a GPU"
    assert page.inner_text("#first-rank").startswith("First failing rank: rank 1")
    evidence = page.locator('#evidence ul.evidence[data-rank="rank 1"]')
    assert "CUDA out of memory. Tried to allocate 2.00 GiB" in evidence.inner_text()
    # the failing rank's timeline comes first and ends on its highlighted evidence line
    first = page.locator("#timeline .timeline").first
    assert first.get_attribute("data-stream") == "1"
    assert "CUDA out of memory" in first.locator(".tl-line.ev").last.inner_text()
    assert page.locator("#root-cause").inner_text()
    assert page.locator("#error").is_hidden()
    page.screenshot(path=str(tmp_path / "serve.png"), full_page=True)
    assert (tmp_path / "serve.png").stat().st_size > 10_000


def test_drop_files(page: Any) -> None:
    _reset(page)
    page.set_input_files(
        "#files",
        [
            {"name": "rank0.log", "mimeType": "text/plain", "buffer": b"step 10 loss 1.2\n"},
            {"name": "rank1.log", "mimeType": "text/plain", "buffer": OOM.replace("[rank1]: ", "").encode()},
        ],
    )
    page.click("#diagnose")
    # wait for this answer (it names the dropped file), not a previous test's [cuda-oom]
    expect(page.locator("#result")).to_contain_text("rank1.log", timeout=60_000)
    expect(page.locator("#label")).to_have_text("[cuda-oom]")


def test_bad_upload_shows_the_error_message(page: Any) -> None:
    _reset(page)
    page.set_input_files(
        "#files", [{"name": "weights.bin", "mimeType": "application/octet-stream", "buffer": b"\x00\x01\x02" * 400}]
    )
    page.click("#diagnose")
    expect(page.locator("#error")).to_be_visible(timeout=60_000)
    text = page.inner_text("#error")
    assert text.startswith("NotALogError: ") and "no text log" in text
    assert "Traceback" not in text and page.locator("#result").is_hidden()


def test_oversize_upload_is_refused(page: Any, server: Server) -> None:
    _reset(page)
    big = b"[rank0]: step 1 loss 1.0\n" * (server.max_upload // 24 + 10)
    page.set_input_files("#files", [{"name": "huge.log", "mimeType": "text/plain", "buffer": big}])
    page.click("#diagnose")
    expect(page.locator("#error")).to_be_visible(timeout=60_000)
    assert page.inner_text("#error").startswith("InputTooLargeError: upload is larger than the server's limit")
