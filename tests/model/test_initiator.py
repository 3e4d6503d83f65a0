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


def test_unprefixed_error_that_names_its_rank() -> None:
    text = (
        "RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one.\n"
        "Parameter indices which did not receive grad for rank 2: 17 18\n"
    )
    assert verdict(text, "ddp-unused-parameters").rank == 2


def test_launcher_failed_worker_names_the_rank_of_a_rankless_excerpt() -> None:
    text = (
        "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 4100 closing signal SIGTERM\n"
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 3 (pid: 4103) "
        "of binary: /usr/bin/python3\n"
    )
    v = verdict(text, "host-oom")
    assert v.rank == 3
    assert "launcher" in v.reason


def test_mp_spawn_and_deepspeed_launcher_name_the_failed_process() -> None:
    spawn = "-- Process 1 terminated with the following error:\nTraceback (most recent call last):\nKeyError: 'x'\n"
    assert verdict(spawn, "uncaught-exception-crash").rank == 1
    ds = (
        "[INFO] [launch.py:315:sigkill_handler] Killing subprocess 9001\n"
        "[ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python', '-u', 'train.py', '--local_rank=2', "
        "'--deepspeed'] exits with return code = 1\n"
    )
    assert verdict(ds, "uncaught-exception-crash").rank == 2


def test_launcher_local_rank_is_not_a_global_rank_on_several_hosts() -> None:
    text = (
        "node-a: [rank0]: step 10 loss 1.0\nnode-b: [rank9]: step 10 loss 1.0\n"
        "node-b: ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 1 (pid: 7) "
        "of binary: python\n"
    )
    assert verdict(text, "uncaught-exception-crash").rank != 1


def test_main_process_failures_name_rank_zero_when_only_waiters_speak() -> None:
    tok = "Running tokenizer on dataset:  47%|####7     | 470/1000 [30:11<38:27]\n"
    text = tok + wd(1, 3) + wd(2, 3) + wd(3, 3)
    b = read_logs(text=text)
    hits = MATCHER.scan(b.iter_lines())
    plain = find_initiator(b, hits, analyse_structure(b), "host-work-timeout")
    v = find_initiator(b, hits, analyse_structure(b), "host-work-timeout", usual_initiator="main-process")
    assert plain.rank != 0
    assert v.rank == 0 and "main process" in v.reason
    # rank 0 timed out like the others: no basis to blame it
    both = wd(0, 3) + wd(1, 3) + wd(2, 3)
    b = read_logs(text=both)
    v = find_initiator(
        b, MATCHER.scan(b.iter_lines()), analyse_structure(b), "host-work-timeout", usual_initiator="main-process"
    )
    assert "main process" not in v.reason


def test_taxonomy_marks_the_main_process_failures() -> None:
    tax = load_taxonomy()
    marked = {e.id for e in tax if e.usual_initiator == "main-process"}
    assert {"host-work-timeout", "subset-rank-collective-hang"} <= marked
    assert "cuda-oom" not in marked


def test_same_evidence_on_several_ranks_names_the_earliest_timestamp() -> None:
    # one file per rank (no common order of lines): the timestamps decide, not the file order
    err = "ModuleNotFoundError: No module named 'flash_attn'\n"
    logs: dict[int | str, str] = {
        0: f"2024-05-01T10:00:05Z {err}",
        1: f"2024-05-01T10:00:01Z {err}",  # earliest, neither first nor last
        2: f"2024-05-01T10:00:09Z {err}",
    }
    b = read_logs(logs)
    v = find_initiator(b, MATCHER.scan(b.iter_lines()), analyse_structure(b), "missing-module")
    assert v.rank == 1
    assert "earliest timestamp" in v.reason


def test_the_one_rank_silent_while_every_other_timed_out_failed_first() -> None:
    text = "[rank2]: step 100 loss 2.0\n" + "".join(wd(r, 58) for r in (0, 1, 3))
    for label in (None, "subset-rank-collective-hang"):
        v = verdict(text, label)
        assert v.rank == 2, label
        assert "silent while every other rank timed out" in v.reason


