"""features/select.py: line templates and which lines of a job are shown as evidence."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from denpex_ml.features import FingerprintMatcher, select_lines, template
from denpex_ml.features.select import EXCEPTION_RE, is_error_line
from denpex_ml.logs import read_logs
from denpex_ml.taxonomy import load_taxonomy

JOB = (
    "[rank0]: step 1 loss 2.31\n"
    "[rank0]: step 2 loss 2.29\n"
    "[rank1]: step 1 loss 2.30\n"
    "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB\n"
)


def test_template_drops_the_timestamp_header_and_numbers() -> None:
    a = template("2024-04-19T10:42:28.858Z [Rank 3] ran for 600011 ms")
    b = template("2024-04-20T11:00:00.000Z [Rank 7] ran for 12 ms")
    assert a == b == "[Rank <n>] ran for <n> ms"


def test_template_folds_spaces_and_caps_the_length() -> None:
    assert template("a  \t b") == "a b"
    assert len(template("x" * 1000)) == 400


def test_root_cause_lines_lead_and_repeats_are_one_template() -> None:
    bundle = read_logs(text=JOB)
    hits = FingerprintMatcher(load_taxonomy()).scan(ln for s in bundle.streams.values() for ln in s.lines)
    selected = select_lines(bundle, hits)
    first = selected[0]
    assert "CUDA out of memory" in first.line.text and first.line.rank == 1
    assert any("root-cause fingerprint of cuda-oom" in r for r in first.reasons)
    assert first.count >= 2  # the two OOM lines share one template
    assert len({s.template for s in selected}) == len(selected)


def test_max_lines_bounds_the_selection() -> None:
    bundle = read_logs(text=JOB)
    assert len(select_lines(bundle, [], max_lines=1)) == 1


def test_errors_that_name_no_exception_class_are_error_lines() -> None:
    # set-up and CLI failures print no ``...Error`` name; they are still the job's error lines
    text = (
        "[rank0]: step 1 loss 2.31\n"
        "[rank1]: The client socket has failed to connect to node-a:52873 (errno: 110 - Connection timed out)\n"
        "[rank2]: train.py: error: unrecognized arguments: --local-rank=2\n"
    )
    sel = {s.line.text: s for s in select_lines(read_logs(text=text), [])}
    assert (
        sel["The client socket has failed to connect to node-a:52873 (errno: 110 - Connection timed out)"].priority
        == 2.0
    )
    assert sel["train.py: error: unrecognized arguments: --local-rank=2"].priority == 2.0
    assert all(s.priority < 2.0 for t, s in sel.items() if "loss" in t)


def test_a_dotted_exception_class_without_error_in_its_name_is_an_error_line() -> None:
    text = (
        "[rank0]: step 1 loss 2.31\n"
        "[rank0]: torch._dynamo.exc.FailOnRecompileLimitHit: recompile_limit reached with fullgraph=True.\n"
    )
    sel = {s.line.text: s for s in select_lines(read_logs(text=text), [])}
    assert (
        sel["torch._dynamo.exc.FailOnRecompileLimitHit: recompile_limit reached with fullgraph=True."].priority == 2.0
    )
    assert all(s.priority < 2.0 for t, s in sel.items() if "loss" in t)


def test_a_benign_message_is_no_error_line() -> None:
    m = FingerprintMatcher(load_taxonomy())
    text = (
        "node-a:1:1 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]\n"
        "node-a:1:1 [0] NCCL WARN Call to ibv_create_cq failed\n"
    )
    bundle = read_logs(text=text)
    sel = {s.line.text: s for s in select_lines(bundle, [], benign=m.is_benign)}
    benign = next(s for t, s in sel.items() if "libibverbs" in t)
    assert benign.priority < 2.0 and "normal message that reads like an error" in benign.reasons
    assert next(s for t, s in sel.items() if "ibv_create_cq" in t).priority == 2.0
    # without the predicate both are error lines
    assert all(s.priority == 2.0 for s in select_lines(bundle, []) if "NCCL WARN" in s.line.text)


_ERROR_WORDS = st.sampled_from(
    [
        "Error", "Exception", "Interrupt", "Traceback", "egmentation fault", "Killed", "SIGSEGV", "SIGab", "core dumped",
        "NCCL WARN", "Xid", "Fatal", "fatal", "FAILED", "Aborted", "terminate called", "exited with code", "exit code",
        "exitcode", "error: ", "ERROR", "errno", "Failed to connect", "failed to initialize", "Connection reset",
        "An error occurred", "torch._dynamo.exc.FailOnRecompileLimitHit: ", "omegaconf.errors.Missing: ", "a.B: ",
        "Check failed: ", "Caused by op '", "==== backtrace", "ORTE_ERROR_LOG", "MPI error", "TIMEOUT", "INTERNAL: ",
        "ABORTED: ", "UNAVAILABLE: ", "DEADLINE_EXCEEDED: ", "NVIDIA-SMI has failed", "Test CUDA failure", "Assertion error",
        "Assertion failed", " *** caught segfault ***", "#1 <signal handler called>",
        "cuda error", "CUDA runtime error", "HIP error", "FAIL", "out of memory", "Failure: ", "failed: ", "Failed, ",
        "connection refused", "killed", "terminating due to uncaught exception", "has taken over 300.0 seconds",
        "command not found", "Could not resolve hostname", "will now abort", "MPI_ABORT was invoked", "submit error",
        "TT_FATAL", "| FATAL |", "lua: ", "luajit: ", "stack traceback:", "Caught Win32 exception", "job aborted:", "E0410 21:04:57.403295  30715 f.cc:77]", "E429 13:55:49.384372190 P.cpp:1743]", "F f.cu:1]", ": E tensorflow/x.cc:2]",
        " ", "\t", "\u3000", "\u00a0", "]", ">", "_", ".", ":", "é", "Ω", "٣", "x", "1", "\udcff", "ValueErroré",
    ]
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(_ERROR_WORDS | st.text(max_size=3), max_size=12).map("".join))
@example("ValueErroré")  # no word boundary after "Error" for Python's Unicode \b; RE2's ASCII \b sees one
@example("\u3000torch.cuda.OutOfMemoryError: ")
@example("\u00a0a.B: ")  # Python's \s holds the no-break space, RE2's does not
def test_is_error_line_is_exception_re(text: str) -> None:
    """The RE2 screen lets through every line ``EXCEPTION_RE`` matches: the answer is Python's."""
    assert is_error_line(text) == bool(EXCEPTION_RE.search(text))


