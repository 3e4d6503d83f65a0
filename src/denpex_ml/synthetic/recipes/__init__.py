"""The recipe registry: one :class:`Recipe` per label, grouped by family module.

:data:`RECIPES` is a closed mapping from label to recipe. A taxonomy id without a
specific recipe gets :func:`fallback_recipe`, built from the entry's own fingerprints,
so a new taxonomy entry yields training data without new code.
"""

from __future__ import annotations

from denpex_ml.synthetic.recipes import (
    application,
    comm,
    hangs,
    hardware,
    healthy,
    moe,
    numerics,
    resources,
    unknown,
)
from denpex_ml.synthetic.recipes.base import Recipe
from denpex_ml.synthetic.recipes.fallback import fallback_recipe

__all__ = ["RECIPES", "Recipe", "fallback_recipe"]


def _collect() -> dict[str, Recipe]:
    out: dict[str, Recipe] = {}
    for module in (moe, hangs, comm, hardware, resources, numerics, application, unknown, healthy):
        for recipe in module.RECIPES:
            if recipe.label in out:
                raise RuntimeError(f"two recipes for label {recipe.label!r}")
            out[recipe.label] = recipe
    return dict(sorted(out.items()))


RECIPES: dict[str, Recipe] = _collect()
