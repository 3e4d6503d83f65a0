"""Hang analysis: frames, phases, per-rank states, suspects and signals on hand-made and real wordings."""

from __future__ import annotations

import pytest

from denpex_ml.errors import TaxonomyError
from denpex_ml.features.structure import analyse_structure
from denpex_ml.hang.analysis import HANG_FEATURE_NAMES, analyse_hang, signal_affinity
from denpex_ml.hang.frames import parse_frames
from denpex_ml.hang.phase import Phase, phase_of
from denpex_ml.logs import read_logs
from denpex_ml.taxonomy import load_taxonomy

WD = (
    "[rank{r}]:[E1201 10:00:0{r}.000 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn={n}, NumelOut={n}, Timeout(ms)=1800000) ran for 1800042 "
    "milliseconds before timing out."
)


def _report(text: str):  # type: ignore[no-untyped-def]
    b = read_logs(text=text)
    return analyse_hang(b, analyse_structure(b))


def test_traceback_faulthandler_and_py_spy_frames() -> None:
    lines = [
        "Traceback (most recent call last):",
        '  File "/x/site-packages/transformers/trainer.py", line 2915, in _maybe_log_save_evaluate',
        '  File "/x/site-packages/transformers/trainer.py", line 3007, in _save_checkpoint',
        'Thread 0x7F00 (active): "MainThread"',
        "    barrier (torch/distributed/distributed_c10d.py:4622)",
        "    generate (transformers/generation/utils.py:2255)",
        '  File "/x/train.py", line 12 in main',
    ]
    frames = parse_frames(lines)
    kinds = [f.kind for f in frames]
    assert kinds == ["traceback", "traceback", "py-spy", "py-spy", "faulthandler"]
    # py-spy prints innermost first: reversed to read outermost first like Python
    assert [f.function for f in frames[2:4]] == ["generate", "barrier"]
    # so does faulthandler ("most recent call first")
    dump = [
        "Thread 0x00007f8744407b80 (most recent call first):",
        '  File "/env/torch/distributed/distributed_c10d.py", line 5356 in barrier',
        '  File "/job/train.py", line 98 in evaluate',
        '  File "/job/train.py", line 444 in main',
        "Current thread 0x00007f8744407b81 (most recent call first):",
        '  File "/job/data.py", line 7 in tokenise',
        '  File "/job/train.py", line 30 in main',
    ]
    assert [f.function for f in parse_frames(dump)] == ["main", "evaluate", "barrier", "main", "tokenise"]


@pytest.mark.parametrize(
    ("functions", "lines", "phase"),
    [
        (["main", "_inner_training_loop", "evaluate", "generate", "forward", "all_gather"], [], Phase.GENERATION),
        (["main", "_inner_training_loop", "_save_checkpoint", "barrier"], [], Phase.CHECKPOINT),
        (["main", "main_process_first", "barrier"], [], Phase.PREPROCESSING),
        (["main", "training_step", "backward"], [], Phase.TRAINING),
        ([], ["step 10 loss 2.1", "Running tokenizer on dataset:  47%|####"], Phase.PREPROCESSING),
        ([], ["nothing to see"], Phase.UNKNOWN),
    ],
)
def test_phase_prefers_the_most_specific_frame(functions: list[str], lines: list[str], phase: Phase) -> None:
    frames = parse_frames([f'  File "/x/site-packages/lib/m.py", line 1, in {f}' for f in functions])
    assert phase_of(frames, lines) is phase


def test_rank_ahead_is_the_suspect_and_collective_is_reported() -> None:
    text = "\n".join(
        [
            WD.format(r=0, seq=532341, op="_ALLGATHER_BASE", n=513),
            WD.format(r=1, seq=532339, op="BROADCAST", n=5164000),
            WD.format(r=2, seq=532339, op="BROADCAST", n=5164000),
        ]
    )
    rep = _report(text)
    assert rep.is_hang
    assert rep.suspects == (0,)
    assert "signal:seq-spread" in rep.signals
    by_rank = {r.rank: r for r in rep.ranks}
    assert by_rank[0].state == "ahead" and by_rank[1].state == "waiting"
    assert by_rank[1].seq == 532339 and by_rank[1].op == "BROADCAST"
    assert rep.stuck is not None and "BROADCAST #532339" in rep.stuck


