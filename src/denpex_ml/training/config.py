"""Training configuration: one validated dataclass, logged to mlflow as a flat dict."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from denpex_ml.dataset.io import data_path_exists
from denpex_ml.embedding import ENCODERS
from denpex_ml.errors import InvalidInputError

__all__ = ["TrainConfig"]


@dataclass
class TrainConfig:
    """What :func:`denpex_ml.training.train` does.

    Parameters
    ----------
    seed:
        Seed of synthetic generation and fitting (same data + seed -> same model).
    per_class_train, per_class_val, per_class_test:
        Synthetic incidents per failure class in each split (the test split also holds the
        launcher formats and message version never seen in training).
    real_data:
        Labelled real incidents (JSONL of the dataset format, or a glob pattern such as
        ``data/real/*.jsonl``), or a list of them; ``None`` for synthetic only.
    extra_data:
        More labelled incidents (user-labelled), trained on like real ones.
    real_weight:
        Weight of one real incident relative to one synthetic incident in stage 1.
    cv_folds:
        Grouped folds (by source thread) for the real-data evaluation.
    encoder:
        Registered encoder name.
    C, head_folds, k:
        Head hyper-parameters (see :class:`~denpex_ml.model.head.DenpexHead`).
    max_lines:
        Distinct line templates embedded per job.
    taxonomy_dirs:
        Extra taxonomy directories merged over the bundled one.
    confidence_calibration:
        A directory of test-then-train results (``eval/prequential``): the answers' confidence is
        recalibrated on the most recent real batches there, each scored before any model trained
        on it (:func:`~denpex_ml.dataset.prequential.fit_confidence_map`); ``None``: no
        recalibration.
    """

    seed: int = 7
    per_class_train: int = 80
    per_class_val: int = 20
    per_class_test: int = 30
    real_data: str | tuple[str, ...] | None = "data/real/*.jsonl"
    extra_data: tuple[str, ...] = ()
    real_weight: float = 5.0
    cv_folds: int = 5
    encoder: str = "static:minilm-static-256"
    C: float = 0.1
    head_folds: int = 5
    k: int = 10
    max_lines: int = 96
    taxonomy_dirs: tuple[str, ...] = ()
    confidence_calibration: str | None = None

    def __post_init__(self) -> None:
        for name in ("per_class_train", "per_class_val", "per_class_test"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise InvalidInputError(f"TrainConfig.{name} must be an int >= 0, got {v!r}")
        if self.per_class_train < 2:
            raise InvalidInputError(f"TrainConfig.per_class_train must be >= 2, got {self.per_class_train}")
        if self.encoder not in ENCODERS:
            raise InvalidInputError(f"TrainConfig.encoder must be one of {sorted(ENCODERS)}, got {self.encoder!r}")
        if not self.C > 0:
            raise InvalidInputError(f"TrainConfig.C must be > 0, got {self.C!r}")
        if not (isinstance(self.cv_folds, int) and self.cv_folds >= 2):
            raise InvalidInputError(f"TrainConfig.cv_folds must be an int >= 2, got {self.cv_folds!r}")
        if not self.real_weight > 0:
            raise InvalidInputError(f"TrainConfig.real_weight must be > 0, got {self.real_weight!r}")
        self.extra_data = tuple(str(p) for p in self.extra_data)
        self.taxonomy_dirs = tuple(str(p) for p in self.taxonomy_dirs)
        if self.confidence_calibration is not None and not Path(self.confidence_calibration).is_dir():
            raise InvalidInputError(
                f"TrainConfig.confidence_calibration: {self.confidence_calibration!r} is not a directory"
            )
        if isinstance(self.real_data, (list, tuple)):
            self.real_data = tuple(str(p) for p in self.real_data) or None
        reals = self.real_data if isinstance(self.real_data, tuple) else (self.real_data,)
        for p in (*reals, *self.extra_data):
            if p is not None and not data_path_exists(p):
                raise InvalidInputError(f"TrainConfig: data path {p!r} does not exist (or matches no file)")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["extra_data"] = list(self.extra_data)
        d["taxonomy_dirs"] = list(self.taxonomy_dirs)
        if isinstance(self.real_data, tuple):
            d["real_data"] = list(self.real_data)
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise InvalidInputError(
                f"TrainConfig: unknown field(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
            )
        data = dict(data)
        for key in ("extra_data", "taxonomy_dirs"):
            if key in data:
                data[key] = tuple(data[key])
        return cls(**data)
