"""Every launcher format splits to the right ranks (one fixture file per format)."""

from __future__ import annotations

import pytest

from denpex_ml.logs import GLOBAL_STREAM, parse_prefix, rank_from_path, read_logs


def texts(bundle, key):  # type: ignore[no-untyped-def]
    return [ln.text for ln in bundle.streams[key].lines]


def test_torchrun_rank_prefix(log_fixture) -> None:  # type: ignore[no-untyped-def]
    b = read_logs(log_fixture("torchrun.log"))
    assert b.ranks == [0, 1]
    assert any("CUDA out of memory" in t for t in texts(b, 1))
    assert any("Watchdog caught" in t for t in texts(b, 0))
    assert b.formats["torchrun"] == 6
    assert all(not t.startswith("[rank") for t in texts(b, 1))


def test_torchrun_default_prefix(log_fixture) -> None:  # type: ignore[no-untyped-def]
    b = read_logs(log_fixture("default_prefix.log"))
    assert b.ranks == [0, 2, 3]
    assert texts(b, 2) == ["RuntimeError: expected scalar type Float but found Half"]


def test_srun_label(log_fixture) -> None:  # type: ignore[no-untyped-def]
    b = read_logs(log_fixture("srun.log"))
    assert b.ranks == [0, 1, 2]
    assert "KeyError: 'input_ids'" in texts(b, 2)
    glob = texts(b, GLOBAL_STREAM)
    assert glob == ["srun: error: node-1: task 2: Exited with exit code 1"]


def test_openmpi_tag_output(log_fixture) -> None:  # type: ignore[no-untyped-def]
    b = read_logs(log_fixture("mpirun.log"))
    assert b.ranks == [0, 1, 3]
    assert texts(b, 3) == ["Segmentation fault (core dumped)"]


def test_horovodrun_rank_tag_without_a_job_id() -> None:
    # horovodrun (gloo controller) tags lines "[rank]<stream>:", Open MPI "[jobid,rank]<stream>:"
    text = (
        "[2]<stdout>:hi! 2\n"
        "[2]<stderr>:Traceback (most recent call last):\n"
        "[2]<stderr>:ValueError: bad shape\n"
        "[1,0]<stdout>:epoch 1 done\n"
    )
    b = read_logs(text=text)
    assert b.ranks == [0, 2] and b.formats["mpirun"] == 4
    assert texts(b, 2)[-1] == "ValueError: bad shape"
    assert parse_prefix("[12]<stderr>: x").rank == 12  # type: ignore[union-attr]


def test_pdsh_host_prefix_with_inner_rank(log_fixture) -> None:  # type: ignore[no-untyped-def]
    b = read_logs(log_fixture("pdsh.log"))
    assert 1 in b.ranks and 5 in b.ranks  # [rank1] prefix and [Rank 5] inside the message
    assert any("illegal memory access" in t for t in texts(b, 1))
    everything = b.text()
    assert "worker-3" not in everything and "worker-7" not in everything and "10.20.30.41" not in everything
    assert {"node-1", "ip-1"} & set(map(str, b.streams))


def test_nccl_debug_lines_map_to_global_ranks(log_fixture) -> None:  # type: ignore[no-untyped-def]
    b = read_logs(log_fixture("nccl_debug.log"))
    assert b.ranks == [0, 1]
    assert any("Got completion from peer" in t for t in texts(b, 1))
    # the Bootstrap line was printed before the pid's rank was known and is merged in later
    assert any("Bootstrap" in t for t in texts(b, 0))
    assert "gpu-a17" not in b.text() and "10.20.1.5" not in b.text()


def test_nccl_debug_single_host_uses_local_ranks() -> None:
    b = read_logs(text="h1:10:10 [3] NCCL INFO Channel 00/02\nh1:11:11 [2] NCCL WARN Call to ibv_modify_qp failed\n")
    assert b.ranks == [2, 3]


def test_nccl_debug_two_hosts_unmapped_keeps_pid_streams() -> None:
    b = read_logs(text="h1:10:10 [0] NCCL INFO Channel 00/02\nh2:11:11 [0] NCCL WARN Call to ibv_modify_qp failed\n")
    assert b.ranks == []
    assert sorted(map(str, b.streams)) == ["node-1:pid10", "node-2:pid11"]


def test_nccl_debug_unmapped_pid_takes_its_hosts_rank_offset() -> None:
    """Two processes of a host state global ranks 8 and 9 on devices 0 and 1: the third, whose own
    lines never state its rank, is on device 3, so rank 11 (a node's ranks are contiguous)."""
    init = (
        "h1:{pid}:{pid} [{dev}] NCCL INFO comm 0x{pid} rank {rank} nranks 16 cudaDev {dev} busId 1000 - Init COMPLETE\n"
    )
    fault = "h1:103:103 [3] NCCL WARN NET/IB : Got completion from peer 10.0.0.9<1> with error 12, opcode 0, len 0\n"
    b = read_logs(text=init.format(pid=100, dev=0, rank=8) + init.format(pid=101, dev=1, rank=9) + fault)
    assert b.ranks == [8, 9, 11]
    assert any("Got completion from peer" in t for t in texts(b, 11))
    # one known process is no basis, and offsets that disagree are none either
    one = read_logs(text=init.format(pid=100, dev=0, rank=8) + fault)
    assert one.ranks == [8]
    odd = read_logs(text=init.format(pid=100, dev=0, rank=8) + init.format(pid=101, dev=1, rank=3) + fault)
    assert odd.ranks == [3, 8]
    # the rank the offset gives is already another process's: the stream stays the process's own
    taken = read_logs(
        text=init.format(pid=100, dev=0, rank=8)
        + init.format(pid=101, dev=1, rank=9)
        + init.format(pid=102, dev=2, rank=11)
        + fault
    )
    assert taken.ranks == [8, 9, 11] and any(isinstance(k, str) and k.endswith("pid103") for k in taken.streams)


