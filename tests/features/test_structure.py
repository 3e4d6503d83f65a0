"""features/structure.py: cross-rank facts (collectives in watchdog lines, exceptions per rank)."""

from __future__ import annotations

from denpex_ml.features import analyse_structure
from denpex_ml.logs import read_logs

WATCHDOG = (
    "[rank{r}]:[E419 10:42:28.858931807 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, Timeout(ms)=600000) "
    "ran for 600011 milliseconds before timing out.\n"
)


def test_watchdog_lines_give_each_rank_its_last_collective() -> None:
    text = WATCHDOG.format(r=0, seq=41) + WATCHDOG.format(r=1, seq=42)
    facts = analyse_structure(read_logs(text=text))
    assert facts.watchdog_ranks == {0, 1}
    assert facts.collectives[0].seq == 41 and facts.collectives[1].seq == 42
    assert facts.collectives[0].op == "ALLREDUCE" and facts.collectives[0].timeout_ms == 600000


def test_an_exception_is_recorded_for_the_rank_that_raised_it() -> None:
    text = "[rank0]: step 1\n[rank2]: RuntimeError: CUDA error: an illegal memory access was encountered\n"
    facts = analyse_structure(read_logs(text=text))
    assert 2 in facts.exception_ranks and 0 not in facts.exception_ranks
