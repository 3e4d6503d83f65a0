"""The failure taxonomy: load, validate, list, look up and search entries.

Entries are YAML files, one per failure, validated against :class:`Entry`. The bundled
taxonomy ships with the package; user directories passed to :func:`load_taxonomy` add
entries or override bundled ones with the same id.

Example
-------
>>> from denpex_ml.taxonomy import load_taxonomy
>>> tax = load_taxonomy()
>>> tax.get("cuda-oom").category.value
'resources'
"""

from __future__ import annotations

from denpex_ml.taxonomy.loader import Taxonomy, bundled_taxonomy_dir, load_taxonomy
from denpex_ml.taxonomy.schema import (
    UNKNOWN_ID,
    Category,
    Entry,
    Fingerprint,
    FingerprintKind,
    FingerprintRole,
    FixStep,
)

__all__ = [
    "UNKNOWN_ID",
    "Category",
    "Entry",
    "Fingerprint",
    "FingerprintKind",
    "FingerprintRole",
    "FixStep",
    "Taxonomy",
    "bundled_taxonomy_dir",
    "load_taxonomy",
]
