"""Reusable message builders: tracebacks, PyTorch c10 / NCCL watchdog texts, torchelastic teardown.

Every builder returns text (or adds events to a :class:`Scenario`) in either the ``old``
(PyTorch <= 2.2) or ``new`` (2.3+) wording, picked from ``sc.msg_version``. Paths, pids
and hosts come from the scenario so they are consistent inside one incident.
"""

from __future__ import annotations

from collections.abc import Sequence

from denpex_ml.synthetic.scenario import Scenario

__all__ = [
    "Frame",
    "c10_header",
    "downstream",
    "elastic_teardown",
    "native_frames",
    "nccl_prefix",
    "rank_tag",
    "traceback",
    "watchdog_timeout",
]

Frame = tuple[str, int, str, str]
"""(file, line, function, source line); a file starting with ``sp:`` lives in site-packages."""

_OLD_WD_LINES = (467, 474, 475, 523, 587, 737, 828)
_NEW_WD_LINES = (616, 632, 609)


def rank_tag(rank: int) -> str:
    """The ``[rankN]:`` tag that PyTorch 2.3+ puts in front of its c10 log lines."""
    return f"[rank{rank}]:"


def c10_header(sc: Scenario, rank: int, t: float, level: str, where: str) -> str:
    """``[E ProcessGroupNCCL.cpp:475]`` (old) or ``[rank3]:[E419 10:42:28.858931807 ...]`` (new)."""
    if sc.old:
        return f"[{level} {where}]"
    ts = sc.when(t)
    ns = sc.rng.randrange(10**9)
    return f"{rank_tag(rank)}[{level}{ts.month}{ts.day:02d} {ts:%H:%M:%S}.{ns:09d} {where}]"


def nccl_prefix(sc: Scenario, rank: int, tid_offset: int = 0) -> str:
    """NCCL's ``host:pid:tid [localrank]`` line prefix."""
    pid = sc.pid(rank)
    return f"{sc.host(rank)}:{pid}:{pid + 97 + tid_offset + sc.local_of(rank) * 3} [{sc.local_of(rank)}]"


def traceback(sc: Scenario, frames: Sequence[Frame], exc: str, *, source_p: float | None = None) -> str:
    """A Python traceback; source lines are often stripped, as in pasted real logs."""
    if source_p is None:
        source_p = 0.35
    with_source = sc.chance(source_p)
    carets = sc.env.minor >= 11 and not with_source and sc.chance(0.3)
    out = ["Traceback (most recent call last):"]
    for file, line, func, src in frames:
        path = sc.env.sp(file[3:]) if file.startswith("sp:") else (sc.env.script if file == "<script>" else file)
        out.append(f'  File "{path}", line {line}, in {func}')
        if with_source and src:
            out.append(f"    {src}")
        elif carets and src and sc.chance(0.3):
            out.append(" " * sc.rng.randint(8, 14) + "^" * max(5, min(40, len(src) - 6)))
    out.append(exc)
    return "\n".join(out)


def native_frames(sc: Scenario, top: str, count: int = 6) -> str:
    """``frame #N: symbol + 0x.. (0x7f.. in .../libtorch_cuda.so)`` lines of a c10 exception."""
    lib = sc.env.sp("torch/lib")
    syms = [
        ("c10::Error::Error(c10::SourceLocation, std::string)", "libc10.so"),
        (top, "libtorch_cuda.so"),
        ("c10d::ProcessGroupNCCL::watchdogHandler()", "libtorch_cuda.so"),
        ("c10d::ProcessGroupNCCL::ncclCommWatchdog()", "libtorch_cuda.so"),
        ("<unknown function>", "libstdc++.so.6"),
        ("<unknown function>", "libc.so.6"),
        ("clone", "libc.so.6"),
    ]
    base = 0x7F0000000000 + sc.rng.randrange(0xFFFFFFFF) * 0x1000
    out = []
    for i, (sym, so) in enumerate(syms[:count]):
        where = f"{lib}/{so}" if so in ("libc10.so", "libtorch_cuda.so") else f"/lib/x86_64-linux-gnu/{so}"
        out.append(
            f"frame #{i}: {sym} + 0x{sc.rng.randrange(0x20, 0x400):x} (0x{base + sc.rng.randrange(0xFFFFFF):x} in {where})"
        )
    return "\n".join(out)