def test_two_silent_ranks_are_not_a_verdict() -> None:
    text = "[rank2]: step 100 loss 2.0\n[rank4]: step 100 loss 2.0\n" + "".join(wd(r, 58) for r in (0, 1, 3))
    assert verdict(text, None).rank is None


def test_same_evidence_in_separate_files_without_timestamps_is_not_a_verdict() -> None:
    err = "ModuleNotFoundError: No module named 'flash_attn'\n"
    logs: dict[int | str, str] = dict.fromkeys((0, 1, 2), err)
    b = read_logs(logs)
    v = find_initiator(b, MATCHER.scan(b.iter_lines()), analyse_structure(b), "missing-module")
    assert v.rank is None and v.reason == "several ranks look alike; no single first failure"
    assert v.scores and len(set(v.scores.values())) == 1


def test_the_rank_whose_collective_differs_at_the_same_seqnum() -> None:
    text = wd(0, 58) + wd(1, 58) + wd(2, 58, op="BROADCAST") + wd(3, 58)
    v = verdict(text, "collective-mismatch")
    assert v.rank == 2
    assert "its collective differs from the other ranks' at the same SeqNum" in v.reason


def test_a_real_exception_beats_the_ranks_that_only_timed_out() -> None:
    text = "".join(wd(r, 58) for r in (0, 1, 2)) + "[rank3]: RuntimeError: shape mismatch in layer 7\n"
    v = verdict(text, "uncaught-exception-crash")
    assert v.rank == 3


def test_an_unprefixed_kernel_assert_belongs_to_the_one_rank_with_a_traceback() -> None:
    assert_line = (
        "/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [0,0,0], thread: [0,0,0]"
        ' Assertion `-sizes[i] <= index && index < sizes[i] && "index out of bounds"` failed.\n'
    )
    traceback = (
        "[rank5]: Traceback (most recent call last):\n"
        '[rank5]:   File "/job/train.py", line 7, in <module>\n'
        "[rank5]:     main()\n"
    )
    v = verdict("[rank1]: step 80 loss 1.2\n" + assert_line + traceback, "cuda-device-side-assert")
    assert v.rank == 5 and "only rank with a traceback" in v.reason
    # two ranks with tracebacks: the assert could be either's
    other = traceback.replace("rank5", "rank2")
    assert verdict(assert_line + traceback + other, "cuda-device-side-assert").rank is None


def test_srun_names_the_task_that_failed() -> None:
    text = (
        "slurmstepd-node-a: error: Detected 1 oom-kill event(s) in StepId=9411285.0.\n"
        "srun: error: node-a: task 3: Out Of Memory\n"
        "srun: launch/slurm: _step_signal: Terminating StepId=9411285.0\n"
    )
    v = verdict(text, "host-oom")
    assert v.rank == 3 and "srun" in v.reason
    # a task that exited cleanly names no one, nor does a range of tasks
    assert verdict("srun: error: node-a: task 2: Exited with exit code 0\n", "no-failure").rank is None
    assert verdict("srun: error: node-a: tasks 0-3: Exited with exit code 1\n", "uncaught-exception-crash").rank is None


def test_srun_line_carrying_the_root_cause_gives_that_evidence_to_its_task() -> None:
    # the OOM fingerprint sits on srun's own line: the evidence itself is attributed to task 3
    v = verdict("srun: error: node-a: task 3: Out Of Memory\n", "host-oom")
    assert v.rank == 3 and "root-cause evidence (host-oom)" in v.reason


