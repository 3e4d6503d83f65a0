"""Headless Chromium for the browser tests: the system binary driven by Playwright.

Playwright's own browser download is never used; the tests skip (with how to install it) when
``/usr/bin/chromium`` or the ``playwright`` package is missing, unless
``DENPEX_REQUIRE_BROWSER=1`` (set by ``.ci/run`` once it installed Chromium): then they fail.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path(os.environ.get("DENPEX_CHROMIUM", "/usr/bin/chromium"))
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
INSTALL_HINT = (
    "needs headless Chromium at {path}: install it with `apt-get install -y --no-install-recommends chromium` "
    "(Debian/Ubuntu, as root) and Playwright's Python package with `pip install -e '.[test]'` "
    "(never `playwright install`: the system binary is used)"
)


def _missing(reason: str) -> None:
    if os.environ.get("DENPEX_REQUIRE_BROWSER") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


@contextmanager
def chromium() -> Iterator[Any]:
    """A launched headless Chromium (Playwright ``Browser``), closed on exit."""
    if not CHROMIUM.exists():
        _missing(INSTALL_HINT.format(path=CHROMIUM))
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing(INSTALL_HINT.format(path=CHROMIUM))
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            yield browser
        finally:
            browser.close()