def _work(sc: Scenario, seq: int | None, op: str, numel_in: int | None, numel_out: int | None, timeout_ms: int) -> str:
    parts = []
    if seq is not None:
        parts.append(f"SeqNum={seq}")
    parts.append(f"OpType={op}")
    if numel_in is not None and numel_out is not None:
        parts.append(f"NumelIn={numel_in}")
        parts.append(f"NumelOut={numel_out}")
    parts.append(f"Timeout(ms)={timeout_ms}")
    return f"WorkNCCL({', '.join(parts)})"


def watchdog_timeout(
    sc: Scenario,
    rank: int,
    t: float,
    *,
    seq: int,
    op: str,
    numel_in: int,
    numel_out: int,
    timeout_ms: int,
    role: str = "symptom",
    last_enqueued: int | None = None,
    pg: tuple[int, int] = (0, 0),
    verbose: bool | None = None,
    group_rank: int | None = None,
) -> None:
    """The watchdog-timeout message family printed by a rank left waiting in a collective
    (with the gloo backend: gloo's transport timeout, as a traceback or a bare error)."""
    rng = sc.rng
    grank = rank if group_rank is None else group_rank
    if sc.backend == "gloo":
        where = rng.choice(("unbound_buffer.cc:81", "unbound_buffer.cc:78", "pair.cc:598"))
        direction = "send" if op.upper() == "SEND" else "recv"
        err = (
            f"RuntimeError: [{rng.choice(('/pytorch', '../', '/__w/pytorch/pytorch/'))}third_party/gloo/gloo/transport/tcp/{where}] "
            f"Timed out waiting {timeout_ms}ms for {direction} operation to complete"
        )
        call = {"BARRIER": "barrier", "BROADCAST": "broadcast", "SEND": "send", "RECV": "recv"}.get(
            op.upper(), "all_reduce"
        )
        text = traceback(
            sc,
            [
                ("sp:torch/distributed/c10d_logger.py", 81, "wrapper", "return func(*args, **kwargs)"),
                ("sp:torch/distributed/distributed_c10d.py", rng.randint(2000, 4700), call, "work.wait()"),
            ],
            err,
        )
        sc.emit(rank, t, text if rng.random() < 0.7 else err, role)
        return
    ran = timeout_ms + rng.randint(5, 900)
    short = sc.old and rng.random() < 0.25  # torch 1.x printed no SeqNum/Numel
    work = _work(sc, None if short else seq, op, None if short else numel_in, None if short else numel_out, timeout_ms)
    msg = f"[Rank {grank}] Watchdog caught collective operation timeout: {work} ran for {ran} milliseconds before timing out."
    verbose = rng.random() < 0.6 if verbose is None else verbose
    if sc.old:
        ln = rng.choice(_OLD_WD_LINES)
        lines = [f"{c10_header(sc, rank, t, 'E', f'ProcessGroupNCCL.cpp:{ln}')} {msg}"]
        if verbose:
            lines.append(
                f"{c10_header(sc, rank, t, 'E', f'ProcessGroupNCCL.cpp:{ln + 14}')} Some NCCL operations have failed or timed out. "
                "Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data."
            )
            lines.append(
                f"{c10_header(sc, rank, t, 'E', f'ProcessGroupNCCL.cpp:{ln + 20}')} To avoid data inconsistency, we are taking the entire process down."
            )
            lines.append("terminate called after throwing an instance of 'std::runtime_error'")
            lines.append(f"  what():  {msg}")
        sc.emit(rank, t, "\n".join(lines), role)
        return
    pgname = "0(default_pg)" if pg == (0, 0) else str(pg[1])
    pgtag = f"[PG ID {pg[0]} PG GUID {pgname} Rank {grank}]"
    ln = rng.choice(_NEW_WD_LINES)
    lines = [f"{c10_header(sc, rank, t, 'E', f'ProcessGroupNCCL.cpp:{ln}')} {msg}"]
    enq = seq if last_enqueued is None else last_enqueued
    lines.append(
        f"{c10_header(sc, rank, t, 'E', 'ProcessGroupNCCL.cpp:1785')} {pgtag} Exception (either an error or timeout) detected by watchdog at work: "
        f"{seq}, last enqueued NCCL work: {enq}, last completed NCCL work: {seq - 1}."
    )
    if verbose:
        lines.append(
            f"{c10_header(sc, rank, t, 'E', 'ProcessGroupNCCL.cpp:630')} [Rank {grank}] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data."
        )
        lines.append(
            f"{c10_header(sc, rank, t, 'E', 'ProcessGroupNCCL.cpp:636')} [Rank {grank}] To avoid data inconsistency, we are taking the entire process down."
        )
        lines.append(
            f"{c10_header(sc, rank, t, 'E', 'ProcessGroupNCCL.cpp:1595')} {pgtag} Process group watchdog thread terminated with exception: {msg}"
        )
        lines.append(
            "Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:618 (most recent call first):"
        )
        lines.append(
            native_frames(
                sc,
                "c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, std::ratio<1l, 1000l> > >)",
                rng.randint(3, 7),
            )
        )
        lines.append("")
        lines.append("terminate called after throwing an instance of 'c10::DistBackendError'")
        lines.append(f"  what():  {pgtag} Process group watchdog thread terminated with exception: {msg}")
    sc.emit(rank, t, "\n".join(lines), role)


