"""Evaluation suite (``denpex-ml eval``): the model and its baselines on held-out data.

Modules: :mod:`.datasets` (which data, how it was split), :mod:`.baselines` (rule, TF-IDF,
zero-shot, GPUAlert wiring), :mod:`.measures` (metrics of one system on one data set),
:mod:`.plots`, :mod:`.report`, :mod:`.run` (the runner) and :mod:`.gate` (the regression gate).
"""

from __future__ import annotations

from denpex_ml.evaluation.result import EvalConfig, EvalResult
from denpex_ml.evaluation.run import evaluate, run_eval

__all__ = ["EvalConfig", "EvalResult", "evaluate", "run_eval"]