def test_never_entered_rank_is_the_one_waited_for() -> None:
    text = "\n".join(
        [
            WD.format(r=0, seq=7, op="ALLREDUCE", n=1),
            "[rank0]:[E1201 10:00:00.1 ProcessGroupNCCL.cpp:1]  Timeout at NCCL work: 7, last enqueued NCCL work: 7, last completed NCCL work: 6.",
            WD.format(r=1, seq=7, op="ALLREDUCE", n=1),
            "[rank1]:[E1201 10:00:00.1 ProcessGroupNCCL.cpp:1]  Timeout at NCCL work: 7, last enqueued NCCL work: 7, last completed NCCL work: 6.",
            "[rank2]:[E1201 10:00:00.1 ProcessGroupNCCL.cpp:1]  Timeout at NCCL work: 6, last enqueued NCCL work: 6, last completed NCCL work: 6.",
        ]
    )
    rep = _report(text)
    assert rep.suspects == (2,)
    assert "signal:never-entered" in rep.signals
    assert "never entered" in rep.reasons[0]


def test_mismatch_report_names_the_odd_rank() -> None:
    text = (
        "[rank1]: RuntimeError: Detected mismatch between collectives on ranks. Rank 1 is running collective: "
        "CollectiveFingerPrint(SequenceNumber=21, OpType=BROADCAST, TensorShape=[1], TensorDtypes=Long), but Rank 0 "
        "is running collective: CollectiveFingerPrint(SequenceNumber=21, OpType=ALLREDUCE, TensorShape=[1])."
    )
    rep = _report(text)
    assert "signal:mismatch-report" in rep.signals
    assert set(rep.suspects) <= {0, 1} and rep.suspects
    assert "signal:mismatch-param-gather" not in rep.signals  # different ops: a true collective mismatch


def test_mismatch_of_one_parameter_all_gather_with_different_sizes_points_to_sharded_divergence() -> None:
    fp = "CollectiveFingerPrint(SequenceNumber=35, OpType=_ALLGATHER_BASE, TensorShape=[{}], TensorDtypes=BFloat16)"
    text = (
        "[rank4]: RuntimeError: Detected mismatch between collectives on ranks. Rank 4 is running collective: "
        + fp.format(9634624)
        + ", but Rank 7 is running collective: "
        + fp.format(2464056)
        + ". Collectives differ in the following aspects: Tensor Tensor shapes: 9634624vs 2464056"
    )
    rep = _report(text)
    assert {"signal:mismatch-report", "signal:mismatch-param-gather"} <= rep.signals
    same = _report(text.replace("2464056", "9634624"))
    assert "signal:mismatch-param-gather" not in same.signals  # same op and size: nothing to tell apart


def test_tokenising_rank_and_store_timeout_give_the_preprocessing_phase() -> None:
    text = "\n".join(
        [
            "[rank0]:Running tokenizer on dataset:  47%|####7     | 3169000/6811963 [30:11<38:27, 1578.58 examples/s]",
            "[rank1]:Traceback (most recent call last):",
            '[rank1]:  File "/x/site-packages/transformers/training_args.py", line 1891, in main_process_first',
            '[rank1]:  File "/x/site-packages/torch/distributed/distributed_c10d.py", line 3328, in barrier',
            "[rank1]:torch.distributed.DistStoreError: wait timeout after 1800000ms, keys: /default_pg//cuda//0",
        ]
    )
    rep = _report(text)
    assert rep.is_hang
    assert rep.phase is Phase.PREPROCESSING
    assert {"signal:store-timeout", "signal:barrier", "phase:preprocessing"} <= rep.signals


@pytest.mark.parametrize(
    "line",
    [
        "trainer/0 [0]:E0927 12:07:22.643702 1012209 ProcessGroupNCCL.cpp:1356] [PG ID 0 PG GUID 0(default_pg) Rank 0]"
        " ProcessGroupNCCL preparing to dump debug info.",
        "[rank3]:[E1201 10:00:03.000 ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg) Rank 3] First PG on this"
        " rank to signal dumping.",
        "[rank5]:[E1201 10:00:03.000 ProcessGroupNCCL.cpp:1665] [PG ID 0 PG GUID 0(default_pg) Rank 5] Observed flight"
        " recorder dump signal from another rank via TCPStore.",
    ],
)
def test_a_flight_recorder_dump_alone_marks_a_hang(line: str) -> None:
    """PyTorch dumps the Flight Recorder when a collective timed out (this rank's watchdog, or another's
    signal), so an excerpt that shows only the dump lines (batch co's pytorch#137523) is still a hang."""
    rep = _report(line)
    assert rep.is_hang


def test_no_hang_in_a_plain_crash() -> None:
    rep = _report("Traceback (most recent call last):\n  File \"t.py\", line 1, in <module>\nKeyError: 'x'")
    assert not rep.is_hang and rep.ranks == ()
    assert rep.vector.shape == (len(HANG_FEATURE_NAMES),)