def test_ray_worker_prefix(log_fixture) -> None:  # type: ignore[no-untyped-def]
    b = read_logs(log_fixture("ray.log"))
    assert 2 in b.ranks
    assert any("Expected input batch_size" in t for t in texts(b, 2))
    assert any(isinstance(k, str) and k.endswith(":pid81299") for k in b.streams)
    assert b.formats["ray"] == 3


def test_vllm_tensor_parallel_workers_name_their_rank() -> None:
    b = read_logs(
        text="(Worker_TP0 pid=3682) INFO 09-10 09:37:40 Loading weights took 12.4 seconds\n"
        "(Worker_TP1 pid=3683) Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:164 'invalid argument'\n"
        "(Worker_PP1_TP0 pid=3684) INFO 09-10 09:37:40 pipeline stage 1 ready\n"
        "(EngineCore_DP0 pid=3677) ERROR 09-10 09:37:41 Worker proc VllmWorker-1 died unexpectedly\n"
    )
    assert b.ranks == [0, 1]
    assert any("custom_all_reduce" in t for t in texts(b, 1))
    # with pipeline stages the global rank is not in the name: a process stream, as for any Ray actor
    assert {k for k in b.streams if isinstance(k, str)} == {"pid3684", "pid3677"}


def test_sglang_tensor_parallel_tags_name_the_rank() -> None:
    text = (
        "[2025-09-15 14:16:24 TP0] Load weight end. type=Qwen3ForCausalLM, avail mem=61.2 GB\n"
        "[2025-09-15 14:16:24 TP2] TpModelWorkerClient hit an exception: Traceback (most recent call last):\n"
        "[2025-09-15 14:16:25 TP1 EP1] Capture cuda graph end.\n"
        "[2025-09-15 14:16:25 DP1 TP3] Scheduler hit an exception\n"
        "HTTP request to TPU host failed\n"
    )
    b = read_logs(text=text)
    assert b.ranks == [0, 1, 2]
    assert any("TpModelWorkerClient" in t for t in texts(b, 2))
    # with a data-parallel index beside it the tag is not the global rank: the global stream keeps it
    assert any("Scheduler hit" in t for t in texts(b, "global"))


def test_ucx_prefix(log_fixture) -> None:  # type: ignore[no-untyped-def]
    b = read_logs(log_fixture("ucx.log"))
    key = next(k for k in b.streams if isinstance(k, str) and k.endswith(":pid51234"))
    assert texts(b, key)[0].startswith("Caught signal 11")
    assert "gpu-node-9" not in b.text()


def test_log_aggregator_jsonl(log_fixture) -> None:  # type: ignore[no-untyped-def]
    b = read_logs(log_fixture("aggregator.jsonl"))
    assert b.ranks == [0, 1, 3]
    assert texts(b, 3)[0].startswith("torch.distributed.DistBackendError")


def test_elastic_root_cause_summary(log_fixture) -> None:  # type: ignore[no-untyped-def]
    b = read_logs(log_fixture("elastic_summary.log"))
    assert b.launcher is not None and b.launcher.root_cause is not None
    rc = b.launcher.root_cause
    assert (rc.rank, rc.local_rank, rc.exitcode, rc.signal) == (5, 1, -9, "SIGKILL")
    assert [f.rank for f in b.launcher.failures] == [6]
    assert rc.host is not None and rc.host.startswith("node-")
    assert "gpu-node-17" not in b.text()


def test_mixed_formats_in_one_file(log_fixture) -> None:  # type: ignore[no-untyped-def]
    b = read_logs(log_fixture("mixed.log"))
    assert b.ranks == [0, 1, 2, 3]
    assert texts(b, GLOBAL_STREAM) == ["Some launcher line without a rank"]
    assert set(b.formats) == {"torchrun", "srun", "mpirun", "pdsh"}


@pytest.mark.parametrize(
    ("path", "rank"),
    [
        ("rank3.log", 3),
        ("logs/rank_3.txt", 3),
        ("rank-12.out", 12),
        ("worker-3.log", 3),
        ("llm-train-worker-7", 7),
        ("run/attempt_0/3/stderr.log", 3),
        ("node-a/worker-2.log", 2),
        ("stderr-5", 5),
        ("train.log", None),
        ("job-12345.log", None),
    ],
)
def test_rank_from_file_name(path: str, rank: int | None) -> None:
    assert rank_from_path(path) == rank


