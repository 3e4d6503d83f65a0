"""Which data an evaluation runs on, and how it was split from what the model trained on.

An evaluation scores *pools* of examples (each job is ingested and classified once) and
reports on *data sets*, which are views (row masks) over one pool:

========================  ==========================================================================
data set                  rows
========================  ==========================================================================
``synthetic_test``        the synthetic test split of the model's own training config (same seed,
                          separate random stream: never trained on), ``unknown`` incidents included
``synthetic_heldout``     its rows in a launcher format / message version absent from training
``out_of_taxonomy``       synthetic ``unknown`` incidents of the test split + real ``unknown`` logs
``real``                  real incidents from ``data/real`` (scored out of fold, grouped by source)
``user:NAME``             every extra JSONL file / label folder the user names
``gate_synthetic``,       the first :data:`GATE_PER_CLASS` incidents per class of the test split and
``gate_oot``              the out-of-taxonomy rows among them + real ``unknown`` logs: the fast
                          subset the regression gate re-evaluates (see :mod:`.gate`)
========================  ==========================================================================
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from denpex_ml.dataset import load_incidents
from denpex_ml.synthetic import make_splits
from denpex_ml.taxonomy import UNKNOWN_ID, Taxonomy
from denpex_ml.training.data import Example, data_hash, example_from_synthetic, examples_from_incidents

__all__ = ["GATE_PER_CLASS", "EvalSet", "Pool", "build_pools", "data_hash", "synthetic_train"]

#: Incidents per class of the test split in the regression gate's fast subset.
GATE_PER_CLASS = 3

_INDEX = re.compile(r"-(\d+)$")


@dataclass
class Pool:
    """Examples scored together. ``trained_on`` says whether the evaluated model saw them
    (then its metrics must come from out-of-fold retraining)."""

    name: str
    examples: list[Example]
    split: str
    trained_on: bool = False


@dataclass
class EvalSet:
    """A data set reported on: a row mask over one pool, with how it was made."""

    name: str
    pool: str
    mask: np.ndarray
    description: str

    def examples(self, pools: dict[str, Pool]) -> list[Example]:
        return [e for e, m in zip(pools[self.pool].examples, self.mask, strict=True) if m]


def _index(example: Example) -> int:
    m = _INDEX.search(example.id)
    return int(m.group(1)) if m else 0


def synthetic_train(config: dict[str, Any], taxonomy: Taxonomy) -> list[Example]:
    """The synthetic training split a model was trained on, regenerated from its manifest config."""
    recs = make_splits(int(config["per_class_train"]), 0, 0, seed=int(config["seed"]), taxonomy=taxonomy)["train"]
    return [example_from_synthetic(r) for r in recs]


def build_pools(
    config: dict[str, Any],
    taxonomy: Taxonomy,
    *,
    per_class_test: int | None = None,
    real_data: str | Sequence[str] | None = None,
    real_trained_on: bool = True,
    extra_data: Sequence[str] = (),
) -> tuple[dict[str, Pool], list[EvalSet]]:
    """Pools and data sets for a model trained with ``config`` (its manifest's ``config``).

    ``per_class_test`` defaults to the config's; a smaller value takes a prefix of the same
    split (incident ``i`` of a class is the same whatever the count).
    """
    seed = int(config["seed"])
    n_test = int(config["per_class_test"]) if per_class_test is None else per_class_test
    labels = taxonomy.ids
    test = [example_from_synthetic(r) for r in make_splits(0, 0, n_test, seed=seed, taxonomy=taxonomy)["test"]]
    pools = {
        "synthetic": Pool(
            "synthetic",
            test,
            f"synthetic test split: make_splits(per_class_test={n_test}, seed={seed}), random stream 'test', "
            "disjoint from the model's train/val streams; holds the held-out launchers and message version",
        )
    }
    is_unknown = np.asarray([e.label == UNKNOWN_ID for e in test])
    held = np.asarray([e.held_out_variant for e in test])
    gate = np.asarray([_index(e) < GATE_PER_CLASS for e in test])
    sets = [
        EvalSet("synthetic_test", "synthetic", np.ones(len(test), bool), "synthetic test split (all rows)"),
        EvalSet(
            "synthetic_heldout", "synthetic", held, "synthetic test rows in launcher formats/messages never trained on"
        ),
    ]
    real: list[Example] = []
    if real_data:
        real = examples_from_incidents(load_incidents(real_data, labels=labels), "real")
        pools["real"] = Pool(
            "real",
            real,
            f"{real_data}: grouped k-fold by source thread (a thread is never on both sides); the head is "
            "refitted per fold on the synthetic train split + the other folds",
            trained_on=real_trained_on,
        )
        sets.append(EvalSet("real", "real", np.ones(len(real), bool), "real labelled incidents, out of fold"))
    # out of taxonomy: a pool of its own so it can mix synthetic and real rows
    oot = [e for e in test if e.label == UNKNOWN_ID] + [e for e in real if e.label == UNKNOWN_ID]
    if oot:
        pools["oot"] = Pool("oot", oot, "synthetic test-split `unknown` incidents + real `unknown` logs")
        sets.append(EvalSet("out_of_taxonomy", "oot", np.ones(len(oot), bool), "failures outside the taxonomy"))
    n_syn_unknown = int(is_unknown.sum())
    if n_test > GATE_PER_CLASS:
        sets.append(EvalSet("gate_synthetic", "synthetic", gate, f"first {GATE_PER_CLASS} test incidents per class"))
        if oot:
            n_real = len(oot) - n_syn_unknown
            oot_gate = np.asarray([_index(e) < GATE_PER_CLASS for e in oot[:n_syn_unknown]] + [True] * n_real)
            sets.append(EvalSet("gate_oot", "oot", oot_gate, "gate subset of out_of_taxonomy"))
    for path in extra_data:
        name = f"user:{Path(path).name}"
        ex = examples_from_incidents(load_incidents(path, labels=labels), "user")
        pools[name] = Pool(name, ex, f"{path}: every incident, scored by the model as given (no split)")
        sets.append(EvalSet(name, name, np.ones(len(ex), bool), f"user data {path}"))
    return pools, sets