def test_taxonomy_hang_signals_are_known_names() -> None:
    tax = load_taxonomy()
    A = signal_affinity(tax.ids, {e.id: e.hang_signals for e in tax})
    assert A[tax.ids.index("zero3-divergent-forward-hang"), HANG_FEATURE_NAMES.index("phase:generation")] == 1.0
    with pytest.raises(TaxonomyError, match="phase:nap"):
        signal_affinity(["x"], {"x": ["phase:nap"]})


def test_rank_whose_nccl_id_the_others_wait_for_is_the_suspect() -> None:
    text = (
        "[rank3]: RuntimeError: [3] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d "
        "key-value store by key '0', but store->get('0') got error: Socket Timeout\n"
        "[rank2]: RuntimeError: [2] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d "
        "key-value store by key '0', but store->get('0') got error: Socket Timeout\n"
    )
    r = _report(text)
    assert r.suspects == (0,)
    assert "NCCL id" in r.reasons[0]


def test_horovod_stall_names_the_rank_not_ready() -> None:
    text = (
        "[2026-01-01 10:00:00.000000: W horovod/common/stall_inspector.cc:107] One or more tensors were submitted "
        "to be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of ranks for more "
        "than 60 seconds.\n"
        "Missing ranks:\nallreduce.grad_0 [ready ranks: 1, 3, 2]\n"
    )
    r = _report(text)
    assert r.suspects == (0,)
    assert r.is_hang  # a stall is a hang, though no watchdog fired


STALL = (
    "{p}[2021-02-10 17:39:53.403710: W horovod/common/stall_inspector.cc:105] One or more tensors were submitted"
    " to be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of ranks for more"
    " than 60 seconds.\n{p}Missing ranks:\n"
)


@pytest.mark.parametrize("prefix", ["", "[1,0]<stderr>:"])
def test_a_horovod_stall_report_of_ranks_waiting_for_different_tensors_is_a_mismatch(prefix: str) -> None:
    lists = ["broadcast.noname.3765, broadcast.noname.3873", "broadcast.noname.3873", "broadcast.noname.3765"]
    differ = STALL.format(p=prefix) + "".join(f"{prefix}{r}: [{t}]\n" for r, t in enumerate(lists))
    assert "signal:same-seq-diff-op" in _report(differ).signals
    same = STALL.format(p=prefix) + "".join(f"{prefix}{r}: [allreduce.noname.222700]\n" for r in range(4))
    r = _report(same)  # a subset of ranks never submitted one tensor: not a mismatch
    assert r.is_hang and "signal:same-seq-diff-op" not in r.signals


def test_older_horovod_stall_lines_with_disjoint_ready_ranks_are_a_mismatch() -> None:
    head = (
        "WARNING: One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks"
        " and are waiting for remainder of ranks for more than 60 seconds."
    )
    # after a restore, the first server's ranks sit in the gradient all-reduces, the second's in the broadcasts
    differ = (
        f"{head} HorovodBroadcast_conv2d_weights_0 [ready ranks: 5, 6, 7, 4],"
        " HorovodAllreduce_gradients_dense_0 [ready ranks: 0, 2, 1, 3]\n"
    )
    r = _report(differ)
    assert "signal:same-seq-diff-op" in r.signals
    # the summary names what each group of ranks is ready for
    assert r.stuck == (
        "HorovodBroadcast_conv2d_weights_0 (ranks 4-7 ready); HorovodAllreduce_gradients_dense_0 (ranks 0-3 ready)"
    )
    assert any("HorovodBroadcast_conv2d_weights_0 (ranks 4-7 ready)" in line for line in r.summary_lines())
    # every tensor waits for the same missing rank: a subset never arrived
    same = f"{head} HorovodAllreduce_grad_0 [ready ranks: 1, 2, 3], HorovodAllreduce_grad_1 [ready ranks: 3, 1, 2]\n"
    r = _report(same)
    assert r.is_hang and "signal:same-seq-diff-op" not in r.signals
    assert r.stuck == "HorovodAllreduce_grad_0 and 1 more (ranks 1-3 ready)"


def test_monitored_barrier_names_the_ranks_that_never_arrived() -> None:
    text = "[rank0]: RuntimeError: [Rank 0]: Ranks 1, 3 failed to pass monitoredBarrier in 30000 ms\n"
    r = _report(text)
    assert r.is_hang and r.suspects == (1, 3)
    assert {"signal:barrier", "signal:desync-report"} <= set(r.signals)


@pytest.mark.parametrize(
    "line",
    [
        "[rank3]: RuntimeError: DDP expects same model across all ranks, but Rank 3 has 2247 params, while rank 0 has "
        "inconsistent 0 params.",
        "[rank7]: RuntimeError: Detected a disagreement on list length between rank0 and rank7: [12] vs [13]",
        "E tensorflow/core/common_runtime/ring_alg.cc:276] Aborting RingGather with Invalid argument: Collective ops is "
        "aborted by: Shape mismatch in the collective instance 100.",
    ],
)
def test_a_failed_cross_rank_consistency_check_is_a_divergence_hang(line: str) -> None:
    r = _report(line + "\n")
    assert r.is_hang and "signal:rank-divergence" in r.signals


