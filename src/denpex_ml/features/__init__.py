"""Turning a :class:`~denpex_ml.logs.LogBundle` into evidence and numeric features."""

from __future__ import annotations

from denpex_ml.features.fingerprints import FingerprintHit, FingerprintMatcher
from denpex_ml.features.select import SelectedLine, select_lines, template
from denpex_ml.features.structure import CollectiveState, StructureFeatures, analyse_structure

__all__ = [
    "CollectiveState",
    "FingerprintHit",
    "FingerprintMatcher",
    "SelectedLine",
    "StructureFeatures",
    "analyse_structure",
    "select_lines",
    "template",
]
