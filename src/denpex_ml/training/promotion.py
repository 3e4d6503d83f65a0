"""The promotion gate: a candidate model against the base on the same data, and promotion.

:func:`compare_models` scores both models on three data sets, each a named step:

* :func:`_synthetic_test`: the synthetic test split of the base model (regenerated from its
  seed with its taxonomy; neither model trained on it);
* :func:`_real_cv`: real incidents by grouped-by-thread cross-validation (the figures each
  manifest recorded at training time, when both trained on the same real data);
* :func:`_holdout`: held-out incidents the user gives, which neither model trained on.

The :class:`GateReport` fails when an overall figure drops by more than ``tolerance`` or a
class's F1 by more than ``class_tolerance`` (classes with at least ``min_support`` rows);
:meth:`GateReport.markdown` is the human-readable report. :func:`promote` copies a passing
candidate into place. (The evaluation gate of a model against its recorded reference figures
is another thing: :mod:`denpex_ml.evaluation.gate`.)
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from denpex_ml.metrics import classification_metrics, per_class_table
from denpex_ml.model.core import DenpexModel, load_model
from denpex_ml.model.persistence import read_model_dir
from denpex_ml.training.cache import FeatureStore, featurizer_signature
from denpex_ml.training.config import TrainConfig
from denpex_ml.training.data import Example, build_data, examples_from_incidents, incident_files
from denpex_ml.training.fitting import featurize
from denpex_ml.training.progress import Progress, no_progress

__all__ = ["GATE_FIGURES", "GateReport", "class_rows", "compare_models", "promote"]

#: Figures compared per data set (a drop beyond the tolerance fails the gate).
GATE_FIGURES = ("macro_f1", "top1")


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
    class_rows(report, name, _per_class(base), _per_class(cand), new_labels=set(cand.labels) - set(base.labels))


def _overall(report: GateReport, name: str, fig: str, b: float | None, c: float | None) -> None:
    """One overall figure of data set ``name``; a drop beyond ``tolerance`` is a regression."""
    if b is None or c is None or not (np.isfinite(b) and np.isfinite(c)):
        return
    ok = c >= b - report.tolerance
    report.overall.append({"set": name, "figure": fig, "base": b, "candidate": c, "delta": c - b, "ok": ok})
    if not ok:
        report.regressions.append(f"{name}: {fig} {b:.3f} -> {c:.3f} ({c - b:+.3f}, tolerance {report.tolerance:.3f})")


def class_rows(
    report: GateReport,
    name: str,
    pb: dict[str, dict[str, Any]],
    pc: dict[str, dict[str, Any]],
    *,
    new_labels: set[str],
) -> None:
    """The per-class F1 rows of data set ``name`` (base ``pb`` vs candidate ``pc``, each label ->
    its per-class row); a class with ``min_support`` rows whose F1 drops beyond
    ``class_tolerance`` is a regression."""
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
    progress: Progress = no_progress,
) -> GateReport:
    """The promotion gate: score both models on the same data and list regressions."""
    base_manifest, _ = read_model_dir(base_dir)
    cand_manifest, _ = read_model_dir(candidate_dir)
    base_cfg = TrainConfig.from_dict(dict(base_manifest["config"]))
    cand_cfg = TrainConfig.from_dict(dict(cand_manifest["config"]))
    base = load_model(base_dir, taxonomy_dirs=base_cfg.taxonomy_dirs or None)
    cand = load_model(candidate_dir, taxonomy_dirs=cand_cfg.taxonomy_dirs or None)
    pair = _Pair(base, cand, Path(cache_dir) if cache_dir is not None else None, progress)
    report = GateReport(passed=False, tolerance=tolerance, class_tolerance=class_tolerance, min_support=min_support)
    _synthetic_test(report, pair, base_cfg)
    _real_cv(report, (Path(base_dir), base_manifest, base_cfg), (Path(candidate_dir), cand_manifest, cand_cfg))
    if holdout:
        _holdout(report, pair, holdout)
    report.passed = not report.regressions
    return report


@dataclass
class _Pair:
    """The two models the gate compares, and how their features are cached and shown."""

    base: DenpexModel
    cand: DenpexModel
    cache: Path | None
    progress: Progress

    def compare(self, report: GateReport, name: str, examples: Sequence[Example], what: str) -> None:
        """Score both models on ``examples`` and add data set ``name`` to ``report``."""
        _compare_set(
            name,
            _score(self.base, examples, self.cache, f"gate: {what} (base)", self.progress),
            _score(self.cand, examples, self.cache, f"gate: {what} (candidate)", self.progress),
            report,
        )


def _synthetic_test(report: GateReport, pair: _Pair, base_cfg: TrainConfig) -> None:
    """1. the base's synthetic test split (neither model trained on it)."""
    data = build_data(
        taxonomy=pair.base.taxonomy,
        seed=base_cfg.seed,
        per_class=(2, 0, base_cfg.per_class_test),
        real_data=None,
        cache_dir=pair.cache,
    )
    pair.compare(report, "synthetic_test", data["test"], "synthetic test")


_Side = tuple[Path, dict[str, Any], TrainConfig]


def _real_cv(report: GateReport, base: _Side, cand: _Side) -> None:
    """2. real incidents by grouped CV: figures recorded at training time on the same incidents."""
    (base_dir, base_manifest, base_cfg), (candidate_dir, cand_manifest, cand_cfg) = base, cand
    mb, mc = base_manifest.get("metrics", {}), cand_manifest.get("metrics", {})
    if (
        base_cfg.real_data
        and base_cfg.real_data == cand_cfg.real_data
        and "real/macro_f1" in mb
        and "real/macro_f1" in mc
    ):
        for fig in GATE_FIGURES:
            _overall(report, "real_cv", fig, mb.get(f"real/{fig}"), mc.get(f"real/{fig}"))
        pcb = _per_class_file(base_dir).get("real", [])
        pcc = _per_class_file(candidate_dir).get("real", [])
        if pcb and pcc:
            class_rows(report, "real_cv", {r["label"]: r for r in pcb}, {r["label"]: r for r in pcc}, new_labels=set())
    else:
        report.notes.append(
            "real incidents: not compared (different real data, or no grouped-CV figures in a manifest)"
        )


def _holdout(report: GateReport, pair: _Pair, holdout: Sequence[str | Path]) -> None:
    """3. held-out incidents given by the user (neither model trained on them)."""
    from denpex_ml.dataset import load_incidents

    labels = set(pair.cand.taxonomy.ids) | set(pair.base.taxonomy.ids)
    ex = examples_from_incidents(load_incidents(incident_files(holdout), labels=labels), "user")
    pair.compare(report, "holdout", ex, "holdout")
    new = sorted({e.label for e in ex} - set(pair.base.labels))
    if new:
        report.notes.append(f"holdout: {', '.join(new)} unknown to the base model (its F1 counts as 0)")


def _per_class_file(model_dir: Path) -> dict[str, list[dict[str, Any]]]:
    p = model_dir / "per_class.json"
    if not p.exists():
        return {}
    data: dict[str, list[dict[str, Any]]] = json.loads(p.read_text(encoding="utf-8"))
    return data


# -- promotion ----------------------------------------------------------------------------------
def promote(model_dir: Path, target: Path) -> None:
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