def test_deepep_receiver_timeouts_are_an_all_to_all_hang() -> None:
    text = (
        "DeepEP dispatch NVL receiver timeout, channel: 0, RDMA: 1, nvl: 6, src RDMA: 0, src nvl: 7, start: 0, end: 0\n"
    )
    r = _report(text)
    assert r.is_hang and {"signal:alltoall", "signal:moe"} <= set(r.signals)


def test_single_rank_that_never_entered_the_collective_from_an_unprefixed_line() -> None:
    text = (
        "[E1201 10:00:00.000 ProcessGroupNCCL.cpp:1600] [PG ID 0 PG GUID 0(default_pg) Rank 1] Observed flight "
        "recorder dump signal from another rank via TCPStore.\n"
        "[Rank 1] Last enqueued NCCL work: 2193, last completed 2193\n"
    )
    assert _report(text).suspects == (1,)


def test_a_large_parameter_gather_against_another_op_at_one_seq_is_a_sharded_divergence() -> None:
    text = "\n".join(
        (
            WD.format(r=0, seq=357826, op="_ALLGATHER_BASE", n=50823168),
            WD.format(r=1, seq=357826, op="ALLREDUCE", n=1),
        )
    )
    rep = _report(text)
    assert {"signal:same-seq-diff-op", "signal:mismatch-param-gather"} <= rep.signals
    small = _report(
        "\n".join((WD.format(r=0, seq=9, op="_ALLGATHER_BASE", n=8), WD.format(r=1, seq=9, op="ALLREDUCE", n=1)))
    )
    assert "signal:same-seq-diff-op" in small.signals
    assert "signal:mismatch-param-gather" not in small.signals  # a gather of a few elements: a metric, not a shard


PY_SPY = """Thread 7422 (active): "MainThread"
    all_gather_object (torch/distributed/distributed_c10d.py:3036)
    wrapper (torch/distributed/c10d_logger.py:81)
    __init__ (deep_ep/buffer.py:66)
    test_loop (test_internode.py:229)
"""
FAULTHANDLER = """Thread 0x000014844b65d740 (most recent call first):
  File "/env/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 3938 in barrier
  File "/env/lib/python3.11/site-packages/torch/distributed/c10d_logger.py", line 79 in wrapper
  File "/job/train.py", line 11 in main
"""
INTERRUPTED = """Traceback (most recent call last):
  File "/job/train.py", line 40, in <module>
    dist.barrier()
  File "/env/lib/python3.10/site-packages/torch/distributed/distributed_c10d.py", line 3439, in barrier
    work.wait()
KeyboardInterrupt
"""


def test_a_stack_dump_of_a_rank_inside_a_collective_is_a_hang() -> None:
    assert _report(PY_SPY).is_hang
    assert _report(FAULTHANDLER).is_hang  # e.g. faulthandler.dump_traceback_later on a stuck job
    assert _report(INTERRUPTED).is_hang  # the user gave up waiting: the traceback shows where
    # the same stacks printed by a crash, or of an exception raised there, are no hang
    assert not _report("Fatal Python error: Segmentation fault\n\n" + FAULTHANDLER).is_hang
    assert not _report(INTERRUPTED.replace("KeyboardInterrupt", "RuntimeError: bad argument")).is_hang
    # a live dump outside any collective: someone dumped the stacks of a stuck (busy) process,
    # and nothing raised - still a hang; beside an exception it is the crash's, no hang
    busy = PY_SPY.replace("all_gather_object", "forward")
    assert _report(busy).is_hang
    assert not _report(busy + "RuntimeError: CUDA error: an illegal memory access was encountered\n").is_hang


def test_monitored_barrier_blaming_the_rank_it_waited_for() -> None:
    r = _report(
        "Rank 1 successfully reached monitoredBarrier, but received errors while waiting for send/recv from"
        " rank 0. Please check rank 0 logs for faulty rank.\n"
    )
    assert r.is_hang and r.suspects == (0,) and "signal:barrier" in r.signals


def test_horovod_shutting_down_after_a_rank_left_is_a_hang() -> None:
    line = (
        "[1,3]<stderr>:tensorflow.python.framework.errors_impl.UnknownError: Horovod has been shut down. This was"
        " caused by an exception on one of the ranks or an attempt to allreduce, allgather or broadcast a tensor"
        " after one of the ranks finished execution.\n"
    )
    assert _report(line).is_hang


