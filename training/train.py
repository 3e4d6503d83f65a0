"""Train the model: ``python -m training.train --out models/NAME [--config training/configs/default.json]``.

The same as ``denpex-ml train``; see ``denpex-ml train --help`` for every option. The shipped
model ``models/default`` was made with ``denpex-ml train --out models/default`` (the defaults
of :class:`denpex_ml.training.TrainConfig`, also written out in ``configs/default.json``).
"""

from __future__ import annotations

import sys

from denpex_ml.cli import main

if __name__ == "__main__":
    sys.exit(main(["train", *sys.argv[1:]]))