def test_pytorch_xla_names_the_device_ordinal_whose_process_failed() -> None:
    text = (
        "xla:0, 1.7677:.4f\n"
        "xla:1, 0.3067:.4f\n"
        "Exception in device=TPU:6: DataLoader worker (pid(s) 1235) exited unexpectedly\n"
        "Traceback (most recent call last):\n"
        '  File "/usr/local/lib/python3.7/site-packages/torch_xla/distributed/xla_multiprocessing.py", line 330, in _mp_start_fn\n'
        "RuntimeError: DataLoader worker (pid(s) 1235) exited unexpectedly\n"
    )
    v = verdict(text, "host-oom")
    assert v.rank == 6 and "launcher" in v.reason


def test_the_only_rank_a_log_shows_is_named_unless_it_only_waited() -> None:
    # one rank's output pasted: its NCCL error is its own failure, even without a fingerprint of the diagnosis
    own = (
        "[rank0]: Traceback (most recent call last):\n"
        '[rank0]:   File "repro.py", line 12, in <module>\n'
        "[rank0]: torch.distributed.DistBackendError: NCCL error in: NCCLUtils.cpp:77, unhandled cuda error\n"
    )
    v = verdict(own, "cuda-driver-mismatch")
    assert v.rank == 0 and "only rank" in v.reason
    # a lone rank that only timed out waiting (no evidence of the diagnosed failure of its own)
    # names no one
    assert verdict(wd(3, 57), "cuda-oom").rank is None


def test_an_abstention_still_names_the_lone_rank_that_reports_an_error() -> None:
    # the model may not name the failure (unknown), but which rank broke is still plain to see
    own = (
        "[rank5]: INFO 09-10 09:37:40 loader.py:88] Loading weights took 12.4 seconds\n"
        "[rank5]: ERROR 09-10 09:37:41 executor.py:314] Worker proc died unexpectedly, shutting down executor.\n"
    )
    v = verdict(own, None)
    assert v.rank == 5 and "only rank" in v.reason
    # without a diagnosis, a lone rank that reports no error of its own is not a verdict
    quiet = "[rank2]: step 10 loss 1.93\n[rank2]: step 20 loss 1.88\n"
    assert verdict(quiet, None).rank is None
    assert verdict(quiet, "cuda-oom").rank == 2


def test_mpirun_names_the_first_process_that_exited_non_zero() -> None:
    text = (
        "Traceback (most recent call last):\n"
        "ModuleNotFoundError: No module named 'mpi4py'\n"
        "--------------------------------------------------------------------------\n"
        "mpirun detected that one or more processes exited with non-zero status, thus causing\n"
        "the job to be terminated. The first process to do so was:\n"
        "\n"
        "  Process name: [[16228,1],3]\n"
        "  Exit code:    1\n"
    )
    v = verdict(text, "missing-module")
    assert v.rank == 3 and "mpirun" in v.reason


def test_mpirun_names_the_first_process_killed_by_a_signal() -> None:
    text = (
        "[node-a:26980] *** Process received signal ***\n"
        "--------------------------------------------------------------------------\n"
        "mpirun noticed that process rank 1 with PID 26987 on node node-a exited on signal 9 (Killed).\n"
        "--------------------------------------------------------------------------\n"
    )
    v = verdict(text, "host-oom")
    assert v.rank == 1 and "mpirun" in v.reason
    # a masked PID is still a PID
    assert verdict(text.replace("PID 26987", "PID xxxxxx"), "host-oom").rank == 1


def test_prterun_names_the_process_that_aborted() -> None:
    text = (
        "[node-a:00000] *** An error occurred in Socket closed\n"
        "[node-a:00000] *** MPI_ERRORS_ARE_FATAL (processes in this communicator will now abort,\n"
        "prterun has exited due to process rank 2 with PID 0 on node node-a calling\n"
        '"abort". This may have caused other processes in the application to be\n'
    )
    v = verdict(text, "nccl-init-failure")
    assert v.rank == 2 and "mpirun" in v.reason


