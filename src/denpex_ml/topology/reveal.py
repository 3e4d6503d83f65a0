"""The owner's way back from pseudonyms to real host names; the only writer of real names.

Pseudonyms are made at ingress (:class:`~denpex_ml.logs.masking.Masker`) and every output
holds them. The map pseudonym -> real name exists in memory while a job (or a batch run) is
read; it is handed out only when the owner asks (``reveal_hosts=True``, ``--reveal-hosts``),
and written only by :func:`write_private_json`: a new file readable by its owner alone
(mode 0600), next to the owner's own results. The incident store, evaluation reports and
mlflow never receive it (they are built from masked text and never ask). See
``docs/security.md``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from denpex_ml.errors import OutputWriteError

__all__ = ["PRIVATE_MODE", "host_map_path", "write_private_json"]

#: Permissions of every file holding real host names: read and write by the owner only.
PRIVATE_MODE = 0o600


def host_map_path(output: str | os.PathLike[str]) -> Path:
    """Where the host map of ``output`` goes: ``<output>.hosts.json`` beside it."""
    return Path(f"{os.fspath(output)}.hosts.json")


def write_private_json(path: str | os.PathLike[str], data: Any) -> Path:
    """Write ``data`` as JSON to ``path`` with mode 0600 (set before any byte is written, and
    again on a file that existed with wider permissions)."""
    p = Path(path)
    try:
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_MODE)
        try:
            os.fchmod(fd, PRIVATE_MODE)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fd = -1
                json.dump(data, fh, indent=2, ensure_ascii=False, sort_keys=True)
                fh.write("\n")
        finally:
            if fd >= 0:
                os.close(fd)
    except OSError as exc:
        raise OutputWriteError(f"{p}: cannot write the host map ({exc.strerror or exc})") from None
    return p
