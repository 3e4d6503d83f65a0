"""``python -m denpex_ml``: the ``denpex-ml`` command line (same arguments, same exit codes)."""

from __future__ import annotations

import sys

from denpex_ml.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