@pytest.mark.parametrize(
    ("line", "rank", "host"),
    [
        ("[rank3]:[E419 10:42:28.858931807 ProcessGroupNCCL.cpp:616] [Rank 3] x", 3, None),
        ("[default11]:hello", 11, None),
        ("node-a: [rank4]: boom", 4, "node-a"),
        ("[1,7]<stdout>:[rank7]: x", 7, None),
        ("[rank2]:gpu1:10:11 [2] NCCL INFO x", 2, "gpu1"),
        ("2019-06-02T16:13:44.884Z: [1,12]<stdout>:x", 12, None),
        ("Tue Nov 27 13:49:06 2018[1,10]<stdout>:F1127 Check failed", 10, None),
        ("RuntimeError: not a prefix", None, None),
        ("Traceback (most recent call last):", None, None),
    ],
)
def test_parse_prefix(line: str, rank: int | None, host: str | None) -> None:
    p = parse_prefix(line)
    if rank is None and host is None:
        assert p is None
    else:
        assert p is not None and p.rank == rank and p.host == host


def test_process_group_rank_inside_new_watchdog_messages() -> None:
    b = read_logs(
        text="[E1204 18:46:13.6 ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg) Rank 2] "
        "Process group watchdog thread terminated with exception: CUDA error: unspecified launch failure\n"
    )
    assert b.ranks == [2]


def test_timestamp_stays_separated_from_the_message() -> None:
    p = parse_prefix("Tue Nov 27 13:49:06 2018[1,10]<stdout>:F1127 Check failed")
    assert p is not None and p.rest == "Tue Nov 27 13:49:06 2018 F1127 Check failed"


def test_jsonl_message_rank_prefix_beats_the_pod_index() -> None:
    # one pod per node runs 8 ranks: the torchrun prefix inside the message names the rank
    lines = [
        '{"log": "[rank12]: huggingface_hub.errors.HfHubHTTPError: 429 Client Error", "kubernetes": {"pod_name": "job-worker-1"}}',
        '{"log": "[rank8]: step 3 loss 1.2", "kubernetes": {"pod_name": "job-worker-1"}}',
    ]
    b = read_logs(text="\n".join(lines) + "\n")
    assert 12 in b.ranks and 8 in b.ranks and 1 not in b.ranks
    assert any("HfHubHTTPError" in line.text for line in b.streams[12].lines)


@pytest.mark.parametrize(
    "line",
    [
        "HYBRID-EP ALLGATHER TIMEOUT:SM 13 [0]:expecting 5792 got 5791",
        "Caused by op 'DistributedRMSPropOptimizer_Allreduce/HorovodAllreduce_gradients_AddN_5_0', defined at:",
        "==== backtrace (tid:   4304) ====",
        "bfc_allocator.cc:1112] Sum Total of in-use chunks: 287.95MiB",
        "  what():  Resource temporarily unavailable",
        "SSLCertVerificationError: certificate has expired (_ssl.c:1091)",
        "srun: error: Application launch failed: Job credential expired",
        " *** caught segfault ***",
        "WARNING: nan loss detected, ending training",
        "[TensorRT-LLM][WARNING] Device 2 peer access Device 5 is not available.",
        "ib_mlx5_log.c:143  Transport retry count exceeded on mlx5_0:1/IB (synd 0x15 vend 0x81 hw_synd 0/0)",
        "GID is NULL, please check your GID index by specifying MC_GID_INDEX",
        "  0%|          | 0/1 [00:00<?, ?it/s]已杀死",
        "E tensorflow/stream_executor/cuda/cuda_dnn.cc:378] Loaded runtime CuDNN library: 6021 (compatibility version 6000)",
        "2017-06-03 13:19:08.208724: E tensorflow/stream_executor/cuda/cuda_dnn.cc:352] Loaded runtime CuDNN library: 5005",
        "E0410 21:04:57.403295131   30715 f872.cc:77]                 channel stack builder gave up",
        "NCCL INFO misc/socket.cc:568 -> 2",
    ],
)
def test_failure_lines_of_other_stacks_are_kept_from_the_middle_of_a_long_log(line: str) -> None:
    # beyond the head and the tail a line is kept only when it is salient
    noise = "".join(f"step {i} loss 1.{i % 10}\n" for i in range(400))
    bundle = read_logs(text=noise + line + "\n" + noise)
    kept = [ln for ln in bundle.iter_lines() if ln.text == line]
    assert kept and kept[0].salient


def test_a_torchrun_rank_inside_an_srun_task_label_is_the_global_rank() -> None:
    # srun -l labels each task (here one task per node running torchrun): "N: [rankM]: ..."
    b = read_logs(text="1: [rank31]: RuntimeError: boom\n1: [rank30]: waiting\n0: [rank0]: ok\n0: plain task line\n")
    assert sorted(k for k in b.streams if isinstance(k, int)) == [0, 30, 31]
    assert [ln.text for ln in b.streams[31].lines] == ["RuntimeError: boom"]
    assert [ln.text for ln in b.streams[0].lines] == ["ok", "plain task line"]