def heartbeat_abort(sc: Scenario, rank: int, t: float, *, role: str = "symptom", seconds: int = 480) -> None:
    """The 2.3+ heartbeat monitor abort (``watchdog got stuck``)."""
    tag = f"[PG ID 0 PG GUID 0(default_pg) Rank {rank}]"
    lines = [
        f"{c10_header(sc, rank, t, 'E', 'ProcessGroupNCCL.cpp:1316')} {tag} Heartbeat monitor timed out! Process will be terminated after dumping debug info. workMetaList_.size()={sc.rng.randint(1, 9)}",
        f"{c10_header(sc, rank, t, 'E', 'ProcessGroupNCCL.cpp:1153')} {tag} ProcessGroupNCCL preparing to dump debug info.",
        f"{c10_header(sc, rank, t, 'F', 'ProcessGroupNCCL.cpp:1169')} {tag} {tag} ProcessGroupNCCL's watchdog got stuck for {seconds} seconds without making "
        "progress in monitoring enqueued collectives. This typically indicates a NCCL/CUDA API hang blocking the watchdog, and could be triggered by "
        "another thread holding the GIL inside a CUDA api, or other deadlock-prone behaviors.",
    ]
    sc.emit(rank, t, "\n".join(lines), role)


def remote_error(sc: Scenario, rank: int, t: float, peer_rank: int, *, role: str = "symptom") -> None:
    """A surviving rank's NCCL error after its peer process vanished (connection reset)."""
    rng = sc.rng
    peer_ip = sc.ip(sc.node_of(peer_rank))
    nccl_v = (
        rng.choice(("2.18.5", "2.19.3", "2.20.5", "2.21.5"))
        if not sc.old
        else rng.choice(("2.10.3", "2.14.3", "2.18.1"))
    )
    variant = rng.randrange(3)
    if variant == 0:
        text = (
            f"{nccl_prefix(sc, rank, 5)} include/socket.h:409 NCCL WARN Net : Connection closed by remote peer {peer_ip}<{rng.randint(30000, 60000)}>\n"
            f"{nccl_prefix(sc, rank, 5)} NCCL INFO transport/net_socket.cc:493 -> 6"
        )
    elif variant == 1:
        frames: list[Frame] = [
            (
                "sp:torch/nn/parallel/distributed.py",
                1523,
                "forward",
                "inputs, kwargs = self._pre_forward(*inputs, **kwargs)",
            ),
            ("sp:torch/distributed/distributed_c10d.py", 2050, "all_reduce", "work = group.allreduce([tensor], opts)"),
        ]
        exc = (
            f"torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, remote process exited or there was a network error, NCCL version {nccl_v}\n"
            "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.\n"
            "Last error:\n"
            f"socketProgressOpt: Call to recv from {peer_ip}<{rng.randint(30000, 60000)}> failed : Connection reset by peer"
        )
        text = traceback(sc, frames, exc)
    else:
        text = f"{nccl_prefix(sc, rank, 5)} misc/socket.cc:538 NCCL WARN Net : Call to recv from {peer_ip}<{rng.randint(30000, 60000)}> failed : Connection reset by peer"
    sc.emit(rank, t, text, role)


