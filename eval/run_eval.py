"""Run the evaluation suite: ``python eval/run_eval.py [denpex-ml eval options]``.

A thin wrapper over ``denpex-ml eval`` (see :mod:`denpex_ml.evaluation`).
"""

from __future__ import annotations

import sys

from denpex_ml.cli import main

if __name__ == "__main__":
    sys.exit(main(["eval", *sys.argv[1:]]))
