"""What the evidence says to a reader: words, not regular expressions; no progress bar as the
proof; long lines cut in the middle so the hint at their end survives."""

from __future__ import annotations

from denpex_ml import classify
from denpex_ml.features.select import PROGRESS_BAR
from denpex_ml.taxonomy import load_taxonomy

HOST_OOM = (
    "Loading checkpoint shards:  50%|#####     | 1/2 [00:04<00:04,  4.10s/it]\n"
    "Loading checkpoint shards:  50%|#####     | 1/2 [00:04<00:04,  4.12s/it]\n"
    "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 7101 closing signal SIGTERM\n"
    "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 1 (pid: 7102) of "
    "binary: /usr/bin/python3\n"
)


def test_why_is_written_in_words_for_every_fingerprint() -> None:
    for entry in load_taxonomy():
        for fp in entry.fingerprints:
            meaning = fp.meaning
            assert meaning and len(meaning) <= 160
            if fp.kind.value == "regex":
                assert fp.pattern not in meaning


def test_progress_bars_are_not_the_leading_evidence() -> None:
    d = classify(text=HOST_OOM)
    assert d.evidence
    assert not PROGRESS_BAR.search(d.evidence[0].text)
    assert sum(bool(PROGRESS_BAR.search(e.text)) for e in d.evidence) <= 1
    for e in d.evidence:
        assert "\\s" not in e.why and "(?:" not in e.why


def test_long_lines_keep_their_tail_in_the_summary() -> None:
    hint = "See documentation for Memory Management (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
    line = (
        "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity "
        "of 79.15 GiB of which 1.06 GiB is free. Including non-PyTorch memory, this process has 78.08 GiB memory in "
        "use. Of the allocated memory 74.30 GiB is allocated by PyTorch, and 2.91 GiB is reserved by PyTorch but "
        "unallocated. If reserved but unallocated memory is large try setting "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  " + hint + "\n"
    )
    d = classify(text=line)
    assert d.label == "cuda-oom"
    text = d.summary()
    assert "expandable_segments" in text or hint[-40:] in text
    assert "CUDA out of memory" in text
