"""The ``denpex-ml`` command line: thin subcommands over library functions.

``app`` holds the parser, the registry of commands, the common flags, the logging set-up and
:func:`main`; ``console`` the exit codes, the console, the progress display and the error lines;
one module per command group: ``taxonomy``, ``ingest``, ``classify``, ``synth``, ``train`` (train,
retrain, eval, mlflow-log), ``incidents``, ``score``, ``report``, ``serve``. Also run as
``python -m denpex_ml``.
"""

from __future__ import annotations

from denpex_ml.cli.app import build_parser, main

__all__ = ["build_parser", "main"]
