from __future__ import annotations

from denpex_ml.features import analyse_structure
from denpex_ml.features.fingerprints import FingerprintMatcher
from denpex_ml.logs import read_logs
from denpex_ml.model.initiator import find_initiator
from denpex_ml.taxonomy import load_taxonomy

MATCHER = FingerprintMatcher(load_taxonomy())


def verdict(text: str, label: str | None):  # type: ignore[no-untyped-def]
    b = read_logs(text=text)
    return find_initiator(b, MATCHER.scan(b.iter_lines()), analyse_structure(b), label)


def wd(rank: int, seq: int, op: str = "ALLREDUCE") -> str:
    return (
        f"[rank{rank}]:[E419 10:42:{rank:02d}.1 ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught collective operation "
        f"timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600011 milliseconds before timing out.\n"
    )


def test_crashed_rank_beats_loud_waiting_ranks() -> None:
    text = (
        "".join(wd(r, 57) for r in (0, 1, 3))
        + "[rank2]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    )
    v = verdict(text, "cuda-oom")
    assert v.rank == 2
    assert "cuda-oom" in v.reason


def test_rank_behind_in_seqnum() -> None:
    text = wd(0, 58) + wd(1, 58) + wd(2, 57) + wd(3, 58)
    assert verdict(text, "subset-rank-collective-hang").rank == 2


def test_no_basis_gives_none() -> None:
    assert verdict("".join(wd(r, 58) for r in range(4)), None).rank is None
    assert verdict("RuntimeError: boom\n", "uncaught-exception-crash").rank is None  # no ranks at all


def test_same_error_everywhere_uses_order_in_the_log() -> None:
    text = "".join(f"[rank{r}]: ModuleNotFoundError: No module named 'flash_attn'\n" for r in (3, 0, 1, 2))
    assert verdict(text, "missing-module").rank == 3
