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
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from denpex_ml.errors import InvalidInputError, ModelError
from denpex_ml.metrics import classification_metrics, per_class_table
from denpex_ml.model.core import DenpexModel, load_model
from denpex_ml.model.persistence import read_model_dir
from denpex_ml.taxonomy import load_taxonomy
from denpex_ml.training.cache import FeatureStore, cache_root, featurizer_signature
from denpex_ml.training.config import TrainConfig
from denpex_ml.training.data import Example, build_data
from denpex_ml.training.trainer import TrainResult, featurize, train

__all__ = ["GateReport", "RetrainResult", "compare_models", "retrain"]

log = logging.getLogger(__name__)
Progress = Callable[[str, int], Callable[[], None]]

#: Figures compared per data set (a drop beyond the tolerance fails the gate).
GATE_FIGURES = ("macro_f1", "top1")
REGISTERED_NAME = "denpex-ml"


def _no_progress(_name: str, _total: int) -> Callable[[], None]:
    return lambda: None


@dataclass
class GateReport:
    """Base vs candidate on the same data; ``passed`` when nothing regressed beyond tolerance."""

    passed: bool
    tolerance: float
    class_tolerance: float
    min_support: int
    overall: list[dict[str, Any]] = field(default_factory=list)
    per_class: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    regressions: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def regressed_classes(self) -> list[str]:
        """The classes whose F1 dropped beyond ``class_tolerance`` on some data set (with at
        least ``min_support`` rows), in order of first appearance."""
        out: list[str] = []
        for rows in self.per_class.values():
            for r in rows:
                if (
                    r["support"] >= self.min_support
                    and r["f1_candidate"] < r["f1_base"] - self.class_tolerance
                    and r["label"] not in out
                ):
                    out.append(r["label"])
        return out

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "regressed_classes": self.regressed_classes}

    def markdown(self) -> str:
        out = [
            f"# Promotion gate: {'PASSED' if self.passed else 'FAILED'}",
            "",
            f"Tolerance: overall figures may drop by at most {self.tolerance:.3f}; a class's F1 by at most "
            f"{self.class_tolerance:.3f} (classes with >= {self.min_support} rows).",
            "",
            "| data | figure | base | candidate | change | ok |",
            "|---|---|---:|---:|---:|---|",
        ]
        for r in self.overall:
            out.append(
                f"| {r['set']} | {r['figure']} | {_f(r['base'])} | {_f(r['candidate'])} | {_f(r['delta'], sign=True)} | "
                f"{'yes' if r['ok'] else '**no**'} |"
            )
        if self.regressions:
            out += ["", "## Regressions", ""] + [f"- {r}" for r in self.regressions]
        for name, rows in self.per_class.items():
            out += [
                "",
                f"## Per class: {name}",
                "",
                "| class | rows | F1 base | F1 candidate | change |",
                "|---|---:|---:|---:|---:|",
            ]
            for r in sorted(rows, key=lambda r: r["delta"]):
                out.append(
                    f"| {r['label']} | {r['support']} | {_f(r['f1_base'])} | {_f(r['f1_candidate'])} | {_f(r['delta'], sign=True)} |"
                )
        if self.notes:
            out += ["", "## Notes", ""] + [f"- {n}" for n in self.notes]
        return "\n".join(out) + "\n"


def _f(v: float | None, *, sign: bool = False) -> str:
    if v is None or (isinstance(v, float) and not np.isfinite(v)):
        return "–"
    return f"{v:+.3f}" if sign else f"{v:.3f}"


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


# -- data ---------------------------------------------------------------------------------------
def _incident_files(paths: Sequence[str | Path]) -> list[str]:
    """Incident JSONL files or label folders; an incident store directory means its JSONL."""
    out: list[str] = []
    for p in map(Path, paths):
        if not p.exists():
            raise InvalidInputError(f"retrain: incidents {p} do not exist")
        store_file = p / "incidents.jsonl"
        out.append(str(store_file if p.is_dir() and store_file.exists() else p))
    return out


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    files = sorted(q for q in path.rglob("*") if q.is_file()) if path.is_dir() else [path]
    for q in files:
        h.update(str(q.relative_to(path) if path.is_dir() else q.name).encode())
        with q.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