def test_templates_at_once_equal_one_by_one() -> None:
    """``templates`` (the uuid and path rules screened by RE2 over all lines) gives ``template`` of each."""
    import json
    import random
    from pathlib import Path

    from denpex_ml.logs.patterns import template, templates

    repo = Path(__file__).resolve().parents[2]
    texts: list[str] = []
    for path in sorted((repo / "data" / "real").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                texts.extend(json.loads(line)["log"].split("\n"))
    rng = random.Random(0)
    parts = [
        "0x1f", "0xdeadBEEF", "deadbeef-0000-1111-2222-333344445555", "DEADBEEF-0000-1111-2222-333344445555",
        "abcdef01-", "-", "/", "/a", "/usr/lib/x.so", "node-12", "ip-3", "é", "٣", "/é/ü/ß", "<hex>", "  ", "\t",
        "12.5", "a_b", "2024-05-02 10:00:00,123 ", "[I0501 17:04:45.000367 140230 run.py:779] ", "Apr  9 10:42:28 ",
        "//x//y//z", "/x/y/z/", "x/0x12/y/z",
    ]  # fmt: skip
    texts += ["".join(rng.choice(parts) for _ in range(rng.randint(0, 10))) for _ in range(5000)]
    # the same lines with other digits 1-9 (one template per digit-masked line, cached across calls)
    variants = ["".join(rng.choice("123456789") if c in "123456789" else c for c in t) for t in texts]
    assert templates(texts) == [template(t) for t in texts]
    assert templates(variants) == [template(t) for t in variants]
    zeros = [t.replace("1", "0") for t in texts]  # the hex rule's "0x": a zero is not any digit
    assert templates(zeros) == [template(t) for t in zeros]
    assert templates(["a\nb/c/d/e", "f"]) == [template("a\nb/c/d/e"), "f"]  # a text holding a newline


@pytest.mark.parametrize(
    "line",
    [
        "2022-04-15 06:35:51.117346: F tensorflow/core/tpu/kernels/tpu_program_group.cc:86] Check failed: xla_tpu_programs.size() > 0",
        "Caused by op 'DistributedRMSPropOptimizer_Allreduce/HorovodAllreduce_gradients_AddN_5_0', defined at:",
        "==== backtrace (tid:   4304) ====",
        "[node-c:14313] [[44845,0],2] ORTE_ERROR_LOG: Data unpack would read past end of buffer in file grpcomm_direct.c",
        "MPI_Waitany, MPI error 782",
        "HYBRID-EP ALLGATHER TIMEOUT:SM 13 [0]:expecting 5792 got 5791",
        "E0912 23:44:51.552719 2536982 pjrt_stream_executor_client.cc:3008] Execution of replica 0 failed: INTERNAL: NCCL operation",
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
        "node-a: Test CUDA failure common.cu:1304 'CUDA-capable device(s) is/are busy or unavailable'",
        "Assertion error /home/user/DeepEP/csrc/deep_ep.cpp:48 'num_ranks > NUM_MAX_NVL_PEERS or low_latency_mode'",
        " *** caught segfault ***",
        "#28 <signal handler called>",
        "THCudaCheck FAIL file=/tmp/cutorch/lib/THC/generic/THCStorage.cu line=66 error=2 : out of memory",
        "luajit: cuda runtime error (30) : unknown error at /tmp/cutorch/lib/THC/THCStorage.c:113",
        "  Compilation failure: Ran out of memory in memory space hbm. Used 8.38G of 8.00G hbm.",
        "Failed, NCCL error transformer_engine/pytorch/csrc/userbuffers/userbuffers-host.cpp:223 ''",
        "[1]    51630 killed     ./vgg16.test",
        "libc++abi: terminating due to uncaught exception of type std::runtime_error: [METAL] Command buffer execution failed",
        "Timeout: A call to 'allGather' has taken over 300.000000 seconds. Terminating the distributed job.",
        "bash: orted: command not found",
        "*** Your MPI job will now abort.",
        "W0418 10:48:07.757660  5642 LightNetwork.cpp:397] connection refused by pserver, try again!",
        "qsub: submit error (Job exceeds queue resource limits MSG=cannot satisfy queue max mem requirement)",
        "2017-06-03 13:19:08.208724: E tensorflow/stream_executor/cuda/cuda_dnn.cc:352] Loaded runtime CuDNN library: 5005",
        "/home/user/torch/install/bin/luajit: train.lua:98: attempt to index a nil value",
        "stack traceback:",
        "CNTK: Caught Win32 exception 0xc0000005: Access violation.",
        # PyTorch's c10 logging: no thread id, no leading zero in the month
        "[rank6]:[E429 13:55:49.384620373 ProcessGroupNCCL.cpp:1533] [PG ID 0 PG GUID 0(default_pg) Rank 6] ProcessGroupNCCL",
        "[F1205 14:03:49.385461578 ProcessGroupNCCL.cpp:1554] [PG ID 0 PG GUID 0(default_pg) Rank 6] Terminating the process",
    ],
)
def test_failures_in_other_stacks_words_are_error_lines(line: str) -> None:
    """A log whose only failure lines are in these words is not a log without failure evidence."""
    assert is_error_line(line)
    assert select_lines(read_logs(text=line + "\n"), [])[0].priority == 2.0


@pytest.mark.parametrize(
    "line",
    [
        "NCCL_TIMEOUT=1800",
        "export TORCH_NCCL_BLOCKING_WAIT=1 ; timeout 600 torchrun",
        "INTERNAL_ID: 3",
        # healthy runs' words that only sound like failures (held real healthy logs print these)
        "I0820 16:10:25.293788 140208504612672 xla_bridge.py:353] Unable to initialize backend 'tpu_driver'",
        "[WARNING] [runner.py:117:fetch_hostfile] Unable to find hostfile, will proceed with training with local resources only.",
        "      Timeout: 180 seconds",
        "I0410 21:04:57.403295  30715 trainer.cc:77] step 100 done",
        "failure_rate=0.0 retries=0",
        "[rank0]:[W429 13:55:49.384620373 Utils.hpp:164] Warning: Environment variable NCCL_BLOCKING_WAIT is deprecated",
        "[I1205 13:55:49.384620373 ProcessGroupNCCL.cpp:931] [PG ID 0 PG GUID 0 Rank 0] ProcessGroupNCCL initialization options:",
    ],
)
def test_settings_that_only_name_a_timeout_are_no_error_lines(line: str) -> None:
    assert not is_error_line(line)