def test_open_mpis_mpiexec_notices_the_first_process_as_mpirun_does() -> None:
    text = (
        "Primary job  terminated normally, but 1 process returned\n"
        "mpiexec noticed that process rank 3 with PID 0 on node node-a exited on signal 4 (Illegal instruction: 4).\n"
    )
    v = verdict(text, "segfault-native-crash")
    assert v.rank == 3 and "mpiexec" in v.reason


def test_text_generation_launcher_names_the_shard_that_failed_to_start() -> None:
    text = (
        "ValueError: `num_heads` must be divisible by `num_shards` (got `num_heads`: 71 and `num_shards`: 2\n"
        " rank=0\n"
        "2023-12-16T09:36:24.632149Z ERROR text_generation_launcher: Shard 0 failed to start\n"
        "2023-12-16T09:36:24.632181Z  INFO text_generation_launcher: Shutting down shards\n"
        "2023-12-16T09:36:24.652173Z  INFO shard-manager: text_generation_launcher: Shard terminated rank=1\n"
    )
    v = verdict(text, "uncaught-exception-crash")
    assert v.rank == 0 and "text-generation-launcher" in v.reason


def test_mpiexec_names_the_process_that_died_of_its_own_signal_not_those_it_killed() -> None:
    text = "rank 0 died from signal 11 and dumped core\nrank 4 died from signal 9\n"
    v = verdict(text, "segfault-native-crash")
    assert v.rank == 0 and "mpiexec" in v.reason
    # only the ranks the launcher killed afterwards: none of them failed first
    assert verdict("rank 4 died from signal 9\nrank 5 died from signal 15\n", "segfault-native-crash").rank is None


def test_torchelastic_names_the_failed_worker_in_its_newer_words() -> None:
    text = (
        "[node-a] [2026-03-30 19:24:35,966] torch.distributed.elastic.multiprocessing.api: [WARNING] Sending process 73 "
        "the closing signal SIGTERM\n"
        "[node-a] [2026-03-30 19:24:42,731] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -9) "
        "for binary located at /envs/x/bin/python3.10 with local_rank: 3\n"
    )
    v = verdict(text, "host-oom")
    assert v.rank == 3 and "launcher" in v.reason


def test_megatron_numerics_check_names_its_rank() -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "megatron/core/optimizer/clip_grads.py", line 90, in clip_grad_norm_fp32\n'
        "AssertionError: Rank 3: found NaN in local grad norm in backwards pass. Device: 3, node: node-a\n"
    )
    v = verdict(text, "loss-nan-divergence")
    assert v.rank == 3


def test_nccls_proxy_service_names_the_rank_whose_operation_failed() -> None:
    # two hosts' NCCL lines keyed by process (no rank prefix): the proxy's own rank is the one named
    text = (
        "node-a:406794:406794 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
        "node-b:405399:405399 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>\n"
        "node-a:406794:406838 [0] transport/net_ib.cc:1112 NCCL WARN NET/IB : Unable to create QP\n"
        "node-a:406794:406838 [0] NCCL INFO transport/net.cc:837 -> 2\n"
        "node-a:406794:406838 [0] proxy.cc:1040 NCCL WARN [Proxy Service 8] Failed to execute operation Connect "
        "from rank 8, retcode 2\n"
    )
    v = verdict(text, "nccl-init-failure")
    assert v.rank == 8


def test_xla_names_the_replica_whose_execution_failed() -> None:
    text = (
        "E1120 10:59:55.894873   35984 pjrt_stream_executor_client.cc:3067] Execution of replica 1 failed: INTERNAL: "
        "Failed to retrieve branch_index value on stream 0x5583cca477e0: CUDA error: an illegal memory access was encountered\n"
    )
    v = verdict(text, "cuda-illegal-memory-access")
    assert v.rank == 1 and "replica" in v.reason