@dataclass
class _Scored:
    labels: list[str]
    proba: np.ndarray
    y: np.ndarray


def _score(
    model: DenpexModel, examples: Sequence[Example], store_root: Path | None, name: str, progress: Progress
) -> _Scored:
    labels = list(model.labels)
    index = {lab: i for i, lab in enumerate(labels)}
    store = (
        FeatureStore(
            store_root, featurizer_signature(model.featurizer, model.taxonomy), model.featurizer.n_base_features
        )
        if store_root is not None
        else None
    )
    fs = featurize(model.featurizer, examples, index, keep=False, progress=progress, name=name, cache=store)
    if store is not None:
        store.save()
    proba = model.head.predict_proba(fs.X) if len(fs) else np.zeros((0, len(labels)))
    return _Scored(labels, proba, fs.y)


def _per_class(s: _Scored) -> dict[str, dict[str, Any]]:
    if not (s.y >= 0).any():  # e.g. a holdout of classes this model does not know
        return {}
    return {str(r["label"]): r for r in per_class_table(s.proba, s.y, s.labels)}


def _compare_set(
    name: str,
    base: _Scored,
    cand: _Scored,
    report: GateReport,
) -> None:
    mb = classification_metrics(base.proba, base.y) if len(base.y) else {}
    mc = classification_metrics(cand.proba, cand.y) if len(cand.y) else {}
    for fig in GATE_FIGURES:
        _overall(report, name, fig, mb.get(fig), mc.get(fig))
    _class_rows(report, name, _per_class(base), _per_class(cand), new_labels=set(cand.labels) - set(base.labels))


def _overall(report: GateReport, name: str, fig: str, b: float | None, c: float | None) -> None:
    if b is None or c is None or not (np.isfinite(b) and np.isfinite(c)):
        return
    ok = c >= b - report.tolerance
    report.overall.append({"set": name, "figure": fig, "base": b, "candidate": c, "delta": c - b, "ok": ok})
    if not ok:
        report.regressions.append(f"{name}: {fig} {b:.3f} -> {c:.3f} ({c - b:+.3f}, tolerance {report.tolerance:.3f})")


def _class_rows(
    report: GateReport,
    name: str,
    pb: dict[str, dict[str, Any]],
    pc: dict[str, dict[str, Any]],
    *,
    new_labels: set[str],
) -> None:
    rows = []
    for label in sorted(set(pb) | set(pc)):
        b, c = pb.get(label), pc.get(label)
        support = int((c or b or {}).get("support", 0))
        f1_b = float(b["f1"]) if b else 0.0
        f1_c = float(c["f1"]) if c else 0.0
        rows.append(
            {
                "label": label,
                "support": support,
                "f1_base": f1_b,
                "f1_candidate": f1_c,
                "delta": f1_c - f1_b,
                "new": label in new_labels,
            }
        )
        if support >= report.min_support and f1_c < f1_b - report.class_tolerance:
            report.regressions.append(
                f"{name}: class {label} F1 {f1_b:.3f} -> {f1_c:.3f} ({f1_c - f1_b:+.3f}, {support} rows, "
                f"tolerance {report.class_tolerance:.3f})"
            )
    report.per_class[name] = rows


