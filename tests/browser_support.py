"""Headless Chromium for the browser tests: the system binary driven by Playwright.

How it is started is :mod:`bench.browser` (shared with the report benchmark); Playwright's
own browser download is never used. The tests skip (with how to install it) when
``/usr/bin/chromium`` or the ``playwright`` package is missing, unless
``DENPEX_REQUIRE_BROWSER=1`` (set by ``.ci/run`` once it installed Chromium): then they fail.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # ``bench`` lives next to src/, not in the installed package
    sys.path.insert(0, str(REPO))

from bench.browser import CHROMIUM, launch  # noqa: E402 - after the path above

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
        browser = launch(pw)
        try:
            yield browser
        finally:
            browser.close()