def test_an_inference_engine_reporting_its_own_stall_is_a_hang() -> None:
    line = (
        "(EngineCore_DP1 pid=1455) INFO 05-28 14:44:28 [shm_broadcast.py:681] No available shared memory broadcast"
        " block found in 60 seconds. This typically happens when some processes are hanging or doing some"
        " time-consuming work (e.g. compilation, weight/kv cache quantization).\n"
    )
    assert _report(line).is_hang
    assert not _report("INFO [shm_broadcast.py:289] vLLM message queue communication handle: Handle(...)\n").is_hang
    sglang = "[2026-05-26 13:36:14 TP5] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)\n"
    assert _report(sglang).is_hang
    newer = "Scheduler watchdog timeout (watchdog_timeout=300, soft=False)\n"  # later SGLang drops "self."
    assert _report(newer).is_hang
    assert not _report("[2026-05-26 13:30:02] server_args=ServerArgs(watchdog_timeout=300, tp_size=8)\n").is_hang


def test_an_engine_giving_up_on_its_workers_is_a_hang() -> None:
    v0 = "ERROR 12-09 05:28:10 async_llm_engine.py:886] Engine iteration timed out. This should never happen!\n"
    assert _report(v0).is_hang
    v1 = "(EngineCore_DP0 pid=88) ERROR 03-02 10:11:12 [core.py:710] TimeoutError: RPC call to sample_tokens timed out.\n"
    assert _report(v1).is_hang
    loading = (
        "[2026-02-11 08:01:09 TP0] TP rank 0 could finish the model loading, but there are other ranks that"
        " didn't finish loading. It is likely due to unexpected failures (e.g., OOM) or a slow node.\n"
    )
    assert _report(loading).is_hang
    idle = "INFO 12-09 05:27:49 metrics.py:449] Avg prompt throughput: 0.0 tokens/s, Running: 0 reqs\n"
    assert not _report(idle).is_hang
    assert not _report("[2026-02-11 07:58:01 TP0] Load weight end. type=Qwen3ForCausalLM, avail mem=41.2 GB\n").is_hang


def test_other_stacks_cross_rank_checks_are_divergence_reports() -> None:
    """JAX's, TensorFlow's, Accelerate's and Horovod's own checks that the ranks called different
    collectives are reports of divergence (a hang's cause the ranks state), not a crash's error."""
    reports = [
        "AssertionError: sync_global_devices name mismatch ('starting_save_checkpoint') Expected: 1127039785; got: -12\n",
        "Device /job:localhost/replica:0/task:0/device:GPU:1 is joining a group with size 2, but that group has size 3"
        " (group_key=1)\n",
        "[rank0]: accelerate.utils.operations.DistributedOperationException: Cannot apply desired operation due to shape"
        " mismatches. All shapes across devices must be valid.\n",
        "[1,2]<stderr>:tensorflow.python.framework.errors_impl.FailedPreconditionError: Mismatched ALLREDUCE CPU/GPU"
        " device selection: One rank specified device GPU, but another rank specified device CPU.\n",
    ]
    for text in reports:
        r = _report(text)
        assert r.is_hang and "signal:rank-divergence" in r.signals, text
    assert not _report("ValueError: Mismatched keys in the state dict\n").is_hang
    assert not _report("RuntimeError: shape mismatch: value tensor of shape [8] cannot be broadcast\n").is_hang


def test_a_collectives_own_timeout_in_older_words_is_a_hang() -> None:
    blocking = "Timeout: A call to 'allGather' has taken over 300.000000 seconds. Terminating the distributed job.\n"
    assert _report(blocking).is_hang
    nccl = (
        "[0] init.cc:1256 NCCL WARN Your program may be hanging, this may be caused by a collective mismatch around"
        " rank 1. Please check your collective calls at and around this rank.\n"
    )
    assert _report(nccl).is_hang
    assert not _report("Step 1200 has taken over 2.5 seconds longer than the median step\n").is_hang


def test_deepeps_barrier_timeout_is_a_hang() -> None:
    assert _report("DeepEP Gin barrier timeout, tag: 4, scaleout: 1, scaleup: 0/8, signal: 14, target: 15\n").is_hang
    assert not _report("DeepEP Gin barrier done, tag: 4, scaleout: 1, scaleup: 0/8\n").is_hang


def _dump(rank: int, frames: list[tuple[str, str]]) -> str:
    """A faulthandler dump of one rank, innermost frame first, behind torchrun's ``[rankN]:``."""
    lines = [f"[rank{rank}]:Thread 0x00007f87444{rank:05d} (most recent call first):"]
    lines += [f'[rank{rank}]:  File "{file}", line 10 in {fn}' for fn, file in frames]
    return "\n".join(lines) + "\n"