def compare_models(
    base_dir: str | Path,
    candidate_dir: str | Path,
    *,
    holdout: Sequence[str | Path] = (),
    tolerance: float = 0.01,
    class_tolerance: float = 0.05,
    min_support: int = 5,
    cache_dir: str | Path | None = None,
    progress: Progress = _no_progress,
) -> GateReport:
    """The promotion gate: score both models on the same data and list regressions."""
    base_manifest, _ = read_model_dir(base_dir)
    cand_manifest, _ = read_model_dir(candidate_dir)
    base_cfg = TrainConfig.from_dict(dict(base_manifest["config"]))
    cand_cfg = TrainConfig.from_dict(dict(cand_manifest["config"]))
    base = load_model(base_dir, taxonomy_dirs=base_cfg.taxonomy_dirs or None)
    cand = load_model(candidate_dir, taxonomy_dirs=cand_cfg.taxonomy_dirs or None)
    root = Path(cache_dir) if cache_dir is not None else None
    report = GateReport(passed=False, tolerance=tolerance, class_tolerance=class_tolerance, min_support=min_support)

    # 1. the base's synthetic test split (neither model trained on it)
    data = build_data(
        taxonomy=base.taxonomy,
        seed=base_cfg.seed,
        per_class=(2, 0, base_cfg.per_class_test),
        real_data=None,
    )
    test = data["test"]
    _compare_set(
        "synthetic_test",
        _score(base, test, root, "gate: synthetic test (base)", progress),
        _score(cand, test, root, "gate: synthetic test (candidate)", progress),
        report,
    )

    # 2. real incidents by grouped CV: figures recorded at training time on the same incidents
    mb, mc = base_manifest.get("metrics", {}), cand_manifest.get("metrics", {})
    if (
        base_cfg.real_data
        and base_cfg.real_data == cand_cfg.real_data
        and "real/macro_f1" in mb
        and "real/macro_f1" in mc
    ):
        for fig in GATE_FIGURES:
            _overall(report, "real_cv", fig, mb.get(f"real/{fig}"), mc.get(f"real/{fig}"))
        pcb = _per_class_file(Path(base_dir)).get("real", [])
        pcc = _per_class_file(Path(candidate_dir)).get("real", [])
        if pcb and pcc:
            _class_rows(report, "real_cv", {r["label"]: r for r in pcb}, {r["label"]: r for r in pcc}, new_labels=set())
    else:
        report.notes.append(
            "real incidents: not compared (different real data, or no grouped-CV figures in a manifest)"
        )

    # 3. held-out incidents given by the user
    if holdout:
        from denpex_ml.dataset import load_incidents

        labels = set(cand.taxonomy.ids) | set(base.taxonomy.ids)
        incidents = load_incidents(_incident_files(holdout), labels=labels)
        ex = [
            Example(
                i.id, i.label, i.source_group, "user", i.initiating_rank, dict(i.logs) if i.logs is not None else i.log
            )
            for i in incidents
        ]
        _compare_set(
            "holdout",
            _score(base, ex, root, "gate: holdout (base)", progress),
            _score(cand, ex, root, "gate: holdout (candidate)", progress),
            report,
        )
        new = sorted({e.label for e in ex} - set(base.labels))
        if new:
            report.notes.append(f"holdout: {', '.join(new)} unknown to the base model (its F1 counts as 0)")
    report.passed = not report.regressions
    return report


def _per_class_file(model_dir: Path) -> dict[str, list[dict[str, Any]]]:
    p = model_dir / "per_class.json"
    if not p.exists():
        return {}
    data: dict[str, list[dict[str, Any]]] = json.loads(p.read_text(encoding="utf-8"))
    return data


# -- promotion ----------------------------------------------------------------------------------
def _promote(model_dir: Path, target: Path) -> None:
    """Copy ``model_dir`` to ``target`` atomically (the previous one is kept as ``target.prev``)."""
    tmp = target.with_name(target.name + ".incoming")
    if tmp.exists():
        shutil.rmtree(tmp)
    shutil.copytree(model_dir, tmp)
    prev = target.with_name(target.name + ".prev")
    if target.exists():
        if prev.exists():
            shutil.rmtree(prev)
        target.rename(prev)
    tmp.rename(target)


