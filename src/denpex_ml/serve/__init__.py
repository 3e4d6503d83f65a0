"""``denpex-ml serve``: a local web page to diagnose a pasted log or dropped files, and a JSON API.

>>> from denpex_ml.serve import create_app      # doctest: +SKIP
>>> app = create_app()                          # a Starlette app; run it with uvicorn

Importing this package imports no web framework; :func:`create_app` does.
"""

from __future__ import annotations

from denpex_ml.serve.app import DEFAULT_LIMITS, DEFAULT_MAX_UPLOAD, ServeConfig, classify_upload, create_app

__all__ = ["DEFAULT_LIMITS", "DEFAULT_MAX_UPLOAD", "ServeConfig", "classify_upload", "create_app"]
