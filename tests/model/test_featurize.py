"""The job analysis embeds a bounded number of lines (``max_lines``, 96 by default), however
long and varied the log: the embedding cost of a job does not grow with its size."""

from __future__ import annotations

import itertools
import string
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from denpex_ml.embedding import ENCODERS, Encoder
from denpex_ml.features.fingerprints import FingerprintMatcher
from denpex_ml.logs import read_logs
from denpex_ml.model.core import load_model
from denpex_ml.model.featurize import Featurizer
from denpex_ml.taxonomy import load_taxonomy


class CountingEncoder:
    """An encoder that records every text it is asked to embed."""

    def __init__(self, inner: Encoder) -> None:
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self.texts: list[str] = []

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.texts.extend(texts)
        return self.inner.encode(texts)


def _varied_log(n: int) -> str:
    """``n`` error lines with ``n`` distinct templates (letters only: numbers are templated away)."""
    words = ("".join(w) for w in itertools.product(string.ascii_lowercase, repeat=3))
    return "".join(
        f"[rank{i % 8}]: RuntimeError: operator {w} failed in module {w}x of layer {w}y\n"
        for i, w in zip(range(n), words, strict=False)
    )


@pytest.fixture(scope="module")
def bundle():  # type: ignore[no-untyped-def]
    return read_logs(text=_varied_log(400))


@pytest.mark.parametrize("max_lines", [8, 96])
def test_embedded_lines_are_capped_at_max_lines(bundle, max_lines: int, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    encoder = CountingEncoder(ENCODERS["hashing:64"](tmp_path))
    featurizer = Featurizer(FingerprintMatcher(load_taxonomy()), encoder, max_lines=max_lines)
    a = featurizer.analyse(bundle)
    assert len(a.selected) == max_lines  # the log offers far more distinct lines than the cap
    assert len(encoder.texts) == max_lines
    assert a.embedding.shape == (2 * encoder.dim,)


def test_the_default_cap_is_96_lines_and_the_model_keeps_it(bundle) -> None:  # type: ignore[no-untyped-def]
    from denpex_ml.errors import ModelError

    try:
        model = load_model()
    except ModelError:
        pytest.skip("the shipped model cannot be loaded with this taxonomy")
    assert model.featurizer.max_lines == int(model.manifest.get("max_lines", 96)) == 96
    assert len(model.analyse(bundle).selected) == 96
