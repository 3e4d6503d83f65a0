from __future__ import annotations

from pathlib import Path

import pytest

from denpex_ml.batch.output import ResultSink
from denpex_ml.batch.score import score_archive

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "data" / "examples" / "jobs"


@pytest.fixture(scope="session")
def scored_examples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``data/examples/jobs`` scored by the shipped model into a JSONL results file."""
    out = tmp_path_factory.mktemp("scored") / "results.jsonl"
    with ResultSink(out) as sink:
        for row in score_archive(EXAMPLES, workers=1):
            sink.write(row)
    return out