def _track(result: RetrainResult, experiment: str, *, register: bool) -> tuple[str, str | None]:
    import mlflow
    from mlflow import MlflowClient

    from denpex_ml.tracking import log_training_run, tracking_uri

    params = {
        "base.dir": result.lineage["base"]["dir"],
        "base.model_id": result.lineage["base"]["model_id"],
        "incidents": json.dumps(result.lineage["incidents"]),
        "taxonomy_dirs": json.dumps(result.lineage["taxonomy_dirs"]),
        "gate.tolerance": result.gate.tolerance,
        "gate.class_tolerance": result.gate.class_tolerance,
    }
    metrics = dict(result.train.metrics)
    for r in result.gate.overall:
        metrics[f"gate/{r['set']}/{r['figure']}/delta"] = float(r["delta"])
    metrics["gate/passed"] = float(result.gate.passed)
    run_id = log_training_run(
        experiment=experiment,
        params=params,
        metrics=metrics,
        model_dir=result.model_dir,
        run_name=f"retrain-{result.model_dir.name}",
        tags={"denpex.kind": "retrain", "denpex.gate": "passed" if result.gate.passed else "failed"},
    )
    version: str | None = None
    mlflow.set_tracking_uri(tracking_uri())
    with mlflow.start_run(run_id=run_id):
        mlflow.log_dict(result.gate.to_dict(), "gate/gate.json")
        mlflow.log_text(result.gate.markdown(), "gate/gate.md")
        mlflow.log_dict(result.lineage, "lineage.json")
    if register:
        mv = mlflow.register_model(f"runs:/{run_id}/model", REGISTERED_NAME)
        version = str(mv.version)
        client = MlflowClient()
        client.set_registered_model_alias(REGISTERED_NAME, "candidate", version)
        if result.promoted:
            client.set_registered_model_alias(REGISTERED_NAME, "champion", version)
    return run_id, version


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
    progress: Progress = _no_progress,
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
    base_dir = Path(base)
    out_dir = Path(out)
    if out_dir.resolve() == base_dir.resolve():
        raise InvalidInputError(
            "retrain: --out must differ from --base (the base is what the candidate is compared to)"
        )
    if promote_to is not None and Path(promote_to).resolve() == out_dir.resolve():
        raise InvalidInputError("retrain: --promote-to must differ from --out")
    if not 0 <= tolerance < 1 or not 0 <= class_tolerance < 1:
        raise InvalidInputError("retrain: tolerances must be in [0, 1)")
    manifest, _ = read_model_dir(base_dir)
    if "config" not in manifest:
        raise ModelError(f"{base_dir}: manifest has no training config; it cannot be retrained")
    base_cfg = TrainConfig.from_dict(dict(manifest["config"]))
    files = _incident_files(incidents)
    tax_dirs = [*base_cfg.taxonomy_dirs, *(str(t) for t in taxonomy_dirs)]
    load_taxonomy(tax_dirs)  # fail early on a broken taxonomy directory
    cfg = TrainConfig.from_dict(
        {**base_cfg.to_dict(), "extra_data": [*base_cfg.extra_data, *files], "taxonomy_dirs": tax_dirs}
    )
    cache = Path(cache_dir) if cache_dir is not None else cache_root()
    log.info("retrain: base %s, %d incident file(s), cache %s -> %s", base_dir, len(files), cache, out_dir)
    trained = train(cfg, out=out_dir, progress=progress, baselines=False, cache_dir=cache)
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
    base_model_id = f"{base_dir.name}@{str(manifest.get('files', {}).get('head.npz', ''))[:12]}"
    lineage = {
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
    (out_dir / "gate.json").write_text(json.dumps(gate.to_dict(), indent=1) + "\n", encoding="utf-8")
    (out_dir / "gate.md").write_text(gate.markdown(), encoding="utf-8")
    (out_dir / "lineage.json").write_text(json.dumps(lineage, indent=1) + "\n", encoding="utf-8")
    log.info("retrain: gate %s; regressions: %s", "passed" if gate.passed else "failed", gate.regressions or "none")
    if gate.passed and promote_to is not None:
        _promote(out_dir, Path(promote_to))
        log.info("retrain: promoted to %s", promote_to)
    # promoted: copied to ``promote_to`` and/or made the registry's champion
    promoted = gate.passed and (promote_to is not None or (track and register))
    result = RetrainResult(out_dir, trained, gate, promoted, lineage, 0.0)
    if track:
        result.run_id, result.registered_version = _track(result, experiment, register=register)
    result.seconds = time.perf_counter() - t0
    return result
