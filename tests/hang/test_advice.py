"""What the diagnosis says to collect next when the log cannot separate the hang classes."""

from __future__ import annotations

from denpex_ml.features.structure import analyse_structure
from denpex_ml.hang.advice import advise
from denpex_ml.hang.analysis import HangReport, analyse_hang
from denpex_ml.logs import read_logs
from denpex_ml.taxonomy import load_taxonomy

RIVALS = [("host-work-timeout", 0.41), ("subset-rank-collective-hang", 0.37), ("cuda-oom", 0.05)]


def _report(text: str) -> HangReport:
    b = read_logs(text=text)
    return analyse_hang(b, analyse_structure(b))


def _names(text: str) -> list[str]:
    advice = advise(RIVALS, _report(text), load_taxonomy())
    assert advice is not None
    return [a.name for a in advice.collect]


def test_a_training_hang_asks_for_pytorchs_own_artefacts() -> None:
    wd = (
        "[rank{r}]:[E1201 10:00:00.0 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600042 "
        "milliseconds before timing out."
    )
    report = _report("\n".join(wd.format(r=r) for r in range(1, 4)))
    assert report.is_hang and report.reported_by is None
    names = _names("\n".join(wd.format(r=r) for r in range(1, 4)))
    assert names[0] == "Flight Recorder dumps of every rank"
    assert "the desync report" in names


def test_an_engines_own_stall_asks_for_the_engines_artefacts() -> None:
    """vLLM's workers wait on vLLM's own communicator and queues: Flight Recorder and the desync
    report see none of that, the workers' stacks and vLLM's debug log do."""
    vllm = (
        "(EngineCore_DP0 pid=1454) INFO 05-28 14:45:27 [shm_broadcast.py:681] No available shared memory"
        " broadcast block found in 60 seconds. This typically happens when some processes are hanging.\n"
    )
    report = _report(vllm)
    assert report.reported_by == "vllm" and report.to_dict()["reported_by"] == "vllm"
    assert "vLLM" in report.summary_lines()[0]
    names = _names(vllm)
    assert "Flight Recorder dumps of every rank" not in names and "the desync report" not in names
    assert names[:2] == ["stacks of the engine's processes while it hangs", "vLLM's debug log"]
    sglang = "[2026-05-26 13:36:14 TP5] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)\n"
    assert _report(sglang).reported_by == "sglang"
    assert "SGLang's and NCCL's debug log" in _names(sglang)


def test_horovods_stall_inspector_asks_for_horovods_own_artefacts() -> None:
    stall = (
        "[2019-08-01 10:00:00.000000: W horovod/common/stall_inspector.cc:105] One or more tensors were"
        " submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder"
        " of ranks for more than 60 seconds. This may indicate that different ranks are trying to submit"
        " different tensors or that only subset of ranks is submitting tensors, which will cause deadlock.\n"
        "Stalled ranks:\n"
        "0: [DistributedAdamOptimizer_Allreduce/HorovodAllreduce_gradients_0]\n"
    )
    report = _report(stall)
    assert report.is_hang and report.reported_by == "horovod"
    names = _names(stall)
    assert names[:2] == ["Horovod's timeline", "the stall inspector, sooner and fatal"]
    assert "Flight Recorder dumps of every rank" not in names


def test_deepeps_timeout_asks_to_narrow_the_exchange() -> None:
    """A DeepEP dispatch/combine timeout lies outside NCCL: the next step narrows it to one
    exchange at one scale and tries the general-purpose all-to-all (the seed's own checklist)."""
    line = "DeepEP error: timeout (dispatch CPU)\n"
    report = _report(line)
    assert report.is_hang and report.reported_by == "deepep"
    names = _names(line)
    assert names[:2] == [
        "the same steps on a smaller expert-parallel domain",
        "the general-purpose all-to-all in place of DeepEP",
    ]
    assert "Flight Recorder dumps of every rank" not in names


def test_no_advice_without_a_hang_or_for_a_confident_answer() -> None:
    taxonomy = load_taxonomy()
    assert advise(RIVALS, _report("torch.OutOfMemoryError: CUDA out of memory.\n"), taxonomy) is None
    vllm = "ERROR 12-09 05:28:10 async_llm_engine.py:886] Engine iteration timed out. This should never happen!\n"
    assert advise([("host-work-timeout", 0.9), ("cuda-oom", 0.02)], _report(vllm), taxonomy) is None


_WD = (
    "[rank{r}]:[E1201 10:00:00.0 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn={n}, NumelOut={n}, Timeout(ms)=600000) ran for 600042 "
    "milliseconds before timing out."
)


def _observed(*ranks: tuple[int, int, str, int]) -> tuple[str, ...]:
    text = "\n".join(_WD.format(r=r, seq=seq, op=op, n=n) for r, seq, op, n in ranks) + "\n"
    advice = advise(RIVALS, _report(text), load_taxonomy())
    assert advice is not None
    assert advice.to_dict()["observed"] == list(advice.observed)
    if advice.observed:
        lines = advice.summary_lines()
        assert lines[1] == "  This log shows:" and lines[2] == f"    * {advice.observed[0]}"
    return advice.observed


def test_the_advice_says_where_this_logs_ranks_wait() -> None:
    """Beside the generic way to tell the rivals apart, what this log itself shows: ranks at
    different SeqNums (the subset pattern), one SeqNum with other sizes (different collectives),
    or one and the same collective everywhere (the calls match)."""
    spread = _observed((0, 420, "_REDUCE_SCATTER_BASE", 8208384), (1, 423, "_REDUCE_SCATTER_BASE", 64))
    assert spread[0].startswith("the ranks wait at different SeqNums (")
    assert "rank 0 in _REDUCE_SCATTER_BASE #420" in spread[0] and "rank 1 in _REDUCE_SCATTER_BASE #423" in spread[0]
    sizes = _observed((0, 7, "ALLREDUCE", 1024), (1, 7, "ALLREDUCE", 1024), (2, 7, "ALLREDUCE", 512))
    assert sizes[0].startswith("the ranks wait at one SeqNum in different ops or sizes (")
    assert "ranks 0, 1 in ALLREDUCE #7 NumelIn=1024" in sizes[0] and "rank 2 in ALLREDUCE #7 NumelIn=512" in sizes[0]
    same = _observed((1, 9, "ALLREDUCE", 1), (2, 9, "ALLREDUCE", 1), (3, 9, "ALLREDUCE", 1))
    assert same[0].startswith("every rank that reports waits in the same collective (ALLREDUCE #9")


def test_the_advice_names_the_rank_that_printed_no_timeout() -> None:
    text = (
        "[rank0]: Tokenizing the training set: 40%|####      | 400/1000\n"
        + _WD.format(r=1, seq=1, op="BROADCAST", n=1)
        + "\n"
    )
    advice = advise(RIVALS, _report(text), load_taxonomy())
    assert advice is not None
    assert "rank 0 printed no timeout while rank 1 timed out waiting: the others wait for it" in advice.observed[0]
    assert any(o.startswith("the stuck SeqNum is at most 5") for o in advice.observed)
