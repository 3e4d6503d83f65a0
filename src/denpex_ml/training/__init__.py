"""Training: configuration, data, fitting, honest evaluation, experiment tracking.

>>> from denpex_ml.training import TrainConfig
>>> TrainConfig(per_class_train=4).per_class_train
4
"""

from __future__ import annotations

from denpex_ml.training.config import TrainConfig

__all__ = ["TrainConfig", "train"]


def __getattr__(name: str) -> object:
    if name == "train":
        from denpex_ml.training.train import train

        return train
    raise AttributeError(name)
