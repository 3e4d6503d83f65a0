"""Test-then-train: score a newly collected batch of real logs *before* it is used for anything.

A batch of real logs (one JSONL file, grouped by source thread) is scored by the model as it
is at collection time, and by the fingerprint rules alone; the figures are written to
``eval/prequential/`` and kept in the repository. Only then may the batch shape fingerprints,
recipes or training. These are the figures that predict accuracy on logs nobody has shown
the model; grouped cross-validation over logs the fingerprints were written from does not.

The rows, their summaries, the kept files and the pooled figures are
:mod:`denpex_ml.dataset.prequential` (the trainer fits the confidence recalibration on them).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from denpex_ml.baselines import RuleBaseline
from denpex_ml.dataset import Incident
from denpex_ml.dataset.prequential import PrequentialRow
from denpex_ml.errors import DenpexError
from denpex_ml.model.core import DenpexModel
from denpex_ml.taxonomy import UNKNOWN_ID
from denpex_ml.taxonomy.groups import group_of
from denpex_ml.training.data import incident_bundle

__all__ = ["score_batch"]


def _visible(inc: Incident, rank: int | None) -> bool:
    if rank is None:
        return False
    texts = list(inc.logs.values()) + list(inc.logs) if inc.logs is not None else [inc.log or ""]
    pat = (f"[rank{rank}]", f"[Rank {rank}]", f"rank {rank}", f"rank{rank}", f"Rank {rank}", f"[{rank}]", f"{rank}: ")
    return any(p in t for t in texts for p in pat)


def score_batch(
    model: DenpexModel, incidents: Sequence[Incident], *, progress: Callable[[], None] | None = None
) -> list[PrequentialRow]:
    """Score every incident with ``model`` and with the fingerprint rules alone."""
    rules = RuleBaseline(model.matcher)
    rows = []
    for inc in incidents:
        src: Any = dict(inc.logs) if inc.logs is not None else inc.log
        t0 = time.perf_counter()
        common: dict[str, Any] = {
            "id": inc.id,
            "source": inc.source,
            "label": inc.label,
            "group": group_of(inc.label),
            "label_confidence": str(inc.meta.get("label_confidence", "")),
            "initiating_rank": inc.initiating_rank,
            "rank_visible": _visible(inc, inc.initiating_rank),
        }
        try:
            bundle = incident_bundle(src)
            d = model.diagnose(bundle, started=t0)
            scores = rules.scores([bundle])[0]
            rule = model.labels[int(scores.argmax())] if scores.max() > 0 else UNKNOWN_ID
            top = [lab for lab, _ in d.alternatives[:3]]
            rows.append(
                PrequentialRow(
                    **common,
                    predicted=d.label,
                    confidence=float(d.confidence),
                    top3=tuple(top),
                    rule=rule,
                    predicted_rank=d.initiating_rank,
                    seconds=time.perf_counter() - t0,
                    unknown_reason=d.unknown_reason,
                    best_probability=max((p for _, p in d.alternatives), default=None) if d.abstained else None,
                    outside_probability=d.outside_probability,
                )
            )
        except DenpexError as exc:
            rows.append(
                PrequentialRow(
                    **common,
                    predicted="error",
                    confidence=0.0,
                    top3=(),
                    rule="error",
                    predicted_rank=None,
                    seconds=time.perf_counter() - t0,
                    error=f"{type(exc).__name__}: {exc}",
                )
            )
        if progress is not None:
            progress()
    return rows
