"""denpex_ml: diagnose failed distributed deep-learning jobs from their logs."""

from __future__ import annotations

__version__ = "0.1.0"
