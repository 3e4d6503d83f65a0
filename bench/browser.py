"""Headless Chromium, the one way the browser tests and the report benchmark start it.

The system binary (``/usr/bin/chromium``, or ``$DENPEX_CHROMIUM``) driven by Playwright;
Playwright's own browser download is never used. ``tests/browser_support.py`` adds the
tests' skip-or-fail policy on top.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["ARGS", "CHROMIUM", "launch"]

CHROMIUM = Path(os.environ.get("DENPEX_CHROMIUM", "/usr/bin/chromium"))
#: Launch flags: no sandbox (containers run as root), no GPU, nothing that reaches the network.
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


def launch(pw: Any) -> Any:
    """A headless Chromium (Playwright ``Browser``) from a running ``sync_playwright()``."""
    return pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
