"""The line bank: each entry's own wordings, matched to a job's error lines by meaning."""

from __future__ import annotations

import numpy as np

from denpex_ml.embedding import HashingEncoder
from denpex_ml.model.line_bank import LineBank
from denpex_ml.taxonomy import load_taxonomy


def test_each_class_gets_its_best_line_similarity() -> None:
    tax = load_taxonomy()
    labels = tax.ids[:-1]  # every entry but unknown
    enc = HashingEncoder(dim=256)
    bank = LineBank(tax, labels, enc)
    assert len(bank.vectors) == len(bank.owner) and set(bank.owner.tolist()) == set(range(len(labels)))
    line = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    sim = bank.similarity(enc.encode([line]))
    assert sim.shape == (len(labels),)
    assert labels[int(sim.argmax())] == "cuda-oom"
    assert np.all((sim >= 0) & (sim <= 1))


def test_no_lines_no_similarity() -> None:
    tax = load_taxonomy()
    bank = LineBank(tax, tax.ids[:3], HashingEncoder(dim=64))
    assert not bank.similarity(np.zeros((0, 64), dtype=np.float32)).any()
