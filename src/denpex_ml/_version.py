"""The library's version, in one place: the package face, the model directory manifest, the
feature cache key and the CLI read it from here (importing the package face for it would tie
the lower floors to the whole public surface)."""

from __future__ import annotations

__version__ = "0.1.0"