def downstream(
    sc: Scenario,
    t_fail: float,
    *,
    op: str | None = None,
    numel: int | None = None,
    seq: int | None = None,
    timeout_ms: int | None = None,
    mode: str | None = None,
    ranks: Sequence[int] | None = None,
) -> float:
    """Consequences on the waiting ranks after the initiator stopped at ``t_fail``.

    ``mode`` is one of ``watchdog`` (timeouts), ``reset`` (connection reset / remote
    error), ``heartbeat`` (2.3+ only) or ``mixed``. Returns the time the last waiting rank
    gave up, so the caller can place the launcher's teardown after it.
    """
    rng = sc.rng
    waiting = list(ranks) if ranks is not None else sc.victims()
    if not waiting:
        return t_fail + 1.0
    timeout_ms = timeout_ms or rng.choice((600000, 1800000, 1800000, 1800000, 7200000, 300000))
    op = op or rng.choice(
        ("ALLREDUCE", "ALLREDUCE", "_ALLGATHER_BASE", "_REDUCE_SCATTER_BASE", "BROADCAST", "ALLTOALL_BASE")
    )
    seq = seq or rng.randint(20, 600000)
    numel = numel or rng.choice((1, 6, 1024, 2359296, 126834688, 46684160, 5164000))
    modes = ("watchdog", "reset", "mixed") + (() if sc.old else ("heartbeat",))
    mode = mode or rng.choice(modes)
    t_end = t_fail
    for r in waiting:
        t = t_fail + timeout_ms / 1000.0 + sc.jitter(2.0)
        m = mode if mode != "mixed" else rng.choice(("watchdog", "reset"))
        if m == "reset" and sc.initiator is not None:
            t = t_fail + sc.jitter(8.0) + 0.5
            remote_error(sc, r, t, sc.initiator)
        elif m == "heartbeat":
            heartbeat_abort(sc, r, t)
        else:
            n_in = numel
            n_out = numel * (sc.n_ranks if "GATHER" in op else 1)
            watchdog_timeout(
                sc,
                r,
                t,
                seq=seq,
                op=op,
                numel_in=n_in,
                numel_out=n_out,
                timeout_ms=timeout_ms,
                last_enqueued=seq + rng.randint(0, 3),
            )
        t_end = max(t_end, t)
    return t_end


_SIGNALS = {
    -6: "Signal 6 (SIGABRT)",
    -9: "Signal 9 (SIGKILL)",
    -11: "Signal 11 (SIGSEGV)",
    -7: "Signal 7 (SIGBUS)",
    -15: "Signal 15 (SIGTERM)",
}


