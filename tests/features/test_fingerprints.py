"""features/fingerprints.py: the taxonomy's fingerprints, compiled once, over a job's lines."""

from __future__ import annotations

import numpy as np

from denpex_ml.features import FingerprintMatcher
from denpex_ml.logs import read_logs
from denpex_ml.taxonomy import load_taxonomy

OOM = "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"


def test_a_line_matches_the_fingerprints_of_its_entry() -> None:
    m = FingerprintMatcher(load_taxonomy())
    assert {m.entry_of(i) for i in m.match_text(OOM.strip())} == {"cuda-oom"}
    assert m.match_text("step 3 loss 1.25") == []


def test_scan_reports_each_hit_with_its_line_and_role() -> None:
    m = FingerprintMatcher(load_taxonomy())
    bundle = read_logs(text=OOM + OOM)
    hits = m.scan(ln for s in bundle.streams.values() for ln in s.lines)
    assert hits and {h.entry_id for h in hits} == {"cuda-oom"}
    assert all(h.line.rank == 3 for h in hits)
    scores = m.rule_scores(hits)
    assert m.labels[int(np.argmax(scores))] == "cuda-oom"
