"""Retrain on new labelled incidents, and promote the result only if it is not worse.

``retrain(base, incidents, out=...)`` trains a new model version from the base model's own
training recipe (its manifest's config: same synthetic data, same real incidents) plus the
new incidents (and, optionally, new taxonomy entries), re-using cached features and template
embeddings. The **promotion gate** then scores the base and the candidate on the same data:

* the synthetic test split of the base model (regenerated from its seed with its taxonomy;
  neither model trained on it);
* real incidents, by grouped-by-thread cross-validation (the base's figures from its
  manifest, the candidate's from this training; same incidents);
* optional held-out incidents (``holdout``) that neither model trained on.

It fails when an overall figure drops by more than ``tolerance`` or a class's F1 drops by more
than ``class_tolerance`` (classes with at least ``min_support`` rows); the report says which.
Only a passing candidate is promoted: copied to ``promote_to`` and, when tracking, given the
mlflow registry alias ``champion`` (every candidate gets ``candidate``).

This module is the orchestration; the steps live beside it: the gate and promotion in
:mod:`~denpex_ml.training.promotion`, the mlflow run and registry in
:mod:`~denpex_ml.training.registry`, the incident files in :mod:`~denpex_ml.training.data`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from denpex_ml.errors import InvalidInputError, ModelError
from denpex_ml.model.persistence import model_id, read_model_dir
from denpex_ml.taxonomy import load_taxonomy
from denpex_ml.training.cache import cache_root
from denpex_ml.training.config import TrainConfig
from denpex_ml.training.data import incident_files
from denpex_ml.training.progress import Progress, no_progress
from denpex_ml.training.promotion import GateReport, compare_models, promote
from denpex_ml.training.registry import track_retrain
from denpex_ml.training.trainer import TrainResult, train

__all__ = ["GateReport", "RetrainResult", "compare_models", "retrain"]

log = logging.getLogger(__name__)


@dataclass
class RetrainResult:
    """What :func:`retrain` produced."""

    model_dir: Path
    train: TrainResult
    gate: GateReport
    promoted: bool
    lineage: dict[str, Any]
    seconds: float
    run_id: str | None = None
    registered_version: str | None = None


# -- lineage --------------------------------------------------------------------------------------
def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    files = sorted(q for q in path.rglob("*") if q.is_file()) if path.is_dir() else [path]
    for q in files:
        h.update(str(q.relative_to(path) if path.is_dir() else q.name).encode())
        with q.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


# -- entry point --------------------------------------------------------------------------------
def retrain(
    base: str | Path,
    incidents: Sequence[str | Path],
    *,
    out: str | Path,
    taxonomy_dirs: Sequence[str | Path] = (),
    holdout: Sequence[str | Path] = (),
    tolerance: float = 0.01,
    class_tolerance: float = 0.05,
    min_support: int = 5,
    promote_to: str | Path | None = None,
    cache_dir: str | Path | None = None,
    track: bool = True,
    register: bool = True,
    experiment: str = "denpex-ml-retrain",
    progress: Progress = no_progress,
) -> RetrainResult:
    """Train a new model version from ``base``'s recipe plus ``incidents``; gate and promote it.

    Parameters
    ----------
    base:
        The current model directory (its manifest holds the training recipe).
    incidents:
        New labelled incidents: JSONL files, label folders, or incident-store directories
        (``denpex-ml incidents``). Relabelled or removed incidents are simply what the files
        hold now.
    out:
        Directory of the new model version.
    taxonomy_dirs:
        Taxonomy directories with new or changed entries (merged over the base's).
    holdout:
        Labelled incidents neither model trains on, added to the gate's data.
    tolerance, class_tolerance, min_support:
        The gate (see the module docstring).
    promote_to:
        Where a passing candidate is copied (e.g. the directory your services load).
    cache_dir:
        Feature/embedding cache (default ``$DENPEX_CACHE`` or ``~/.cache/denpex_ml``).
    track, register:
        Log an mlflow run with lineage; register the version and set aliases.

    Returns
    -------
    RetrainResult
        ``gate.passed`` says whether it may be promoted; ``promoted`` whether it was.
    """
    t0 = time.perf_counter()
    base_dir, out_dir = Path(base), Path(out)
    _check_args(base_dir, out_dir, promote_to, tolerance, class_tolerance)
    manifest, cfg, files, tax_dirs = _candidate_config(base_dir, incidents, taxonomy_dirs)
    cache = Path(cache_dir) if cache_dir is not None else cache_root()
    log.info("retrain: base %s, %d incident file(s), cache %s -> %s", base_dir, len(files), cache, out_dir)
    trained = train(cfg, out=out_dir, progress=progress, baselines=False, cache_dir=cache, start_from=base_dir)
    log.info("retrain: candidate written to %s; comparing it with the base (promotion gate)", out_dir)
    gate = compare_models(
        base_dir,
        out_dir,
        holdout=holdout,
        tolerance=tolerance,
        class_tolerance=class_tolerance,
        min_support=min_support,
        cache_dir=cache,
        progress=progress,
    )
    lineage = _lineage(base_dir, manifest, files, holdout, tax_dirs, trained)
    _write_reports(out_dir, gate, lineage)
    log.info("retrain: gate %s; regressions: %s", "passed" if gate.passed else "failed", gate.regressions or "none")
    if gate.passed and promote_to is not None:
        promote(out_dir, Path(promote_to))
        log.info("retrain: promoted to %s", promote_to)
    # promoted: copied to ``promote_to`` and/or made the registry's champion
    promoted = gate.passed and (promote_to is not None or (track and register))
    result = RetrainResult(out_dir, trained, gate, promoted, lineage, 0.0)
    if track:
        result.run_id, result.registered_version = track_retrain(result, experiment, register=register)
    result.seconds = time.perf_counter() - t0
    return result


def _check_args(
    base_dir: Path, out_dir: Path, promote_to: str | Path | None, tolerance: float, class_tolerance: float
) -> None:
    if out_dir.resolve() == base_dir.resolve():
        raise InvalidInputError(
            "retrain: --out must differ from --base (the base is what the candidate is compared to)"
        )
    if promote_to is not None and Path(promote_to).resolve() == out_dir.resolve():
        raise InvalidInputError("retrain: --promote-to must differ from --out")
    if not 0 <= tolerance < 1 or not 0 <= class_tolerance < 1:
        raise InvalidInputError("retrain: tolerances must be in [0, 1)")


def _candidate_config(
    base_dir: Path, incidents: Sequence[str | Path], taxonomy_dirs: Sequence[str | Path]
) -> tuple[dict[str, Any], TrainConfig, list[str], list[str]]:
    """The base's manifest, the candidate's recipe (the base's plus ``incidents`` and
    ``taxonomy_dirs``), the incident files and the taxonomy directories."""
    manifest, _ = read_model_dir(base_dir)
    if "config" not in manifest:
        raise ModelError(f"{base_dir}: manifest has no training config; it cannot be retrained")
    base_cfg = TrainConfig.from_dict(dict(manifest["config"]))
    files = incident_files(incidents)
    tax_dirs = [*base_cfg.taxonomy_dirs, *(str(t) for t in taxonomy_dirs)]
    load_taxonomy(tax_dirs)  # fail early on a broken taxonomy directory
    cfg = TrainConfig.from_dict(
        {**base_cfg.to_dict(), "extra_data": [*base_cfg.extra_data, *files], "taxonomy_dirs": tax_dirs}
    )
    return dict(manifest), cfg, files, tax_dirs


def _lineage(
    base_dir: Path,
    manifest: dict[str, Any],
    files: list[str],
    holdout: Sequence[str | Path],
    tax_dirs: Sequence[str],
    trained: TrainResult,
) -> dict[str, Any]:
    """Where the candidate came from: the base, and a SHA-256 of every input file and directory."""
    base_model_id = model_id(base_dir.name, manifest)
    return {
        "base": {
            "dir": str(base_dir),
            "model_id": base_model_id,
            "training_data_hash": manifest.get("training_data_hash"),
        },
        "incidents": {f: _sha256(Path(f)) for f in files},
        "holdout": {str(h): _sha256(Path(h)) for h in holdout},
        "taxonomy_dirs": {d: _sha256(Path(d)) for d in tax_dirs},
        "training_data_hash": trained.model.manifest.get("training_data_hash"),
    }


def _write_reports(out_dir: Path, gate: GateReport, lineage: dict[str, Any]) -> None:
    """``gate.json``, ``gate.md`` and ``lineage.json`` beside the candidate's model files."""
    (out_dir / "gate.json").write_text(json.dumps(gate.to_dict(), indent=1) + "\n", encoding="utf-8")
    (out_dir / "gate.md").write_text(gate.markdown(), encoding="utf-8")
    (out_dir / "lineage.json").write_text(json.dumps(lineage, indent=1) + "\n", encoding="utf-8")
