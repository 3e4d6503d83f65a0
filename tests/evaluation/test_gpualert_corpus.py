"""eval/gpualert_corpus.py: GPUAlert's corpus format read, classes mapped, absent logs counted."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

_SCRIPT = Path(__file__).resolve().parents[2] / "eval" / "gpualert_corpus.py"
_spec = importlib.util.spec_from_file_location("gpualert_corpus", _SCRIPT)
assert _spec is not None and _spec.loader is not None
corpus = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(corpus)


def test_a_catch_all_class_yields_to_a_decisive_wording() -> None:
    assert corpus.accepted_ids("runtime_error", "RuntimeError: boom") == {"uncaught-exception-crash"}
    text = "RuntimeError: CUDA capability sm_90 is not compatible with this build"
    assert corpus.accepted_ids("runtime_error", text) == {"cuda-driver-mismatch"}
    assert "nccl-network-error" in corpus.accepted_ids("nccl", "")


def test_an_unmapped_class_is_refused_by_name() -> None:
    with pytest.raises(KeyError, match="xid_storm"):
        corpus.accepted_ids("xid_storm", "")


def test_scores_a_small_corpus_and_counts_absent_logs(tmp_path: Path) -> None:
    logs = {
        "cuda_oom-injected-0001": (
            "cuda_oom",
            'Traceback (most recent call last):\n  File "train.py", line 9, in <module>\n'
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
            "capacity of 39.39 GiB of which 0.44 GiB is free.\n",
        ),
        "missing_module-wild-01": (
            "missing_module",
            'Traceback (most recent call last):\n  File "train.py", line 1, in <module>\n'
            "ModuleNotFoundError: No module named 'flash_attn'\n",
        ),
    }
    (tmp_path / "corpus" / "injected").mkdir(parents=True)
    rows = []
    for sid, (mode, text) in logs.items():
        rel = f"corpus/injected/{sid}.log"
        (tmp_path / rel).write_text(text)
        rows.append({"id": sid, "mode": mode, "source": "injected", "log_path": rel})
    rows.append({"id": "gone", "mode": "ram_oom", "source": "wild", "log_path": "corpus/wild/gone.log"})
    (tmp_path / "corpus" / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    from denpex_ml import load_model

    scored, missing = corpus.score(tmp_path, load_model())
    assert missing == 1
    assert [r["id"] for r in scored] == list(logs)
    assert all(r["correct"] for r in scored), [(r["id"], r["predicted"]) for r in scored]
    table = corpus.table(scored)
    assert "| cuda_oom | 1 | 1 | 1 | - |" in table
    assert "| **all** | 2 | 2 (1.000)" in table