def test_an_out_of_memory_error_names_its_gpu_as_the_rank_on_one_host() -> None:
    text = (
        "RuntimeError: CUDA out of memory. Tried to allocate 1024.00 MiB (GPU 3; 23.65 GiB total capacity; "
        "19.49 GiB already allocated; 474.00 MiB free; 22.10 GiB reserved in total by PyTorch)\n"
    )
    v = verdict(text, "cuda-oom")
    assert v.rank == 3 and "GPU" in v.reason
    # on several hosts a device ordinal is no rank
    two_hosts = "node-a: step 1\nnode-b: step 1\n" + text
    assert verdict(two_hosts, "cuda-oom").rank != 3
    # PyTorch 2.1 spelt it "capacty"
    older = "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 9.77 GiB. GPU 2 has a total capacty of 23.69 GiB\n"
    assert verdict(older, "cuda-oom").rank == 2


def test_lightnings_rank_tag_assigns_the_line_to_its_rank() -> None:
    text = (
        "[rank: 1] Child process with PID 224779 terminated with code 1. Forcefully terminating all other processes\n"
    )
    b = read_logs(text=text)
    assert list(b.streams) == [1]


def test_paddles_launcher_and_torchelastics_failure_record_name_the_failed_process() -> None:
    paddle = (
        "SystemError: (Fatal) DataLoader process (pid 1104) exited is killed by signal: Killed.\n"
        "INFO 2022-11-02 08:42:32,186 launch_utils.py:341] terminate all the procs\n"
        "ERROR 2022-11-02 08:42:32,186 launch_utils.py:604] ABORT!!! Out of all 4 trainers, the trainer process with rank=[2] was aborted. Please check its log.\n"
    )
    v = verdict(paddle, "host-oom")
    assert v.rank == 2 and "paddle" in v.reason
    elastic = (
        "The worker fails with {0: ProcessFailure(local_rank=1, pid=54, exitcode=-7, error_file='<N/A>', "
        "message='Signal 7 (SIGBUS) received by PID 54')}\n"
    )
    assert verdict(elastic, "dataloader-shm-bus-error").rank == 1
    # a record of a worker that exited cleanly names no one
    assert verdict(elastic.replace("exitcode=-7", "exitcode=0"), "dataloader-shm-bus-error").rank != 1


def test_ms_mpis_abort_report_names_the_process_that_failed_not_the_terminated_ones() -> None:
    report = (
        "Finished Epoch[ 1 of 20]: [Training] cr = 0.40189179 * 36006\n"
        "job aborted:\n"
        "[ranks] message\n"
        "[0] terminated\n"
        "[1] process exited without calling finalize\n"
        "[2-3] terminated\n"
        "---- error analysis -----\n"
    )
    v = verdict(report, "segfault-native-crash")
    assert v.rank == 1 and "MS-MPI" in v.reason
    assert (
        verdict(
            report.replace("[1] process exited without calling finalize", "[1] fatal error"), "nccl-init-failure"
        ).rank
        == 1
    )
    # without MS-MPI's heading the same bracketed lines are nobody's report
    assert verdict(report.replace("job aborted:\n", ""), "segfault-native-crash").rank != 1


def test_an_error_line_that_names_its_rank_is_the_last_resort() -> None:
    text = "Caught signal 11 (SIGSEGV - invalid memory reference) on rank 5\nStack trace:\n   0: lbann::stack_trace::get()\n"
    v = verdict(text, "segfault-native-crash")
    assert v.rank == 5 and "error line names the rank" in v.reason
    # a line that is no error does not name the failing rank (when the log names more than one
    # rank; a log that only ever names one is that rank's output, see below)
    assert (
        verdict(
            "step 10 done on rank 5\nstep 10 done on rank 6\nSegmentation fault (core dumped)\n",
            "segfault-native-crash",
        ).rank
        is None
    )
    # Intel Gaudi's bridge names the rank of its own fatal error as "[Rank:N]"
    gaudi = "RuntimeError: [Rank:3] FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed for size::268435456 (256)MB\n"
    assert verdict(gaudi, "cuda-oom").rank == 3