C10D = "/env/site-packages/torch/distributed/distributed_c10d.py"


def test_stacks_in_different_collectives_and_a_rank_busy_outside_any() -> None:
    in_barrier = _dump(0, [("barrier", C10D), ("evaluate", "/job/train.py")])
    in_all_reduce = [_dump(r, [("all_reduce", C10D), ("train_step", "/job/train.py")]) for r in (1, 2, 3)]
    busy = _dump(0, [("save", "/job/checkpoint.py"), ("train", "/job/train.py")])
    diff = _report(in_barrier + "".join(in_all_reduce))
    assert diff.is_hang and "signal:stacks-diff-collective" in diff.signals
    assert "signal:stack-busy-rank" not in diff.signals
    same = _report(_dump(0, [("all_reduce", C10D)]) + "".join(in_all_reduce))
    assert "signal:stacks-diff-collective" not in same.signals
    host = _report(busy + "".join(in_all_reduce))
    assert "signal:stack-busy-rank" in host.signals and "signal:stacks-diff-collective" not in host.signals


def test_the_rank_whose_stack_is_not_where_the_others_wait_is_the_suspect() -> None:
    others = "".join(_dump(r, [("all_reduce", C10D), ("train_step", "/job/train.py")]) for r in (0, 1, 3))
    odd = _dump(2, [("all_gather", C10D), ("log_metrics", "/job/train.py")])
    assert _report(others + odd).suspects == (2,)
    busy = _dump(2, [("save", "/job/checkpoint.py")])
    assert _report(others + busy).suspects == (2,)


def test_a_size_mismatch_inside_fsdps_parameter_gather_is_a_sharded_divergence() -> None:
    error = (
        "[rank1]: RuntimeError: [enforce fail at /pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:456]"
        " op.preamble.length <= op.nbytes. 108 vs 72. Received data size doesn't match expected size.\n"
    )
    frames = (
        '[rank1]:   File "/env/site-packages/torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py", line 407,'
        " in unshard\n"
        '[rank1]:   File "/env/site-packages/torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py", line 364,'
        " in foreach_all_gather\n"
    )
    assert (
        "signal:mismatch-param-gather"
        in _report("[rank1]: Traceback (most recent call last):\n" + frames + error).signals
    )
    user = frames.replace("fsdp/_fully_shard/_fsdp_param_group.py", "train.py").replace(
        "fsdp/_fully_shard/_fsdp_collectives.py", "metrics.py"
    )
    assert (
        "signal:mismatch-param-gather"
        not in _report("[rank1]: Traceback (most recent call last):\n" + user + error).signals
    )


def _timed_out(rank: int, call: str, caller: str) -> str:
    """A rank's traceback raised from inside a collective that timed out (gloo), outermost first."""
    return (
        f"[rank{rank}]: Traceback (most recent call last):\n"
        f'[rank{rank}]:   File "/job/train.py", line 40, in {caller}\n'
        f'[rank{rank}]:   File "/env/site-packages/torch/distributed/c10d_logger.py", line 83, in wrapper\n'
        f'[rank{rank}]:   File "{C10D}", line 3252, in {call}\n'
        f"[rank{rank}]: RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out"
        " waiting 10000ms for recv operation to complete\n"
    )


def test_timed_out_tracebacks_in_different_calls_of_one_function_are_a_mismatch() -> None:
    others = "".join(_timed_out(r, "all_reduce", "evaluate") for r in (0, 1, 3))
    same_place = _report(others + _timed_out(2, "all_gather", "evaluate"))
    assert {"signal:stacks-diff-collective", "signal:same-seq-diff-op"} <= set(same_place.signals)
    assert same_place.suspects == (2,)
    # another function of the program: the odd rank took another path (e.g. left the loop)
    elsewhere = _report(others + _timed_out(2, "barrier", "save_checkpoint"))
    assert "signal:stacks-diff-collective" in elsewhere.signals
    assert "signal:same-seq-diff-op" not in elsewhere.signals
    assert elsewhere.suspects == (2,)
    # all in the same call: no disagreement to report
    alike = _report(others + _timed_out(2, "all_reduce", "evaluate"))
    assert "signal:stacks-diff-collective" not in alike.signals


def test_a_size_mismatch_inside_a_send_or_recv_is_a_pipeline_shape_mismatch() -> None:
    error = (
        "[rank1]: RuntimeError: [enforce fail at /pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:456]"
        " op.preamble.length <= op.nbytes. 8192 vs 6144. Received data size doesn't match expected size.\n"
    )
    recv = f'[rank1]:   File "/job/stage.py", line 21, in forward_step\n[rank1]:   File "{C10D}", line 2799, in recv\n'
    report = _report("[rank1]: Traceback (most recent call last):\n" + recv + error)
    assert "signal:mismatch-p2p" in report.signals
    all_reduce = recv.replace("in recv", "in all_reduce")
    assert (
        "signal:mismatch-p2p"
        not in _report("[rank1]: Traceback (most recent call last):\n" + all_reduce + error).signals
    )


