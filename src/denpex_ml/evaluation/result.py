"""The evaluation's configuration and its result: what :func:`~denpex_ml.evaluation.run.evaluate`
runs and everything a report needs (the plots and the markdown report read it; neither needs the
runner)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from denpex_ml.baselines import BASELINES
from denpex_ml.evaluation.measures import Measured

__all__ = ["EvalConfig", "EvalResult"]


@dataclass
class EvalConfig:
    """What :func:`evaluate` runs.

    Parameters
    ----------
    model_dir:
        Model directory (default: the shipped model).
    per_class_test:
        Synthetic test incidents per class (default: the model's own training config).
    real_data:
        Real labelled incidents; ``""`` takes the model's config (``None``: none).
    real_cv:
        Score real incidents by grouped k-fold retraining of the head (slow). Without it the
        ``real`` data set is left out when the model trained on it.
    extra_data:
        More JSONL files / label folders, each reported as its own data set.
    baselines:
        Baselines to run (subset of :data:`~denpex_ml.baselines.BASELINES`).
    prequential_dir:
        Where the test-then-train figures are kept (:mod:`denpex_ml.dataset.prequential`);
        the report quotes them. ``None``: leave them out.
    ablation:
        With the real cross-validation, also refit the head with parts of its evidence only
        (:data:`ABLATIONS`) to show what each part adds on real logs (slower).
    """

    model_dir: str | None = None
    per_class_test: int | None = None
    real_data: str | list[str] | None = ""
    real_cv: bool = True
    extra_data: tuple[str, ...] = ()
    baselines: tuple[str, ...] = BASELINES
    prequential_dir: str | None = "eval/prequential"
    ablation: bool = False

    def __post_init__(self) -> None:
        from denpex_ml.errors import InvalidInputError

        bad = [b for b in self.baselines if b not in BASELINES]
        if bad:
            raise InvalidInputError(f"EvalConfig.baselines must be among {list(BASELINES)}, got {bad}")
        if self.per_class_test is not None and self.per_class_test < 1:
            raise InvalidInputError(f"EvalConfig.per_class_test must be >= 1, got {self.per_class_test}")
        self.extra_data = tuple(str(p) for p in self.extra_data)
        self.baselines = tuple(self.baselines)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["extra_data"] = list(self.extra_data)
        d["baselines"] = list(self.baselines)
        return d


@dataclass
class EvalResult:
    """Everything a report needs. ``metrics`` keys are ``SET/METRIC`` for the model and
    ``SET/SYSTEM/METRIC`` for a baseline (as in training)."""

    config: EvalConfig
    model: dict[str, Any]
    labels: list[str]
    data: dict[str, dict[str, Any]]
    measured: dict[str, dict[str, Measured]]
    systems: dict[str, str]
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    prequential: list[dict[str, Any]] = field(default_factory=list)
    #: the most recent batches pooled (:func:`~denpex_ml.dataset.prequential.pool_latest`)
    prequential_pooled: dict[str, Any] | None = None
    ablation: dict[str, dict[str, float]] = field(default_factory=dict)
    #: pool name -> one row per incident of the real and user pools: its label, the model's answer
    #: (out of fold where the model trained on it) and the rules' answer; written as
    #: ``predictions_<pool>.jsonl`` so a wrong or doubtful label can be found and read
    predictions: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def metrics(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for ds, by_system in self.measured.items():
            for system, m in by_system.items():
                infix = "" if system == "model" else f"{system}/"
                out.update({f"{ds}/{infix}{k}": v for k, v in m.metrics.items()})
        return out

    def to_dict(self) -> dict[str, Any]:
        def clean(v: Any) -> Any:
            if isinstance(v, float) and not math.isfinite(v):
                return None
            if isinstance(v, float):
                return round(v, 6)
            return v

        return {
            "config": self.config.to_dict(),
            "model": self.model,
            "labels": self.labels,
            "data": self.data,
            "systems": self.systems,
            "seconds": round(self.seconds, 2),
            "notes": self.notes,
            "metrics": {k: clean(v) for k, v in sorted(self.metrics.items())},
            "per_class": {ds: {s: m.per_class for s, m in bs.items()} for ds, bs in self.measured.items()},
            "confusion": {ds: bs["model"].confusion for ds, bs in self.measured.items() if "model" in bs},
            "coverage": {
                ds: {s: [{k: clean(v) for k, v in r.items()} for r in m.coverage] for s, m in bs.items()}
                for ds, bs in self.measured.items()
            },
            "reliability": {ds: {s: m.reliability for s, m in bs.items()} for ds, bs in self.measured.items()},
            "prequential": self.prequential,
            "prequential_pooled": self.prequential_pooled,
            "ablation": self.ablation,
        }
