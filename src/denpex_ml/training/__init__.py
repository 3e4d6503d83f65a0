"""Training: configuration, data, fitting, honest evaluation, experiment tracking.

>>> from denpex_ml.training import TrainConfig
>>> TrainConfig(per_class_train=4).per_class_train
4
"""

from __future__ import annotations

from denpex_ml.training.config import TrainConfig

__all__ = ["TrainConfig", "compare_models", "retrain", "train"]


def __getattr__(name: str) -> object:
    if name == "train":
        from denpex_ml.training.trainer import train

        return train
    if name in ("retrain", "compare_models"):
        from denpex_ml.training import retraining as _retrain

        return getattr(_retrain, name)
    raise AttributeError(name)
