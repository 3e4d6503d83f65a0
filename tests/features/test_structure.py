"""features/structure.py: cross-rank facts (collectives in watchdog lines, exceptions per rank)."""

from __future__ import annotations

from denpex_ml.features import analyse_structure
from denpex_ml.features.structure import FEATURE_NAMES
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


def test_a_watchdog_report_wrapped_over_lines_is_joined_back_to_its_rank() -> None:
    """As pasted from a terminal (batch dh): the rank prefix on the first line only, the
    collective and its sizes on the next two; two ranks at one SeqNum with different sizes."""
    text = "".join(
        f"[rank{r}] Watchdog caught collective operation timeout:\n"
        f"WorkNCCL(SeqNum=1320347, OpType=ALLREDUCE,\n"
        f"NumelIn={n}, NumelOut={n}, Timeout(ms)=600000)\n"
        for r, n in ((6, 4501504), (5, 8171520))
    )
    facts = analyse_structure(read_logs(text=text))
    assert set(facts.collectives) == {5, 6}
    assert facts.collectives[6].numel_in == 4501504 and facts.collectives[5].numel_in == 8171520
    assert facts.collectives[5].timeout_ms == 600000
    names = dict(zip(FEATURE_NAMES, facts.vector, strict=True))
    assert names["same_seq_diff_op"] == 1.0 and names["seq_same"] == 1.0


def test_a_collective_line_of_its_own_stays_where_it_stands() -> None:
    """WorkNCCL on a line that follows no rank's bare watchdog report is read in its own stream."""
    text = "step 10 done\nWorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=25000)\n"
    facts = analyse_structure(read_logs(text=text))
    assert [(c.seq, c.numel_in) for c in facts.collectives.values()] == [(7, 1)]
    assert not any(isinstance(k, int) for k in facts.collectives)


def test_an_exception_is_recorded_for_the_rank_that_raised_it() -> None:
    text = "[rank0]: step 1\n[rank2]: RuntimeError: CUDA error: an illegal memory access was encountered\n"
    facts = analyse_structure(read_logs(text=text))
    assert 2 in facts.exception_ranks and 0 not in facts.exception_ranks


def _words(text: str) -> dict[str, float]:
    from denpex_ml.features.structure import FEATURE_NAMES

    vec = analyse_structure(read_logs(text=text)).vector
    return {
        n.removeprefix("error_words_"): float(v)
        for n, v in zip(FEATURE_NAMES, vec, strict=True)
        if n.startswith("error_words_")
    }


def test_failing_lines_are_read_for_start_up_and_device_memory_words_no_rule_knows() -> None:
    # start-up in a stack no fingerprint names: connecting, binding, resolving, peers
    assert _words("W0418 LightNetwork.cpp:397] connection refused by pserver, try again!\n")["startup"] == 1.0
    assert _words("ERROR: the port 29500 is already bound, cannot start the server\n")["startup"] == 1.0
    # another accelerator's allocator: device memory, out of memory in other words
    kunlun = _words("ioctl() fail, (705) Device memory not enough\n")
    assert kunlun["device_memory"] == 1.0 and kunlun["out_of_memory"] == 1.0
    assert _words("GPU memory is overflow, please reduce your batch_size\n")["out_of_memory"] == 1.0
    # the same words on a line kept as salient that reports nothing wrong are not evidence
    healthy = _words("WARNING: peer connection to node-b established after 3 attempts, GPU memory pinned\n")
    assert healthy == {"startup": 0.0, "device_memory": 0.0, "out_of_memory": 0.0}
    assert _words("WARNING: peer connection to node-b failed after 3 attempts\n")["startup"] == 1.0