def elastic_teardown(
    sc: Scenario, t: float, failed: Sequence[tuple[int, int]], *, root_rank: int | None = None
) -> None:
    """torchelastic's agent lines and ChildFailedError summary on the first visible node.

    ``failed`` lists (rank, exitcode). The "Root Cause (first observed failure)" entry is
    chosen as real agents do: often rank 0 or a waiting rank, not the true initiator.
    """
    if not failed:
        return
    rng = sc.rng
    node = sc.node_of(failed[0][0])
    on_node = [(r, c) for r, c in failed if sc.node_of(r) == node] or list(failed[:1])
    if root_rank is None:
        root_rank = min(r for r, _ in on_node) if rng.random() < 0.6 else on_node[0][0]
    root = next(((r, c) for r, c in failed if r == root_rank), on_node[0])
    binary = sc.env.python
    lines_api = "torch.distributed.elastic.multiprocessing.api"
    first_fail = on_node[0]
    for r, _ in on_node[1:] if rng.random() < 0.7 else []:
        pid = sc.pid(r)
        if sc.old:
            sc.agent(node, t, f"WARNING:{lines_api}:Sending process {pid} closing signal SIGTERM")
        else:
            sc.agent(
                node,
                t,
                f"W{sc.when(t):%m%d %H:%M:%S}.{rng.randrange(10**6):06d} {sc.pid(0) - 60} torch/distributed/elastic/multiprocessing/api.py:897] Sending process {pid} closing signal SIGTERM",
            )
    code_r, code = first_fail
    msg = f"failed (exitcode: {code}) local_rank: {sc.local_of(code_r)} (pid: {sc.pid(code_r)}) of binary: {binary}"
    if sc.old:
        sc.agent(node, t + 0.5, f"ERROR:{lines_api}:{msg}")
    else:
        sc.agent(
            node,
            t + 0.5,
            f"E{sc.when(t):%m%d %H:%M:%S}.{rng.randrange(10**6):06d} {sc.pid(0) - 60} torch/distributed/elastic/multiprocessing/api.py:869] {msg}",
        )
    launcher = rng.choice(("torchrun", "torch/distributed/run.py", "torch/distributed/launch.py"))
    frames: list[Frame] = []
    if launcher == "torchrun":
        frames.append((sc.env.python.rsplit("/", 1)[0] + "/torchrun", 8, "<module>", "sys.exit(main())"))
    else:
        frames.append(("sp:" + launcher, rng.choice((193, 195, 198, 922)), "<module>", "main()"))
    frames += [
        (
            "sp:torch/distributed/elastic/multiprocessing/errors/__init__.py",
            rng.choice((345, 346, 355, 362)),
            "wrapper",
            "return f(*args, **kwargs)",
        ),
        ("sp:torch/distributed/run.py", rng.choice((794, 806, 918, 990)), "main", "run(args)"),
        ("sp:torch/distributed/run.py", rng.choice((785, 797, 909, 981)), "run", "elastic_launch("),
        (
            "sp:torch/distributed/launcher/api.py",
            rng.choice((134, 138, 143)),
            "__call__",
            "return launch_agent(self._config, self._entrypoint, list(args))",
        ),
        (
            "sp:torch/distributed/launcher/api.py",
            rng.choice((250, 269, 270)),
            "launch_agent",
            "raise ChildFailedError(",
        ),
    ]
    script = sc.env.script.rsplit("/", 1)[-1]
    table = [
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "=" * 60,
        f"{script} FAILED",
        "-" * 60,
        "Failures:",
    ]
    others = [(r, c) for r, c in on_node if r != root[0]][:4]
    if not others:
        table.append("  <NO_OTHER_FAILURES>")
    ts = f"{sc.when(t):%Y-%m-%d_%H:%M:%S}"

    def block(r: int, c: int) -> list[str]:
        tb = (
            f"{_SIGNALS[c]} received by PID {sc.pid(r)}"
            if c in _SIGNALS
            else "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"
        )
        return [
            f"[{r - node * sc.gpus_per_node}]:" if rng.random() < 0.5 else f"[{sc.local_of(r)}]:",
            f"  time      : {ts}",
            f"  host      : {sc.host(r)}",
            f"  rank      : {r} (local_rank: {sc.local_of(r)})",
            f"  exitcode  : {c} (pid: {sc.pid(r)})",
            "  error_file: <N/A>",
            f"  traceback : {tb}",
        ]

    for r, c in others:
        table += block(r, c)
    table += ["-" * 60, "Root Cause (first observed failure):"]
    table += block(*root)
    table.append("=" * 60)
    sc.agent(node, t + 1.0, traceback(sc, frames, "\n".join(table), source_p=0.3))


def signal_exit_code(kind: str) -> int:
    """Exit code torchelastic reports for a process that died of ``kind``."""
    return {"abort": -6, "kill": -9, "segv": -11, "bus": -7, "error": 1}[kind]
