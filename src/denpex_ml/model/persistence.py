"""Model directories: a JSON manifest plus arrays, checked on load. Never pickle.

Layout (format version 1)::

    manifest.json   format_version, library versions, encoder id, taxonomy hash, label order,
                    feature layout, head parameters, abstention threshold, training-data hash,
                    metrics, and the SHA-256 of every other file
    head.npz        the head's arrays (loaded with ``allow_pickle=False``)

Changing the format: bump :data:`FORMAT_VERSION`, keep a loader for every older version
in :data:`LOADERS` with a test that loads a stored example of it.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from denpex_ml import __version__
from denpex_ml.errors import ModelError

__all__ = ["FORMAT_VERSION", "LOADERS", "models_root", "read_model_dir", "sha256_file", "write_model_dir"]

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
HEAD_FILE = "head.npz"


def models_root() -> Path:
    """Where shipped models live: ``denpex_ml/models`` in a wheel, ``models/`` in a checkout."""
    packaged = Path(str(resources.files("denpex_ml"))) / "models"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[3] / "models"


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _versions() -> dict[str, str]:
    import numpy
    import sklearn

    return {
        "denpex_ml": __version__,
        "numpy": numpy.__version__,
        "scikit-learn": sklearn.__version__,
        "python": platform.python_version(),
    }


def write_model_dir(path: str | os.PathLike[str], manifest: dict[str, Any], arrays: dict[str, np.ndarray]) -> Path:
    """Write arrays and the manifest (with checksums) to ``path``."""
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    head = out / HEAD_FILE
    np.savez_compressed(head, **arrays)  # type: ignore[arg-type]
    full = dict(manifest)
    full["format_version"] = FORMAT_VERSION
    full["versions"] = _versions()
    full["files"] = {HEAD_FILE: sha256_file(head)}
    tmp = out / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(full, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(out / MANIFEST)
    return out


def _load_v1(path: Path, manifest: dict[str, Any]) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    for name, digest in manifest.get("files", {}).items():
        f = path / name
        if not f.is_file():
            raise ModelError(f"{path}: file {name} listed in the manifest is missing")
        if sha256_file(f) != digest:
            raise ModelError(f"{path}: checksum of {name} does not match the manifest (corrupt or modified)")
    required = ("labels", "encoder", "layout", "head_params", "taxonomy_hash", "abstain_threshold")
    missing = [k for k in required if k not in manifest]
    if missing:
        raise ModelError(f"{path}/{MANIFEST}: missing field(s) {', '.join(missing)}")
    try:
        with np.load(path / HEAD_FILE, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except (OSError, ValueError) as exc:
        raise ModelError(f"{path}/{HEAD_FILE}: not a readable array file ({exc})") from None
    return manifest, arrays


#: Loaders by format version (keep old ones when the format changes).
LOADERS: dict[int, Callable[[Path, dict[str, Any]], tuple[dict[str, Any], dict[str, np.ndarray]]]] = {1: _load_v1}


def read_model_dir(path: str | os.PathLike[str]) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Read and verify a model directory; raises :class:`ModelError` naming what is wrong."""
    p = Path(path)
    mf = p / MANIFEST
    if not mf.is_file():
        raise ModelError(f"{p}: not a model directory ({MANIFEST} missing)")
    try:
        manifest = json.loads(mf.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelError(f"{mf}: not valid JSON ({exc})") from None
    if not isinstance(manifest, dict):
        raise ModelError(f"{mf}: expected a JSON object")
    version = manifest.get("format_version")
    loader = LOADERS.get(version) if isinstance(version, int) else None
    if loader is None:
        raise ModelError(f"{mf}: unsupported format_version {version!r} (this library reads {sorted(LOADERS)})")
    return loader(p, manifest)