def test_ascends_error_stamp_names_its_rank() -> None:
    text = (
        "[ERROR] 2024-10-09-10:06:30 (PID:1506967, Device:1, RankID:1) ERR02200 DIST call hccl api failed.\n"
        "RuntimeError: create:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:102 HCCL function error: "
        "HcclGetRootInfo(&hcclID), error code is 7\n"
    )
    v = verdict(text, "nccl-init-failure")
    assert v.rank == 1 and "names the rank" in v.reason


def test_dataparallel_names_the_replica_that_raised() -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "train.py", line 12, in <module>\n'
        "RuntimeError: Caught RuntimeError in replica 1 on device 1.\n"
        "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:1 and cuda:0!\n"
    )
    v = verdict(text, "tensor-device-mismatch")
    assert v.rank == 1 and "DataParallel" in v.reason


def test_an_abstention_names_the_first_rank_whose_own_lines_report_a_failure() -> None:
    # no diagnosis, so no entry's root cause to look for: the first rank whose lines report a
    # failure of its own (here a network error in its first collective) failed first; a later
    # traceback on another rank does not make that one first, and watchdog timeouts never count
    text = (
        "[rank3]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:3763, remote process "
        "exited or there was a network error, NCCL version 2.28.8\n"
        "[rank3]: ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.\n"
        "[rank2]: Traceback (most recent call last):\n"
        '[rank2]:   File "train.py", line 301, in <module>\n'
    )
    v = verdict(text, None)
    assert v.rank == 3
    assert "nccl-network-error" in v.reason
    assert verdict("".join(wd(r, 58) for r in range(4)), None).rank is None


def test_an_abstention_names_the_lone_rank_whose_traceback_ends_in_any_exception_class() -> None:
    # the last line of a traceback names the exception's class, whatever its name says
    text = (
        '[rank0]:   File "pyarrow/error.pxi", line 92, in pyarrow.lib.check_status\n'
        "[rank0]: pyarrow.lib.ArrowInvalid: offset overflow while concatenating arrays\n"
    )
    assert verdict(text, None).rank == 0
    assert verdict("[rank0]: loading shards: model.layers.0: done\n", None).rank is None


def test_the_one_rank_an_unprefixed_log_names_is_its_failing_rank() -> None:
    # one process's output pasted without rank prefixes still says whose it is
    own = (
        "LOCAL_RANK: 0 - CUDA_VISIBLE_DEVICES: [0]\n"
        "Traceback (most recent call last):\n"
        '  File "train.py", line 40, in <module>\n'
        "RuntimeError: CUDA error: device-side assert triggered\n"
        "Process Group destroyed on rank 0\n"
    )
    v = verdict(own, "cuda-device-side-assert")
    assert v.rank == 0 and "only rank the log's own lines name" in v.reason
    # two ranks named: no single owner
    two = own + "Added key: store_based_barrier_key:1 to store for rank: 1\n"
    assert verdict(two, "cuda-device-side-assert").rank is None
    # without a diagnosis (an abstention), or when the lines only time out, the clue is not used
    assert verdict(own, None).rank is None
    # the ranks of several hosts are local: no verdict
    hosts = (
        "node-a:101:101 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
        "node-b:202:202 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>\n"
    )
    assert verdict(hosts + own, "cuda-device-side-assert").rank is None


def test_composers_launcher_names_the_rank_that_crashed() -> None:
    text = (
        "Abort was called at 345 line in file:\n"
        "./shared/source/memory_manager/memory_manager.cpp\n"
        "2023-07-17 22:43:51,154 - composer.cli.launcher - ERROR - Rank 4 crashed with exit code -6.\n"
    )
    v = verdict(text, "segfault-native-crash")
    assert v.rank == 4 and "composer" in v.reason
    # a rank that exited cleanly is not the launcher's failed process
    assert "composer" not in verdict(text.replace("exit code -6", "exit code 0"), "segfault-native-crash").reason