def test_the_rank_whose_loop_ended_while_the_others_wait_in_a_step_is_the_suspect() -> None:
    waiting = "".join(_timed_out(r, "all_reduce", "train_step") for r in (0, 1, 2))
    # a banner naming the backend's timeout is configuration, not a timeout
    left = "[rank3]: rank 3/4: process group ready (backend gloo, timeout 10s)\n[rank3]: rank 3: epoch done\n"
    report = _report(waiting + left)
    assert report.suspects == (3,)
    assert "loop ended" in report.reasons[0]
    assert "signal:gloo-timeout" in report.signals  # from the waiting ranks only
    # half of the ranks ending is no subset that this rule can single out
    two_waiting = "".join(_timed_out(r, "all_reduce", "train_step") for r in (0, 1))
    two_ended = "".join(f"[rank{r}]: Training completed\n" for r in (2, 3))
    assert not any("loop ended" in r for r in _report(two_waiting + two_ended).reasons)


def _ranked(lines_by_rank: dict[int, list[str]]) -> str:
    return "".join(f"[rank{r}]: {t}\n" for r, ts in lines_by_rank.items() for t in ts)


def test_odd_values_name_the_rank_whose_printed_setup_differs_from_all_the_others() -> None:
    from denpex_ml.hang.scan import odd_values
    from denpex_ml.logs import read_logs

    text = _ranked(
        {
            r: [
                f"rank {r}: building model with hidden={24 if r == 1 else 16}",
                f"pid {4000 + r} loss {0.5 + r / 10:.2f}",
            ]
            for r in range(4)
        }
    )
    b = read_logs(text=text)
    odd = odd_values(b, (0, 1, 2, 3))
    assert list(odd) == [1] and "hidden=24" in odd[1] and "16" in odd[1]
    # values that differ on every rank (pids, losses, the rank itself) single out nobody
    assert odd_values(read_logs(text=_ranked({r: [f"pid {4000 + r} step 7"] for r in range(4)})), (0, 1, 2, 3)) == {}
    # three ranks are too few to call one of them odd; two against two is no majority
    assert (
        odd_values(read_logs(text=_ranked({r: [f"hidden={24 if r == 1 else 16}"] for r in range(3)})), (0, 1, 2)) == {}
    )
    two_two = read_logs(text=_ranked({r: [f"microbatches={2 if r % 2 else 3}"] for r in range(4)}))
    assert odd_values(two_two, (0, 1, 2, 3)) == {}


def test_odd_values_ignore_frames_and_collective_reports_other_rules_read() -> None:
    from denpex_ml.hang.scan import odd_values
    from denpex_ml.logs import read_logs

    text = _ranked({r: [f'  File "/w/train.py", line {12 if r == 2 else 10}, in step'] for r in range(4)})
    assert odd_values(read_logs(text=text), (0, 1, 2, 3)) == {}


@pytest.mark.parametrize(
    "line",
    [
        "[Error]: In the specified timeout waiting event, all tasks in the specified stream are not completed.",
        "EE9999: rtStreamSynchronizeWithTimeout execution failed, reason=task timeout",
        "E tensorflow/core/common_runtime/base_collective_executor.cc:249] BaseCollectiveExecutor::StartAbort INTERNAL: "
        "Collective instance 223 expected 8 elements but got 6",
        "HYBRID-EP ALLGATHER TIMEOUT:SM 13 [0]:expecting 5792 got 5791",
        "MPI_Waitany, MPI error 782: Message truncated, error stack:",
        "E tensorflow/core/common_runtime/ring_alg.cc:279] Aborting RingReduce with Out of range: [_Derived_]End of sequence",
        "ERROR   ENC:validate_neff_cc_ops  [nec_dev 0] mismatching number of cc ops, expected 3 received 6.",
    ],
)
def test_other_stacks_words_for_a_timed_out_or_disagreeing_collective_are_a_hang(line: str) -> None:
    assert _report(line + "\n").is_hang
    # the same stacks' ordinary errors are not
    assert not _report("[Error]: The model file could not be read.\n").is_hang


