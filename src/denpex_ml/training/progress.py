"""The progress callback that training, retraining and evaluation take, and the one that shows nothing.

A ``Progress`` is called once per stage with its name and number of steps and returns the
function to call after each step; the command line passes one that draws a progress bar.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["Progress", "no_progress"]

Progress = Callable[[str, int], Callable[[], None]]


def no_progress(_name: str, _total: int) -> Callable[[], None]:
    """A :data:`Progress` that shows nothing."""
    return lambda: None