def test_a_dataset_ending_an_epoch_is_no_hang_unless_it_aborts_a_ring_collective() -> None:
    # TensorFlow 2.0/2.1 logs this at the end of every finite Keras epoch (three healthy real logs)
    end = (
        "W tensorflow/core/common_runtime/base_collective_executor.cc:216] "
        "BaseCollectiveExecutor::StartAbort Out of range: End of sequence\n"
    )
    assert not _report(end * 3).is_hang
    # one worker ran out of data while the others were in a ring all-reduce: uneven inputs, a hang
    ring = "E tensorflow/core/common_runtime/ring_alg.cc:279] Aborting RingReduce with Out of range: End of sequence\n"
    assert _report(ring + end).is_hang


def test_odd_values_ignore_clock_times_and_read_logger_lines() -> None:
    from denpex_ml.hang.scan import odd_values
    from denpex_ml.logs import read_logs

    # one rank's log line a second later is no divergence; a logger's file:line prefix is no frame
    lines = {
        r: [
            f"2024-05-01 11:42:0{8 if r == 3 else 7},013 - INFO - train.py:88 - world_size=4 rank={r} "
            f"hidden={24 if r == 2 else 16}"
        ]
        for r in range(4)
    }
    odd = odd_values(read_logs(text=_ranked(lines)), (0, 1, 2, 3))
    assert list(odd) == [2] and "hidden=24" in odd[2]


def test_odd_values_are_not_read_beyond_sixty_four_ranks() -> None:
    from denpex_ml.hang.scan import odd_values
    from denpex_ml.logs import read_logs

    lines = {r: [f"rank {r}: hidden={24 if r == 5 else 16}"] for r in range(65)}
    b = read_logs(text=_ranked(lines))
    assert odd_values(b, tuple(range(65))) == {}
    assert list(odd_values(b, tuple(range(64)))) == [5]


GDB_LIVE = """Thread 2 (Thread 0x7f8791 (LWP 3913159) "python"):
#0  0x00007f8791658967 in MPIDI_CH3I_Progress () from /usr/lib64/mpich/lib/libmpi.so.12
#1  0x00007f87916ff592 in MPIR_Wait_impl.isra.0 () from /usr/lib64/mpich/lib/libmpi.so.12
#2  0x00007f87915e516a in MPIC_Recv () from /usr/lib64/mpich/lib/libmpi.so.12
#3  0x00007f8791454a5b in PMPI_Bcast_c () from /usr/lib64/mpich/lib/libmpi.so.12
#4  0x00007f8791b8978b in __pyx_f_6mpi4py_3MPI_PyMPI_bcast_p2p (obj=0x7f88140370) at src/mpi4py/MPI.c:12345
"""


def test_gdbs_native_stacks_of_a_waiting_process_are_a_hang_in_its_collective() -> None:
    from denpex_ml.hang.frames import collective_call, live_stacks, parse_frames

    frames = parse_frames(GDB_LIVE.splitlines())
    assert [f.kind for f in frames] == ["native"] * 5 and frames[0].function.startswith("__pyx_f_6mpi4py")
    assert collective_call(live_stacks(frames, interrupted=False, fatal=False)) == "PMPI_Bcast_c"
    assert _report(GDB_LIVE).is_hang


def test_gdbs_stacks_of_a_crash_are_no_hang() -> None:
    # a signal handler in the stack, or a top frame that is no wait (a core dump's crash site)
    assert not _report(
        GDB_LIVE.replace(
            "#1  0x00007f87916ff592 in MPIR_Wait_impl", "#1  <signal handler called>\n#9  0x1 in MPIR_Wait_impl"
        )
    ).is_hang
    crash_site = GDB_LIVE.replace(
        "#0  0x00007f8791658967 in MPIDI_CH3I_Progress ()", "#0  scheduleCollTasksToPlan (comm=0xe4b9f840)"
    )
    assert not _report(crash_site).is_hang


def test_gloos_pair_timeout_and_nccls_truncated_message() -> None:
    """Gloo's wording of a pair that timed out, and NCCL's socket transport receiving another size than
    posted (batch ci: a barrier outlasted by one rank's load-time work; pipeline stages that disagree)."""
    gloo = _report("RuntimeError: Application timeout caused pair closure\n")
    assert gloo.is_hang and "signal:gloo-timeout" in gloo.signals
    truncated = (
        "node-a:5838:6020 [0] transport/net_socket.cc:561 NCCL WARN NET/Socket : peer 10.0.0.1<41138> message truncated"
        " : receiving 8 bytes instead of 4. If you believe your socket network is in a healthy state, there may be a"
        " mismatch in collective sizes or environment settings (e.g. NCCL_PROTO, NCCL_ALGO) between ranks\n"
    )
    r = _report(truncated)
    assert r.is_hang and "signal:same-seq-diff-op" in r.signals
    assert not _report("RuntimeError: Connection closed by peer [10.0.0.1]:4242\n").is_hang
