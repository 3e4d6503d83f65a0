"""Recipes for NCCL transport failures: inter-node network, initialisation, intra-node shm/P2P."""

from __future__ import annotations

from denpex_ml.synthetic.fragments import nccl_prefix, traceback
from denpex_ml.synthetic.recipes.base import Recipe, crash_with_fallout, script_frames, teardown
from denpex_ml.synthetic.recipes.hang_frames import hang_timeouts
from denpex_ml.synthetic.scenario import Scenario

__all__ = ["RECIPES"]


def _network(sc: Scenario) -> None:
    v = sc.pick_variant(("ib-error12", "port-error", "socket-reset", "catastrophic"))
    rng = sc.rng
    init = sc.initiator or 0
    t = rng.uniform(3600, 300000)
    sc.fail_time = t
    peer = sc.ip((sc.node_of(init) + 1) % max(2, len(sc.nodes) + 1))
    p = nccl_prefix(sc, init, 20)
    dev = f"mlx5_{rng.randint(0, 7)}"
    if v == "port-error":
        same_node = [r for r in sc.visible if sc.node_of(r) == sc.node_of(init)]
        for r in same_node:
            sc.emit(
                r,
                t + sc.jitter(0.05),
                f"{nccl_prefix(sc, r, 20)} transport/net_ib.cc:{rng.choice((93, 199))} NCCL WARN NET/IB : {dev}:1 Got async event : port error",
                "root" if r == init else "symptom",
            )
    elif v == "catastrophic":
        sc.root(
            init,
            t,
            f"{p} transport/net_ib.cc:80 NCCL WARN NET/IB : Got async event : local catastrophic error\n{p} misc/ibvwrap.cc:220 NCCL WARN Call to ibv_get_async_event failed",
        )
    text = {
        "ib-error12": f"{p} transport/net_ib.cc:{rng.choice((1295, 1696))} NCCL WARN NET/IB : Got completion from peer {peer}<{rng.randint(30000, 60000)}> with error 12, opcode {rng.choice((0, 1, 32616))}, len 0, vendor err 129 (Recv) localGid ::ffff:{sc.ip(sc.node_of(init))} remoteGid ::ffff:{peer}",
        "port-error": f"{p} NCCL INFO transport/net.cc:1302 -> 6",
        "catastrophic": f"{p} NCCL INFO proxy.cc:878 -> 6 [Progress Thread]",
        "socket-reset": f"{p} include/socket.h:398 NCCL WARN Call to recv failed : Connection reset by peer\n{p} transport.cu:153 NCCL WARN transport.cu:153 ->2 [Proxy thread error]",
    }[v]
    if v == "ib-error12":
        sc.context(
            None,
            t - rng.uniform(1, 60),
            f"[{rng.uniform(1e5, 9e6):.6f}] mlx5_core 0000:{rng.randint(16, 250):02x}:00.0 {dev}: Port module event: module 0, Cable unplugged"
            if rng.random() < 0.4
            else f"[{rng.uniform(1e5, 9e6):.6f}] mlx5_core 0000:{rng.randint(16, 250):02x}:00.0: {dev}:1 link down",
            node=sc.node_of(init),
        )
    exc = (
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, remote process exited or there was a network error, NCCL version 2.21.5\n"
        "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.\nLast error:\n"
        f"NET/IB : Got completion from peer {peer}<{rng.randint(30000, 60000)}> with error 12, opcode 0, len 0, vendor err 129"
    )
    extra = (
        [
            traceback(
                sc,
                script_frames(
                    sc,
                    (
                        "sp:torch/distributed/distributed_c10d.py",
                        2050,
                        "all_reduce",
                        "work = group.allreduce([tensor], opts)",
                    ),
                ),
                exc,
            )
        ]
        if sc.chance(0.4)
        else []
    )
    crash_with_fallout(
        sc, t + 0.2, text, exitcode=-6, extra_root=extra, mode=rng.choice(("watchdog", "reset", "mixed"))
    )


def _init(sc: Scenario) -> None:
    v = sc.pick_variant(("no-socket-iface", "connect-refused", "client-timeout", "store-barrier", "rendezvous-timeout"))
    rng = sc.rng
    init = sc.initiator or 0
    t = rng.uniform(2, 1900)
    sc.fail_time = t
    p = nccl_prefix(sc, init)
    if v == "no-socket-iface":
        sc.context(init, 1, f"NCCL_SOCKET_IFNAME={rng.choice(('eth1', 'ib0', 'enp1s0'))}")
        text = f"{p} bootstrap.cc:{rng.choice((37, 55))} NCCL WARN Bootstrap : no socket interface found\n{p} NCCL INFO init.cc:128 -> 3\n{p} NCCL INFO bootstrap.cc:76 -> 3"
        exc = "ncclInternalError: Internal check failed.\nLast error:\nBootstrap : no socket interface found"
    elif v == "connect-refused":
        text = f"{p} misc/socket.cc:{rng.choice((484, 567))} NCCL WARN socketStartConnect: Connect to {sc.ip(0)}<{rng.randint(30000, 60000)}> failed : {rng.choice(('Connection refused', 'No route to host', 'Connection timed out'))}"
        exc = "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.\nLast error:\nsocketStartConnect: Connect to 10.0.0.1 failed"
    elif v == "client-timeout":
        text = (
            f"torch.distributed.DistNetworkError: The client socket has timed out after 1800s while trying to connect to ({sc.ip(0)}, 29500)."
            if not sc.old
            else "RuntimeError: connect() timed out. Original timeout was 1800000 ms."
        )
        exc = ""
    elif v == "store-barrier":
        text = f"RuntimeError: Timed out initializing process group in store based barrier on rank: {init}, for key: store_based_barrier_key:1 (world_size={sc.n_ranks}, worker_count={max(1, sc.n_ranks - sc.gpus_per_node)}, timeout=0:30:00)"
        exc = ""
    else:
        text = "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError"
        exc = ""
    if exc:
        full = traceback(
            sc,
            script_frames(
                sc,
                (
                    "sp:torch/distributed/distributed_c10d.py",
                    2726,
                    "broadcast",
                    "work = group.broadcast([tensor], opts)",
                ),
            ),
            f"torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, internal error, NCCL version 2.21.5\n{exc}",
        )
        crash_with_fallout(sc, t, text, extra_root=[full], mode="reset")
        return
    frames = script_frames(
        sc,
        ("sp:torch/distributed/c10d_logger.py", 79, "wrapper", "return func(*args, **kwargs)"),
        (
            "sp:torch/distributed/distributed_c10d.py",
            1520,
            "init_process_group",
            "store, rank, world_size = next(rendezvous_iterator)",
        ),
    )
    sc.root(init, t, traceback(sc, frames, text))
    for r in sc.others(4):
        if sc.chance(0.5):
            sc.symptom(r, t + sc.jitter(2), traceback(sc, frames, text.replace(f"rank: {init}", f"rank: {r}")))
    teardown(sc, t + 3, [(init, 1)] + [(r, 1) for r in sc.others(3)])


def _shm_p2p(sc: Scenario) -> None:
    v = sc.pick_variant(("shm-segment", "bus-error-signal", "p2p-hang"))
    rng = sc.rng
    init = sc.initiator or 0
    p = nccl_prefix(sc, init)
    if v == "p2p-hang":
        sc.set_initiator(None)
        t = rng.uniform(20, 120)
        sc.fail_time = t
        sc.context(
            None, 1, "ACSCtl: SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-", node=0
        )
        for r in sc.visible[:8]:
            sc.context(
                r,
                t - 5,
                f"{nccl_prefix(sc, r)} NCCL INFO Channel 00/0 : {r}[4f000] -> {(r + 1) % sc.n_ranks}[52000] via P2P/IPC/read",
            )
        timeout = rng.choice((600000, 1800000))
        hang_timeouts(sc, t, sc.visible, 1, "ALLREDUCE", 1, timeout)
        teardown(sc, t + timeout / 1000 + 2, [(r, -6) for r in sc.visible[:4]])
        return
    t = rng.uniform(10, 90000)
    if v == "shm-segment":
        size = rng.choice((9637888, 33554432, 4194304))
        text = f"{p} include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on device\n{p} include/shm.h:48 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-{rng.randrange(16**6):06x} (size {size})"
        sc.context(
            None,
            1,
            "shm                                                64M     0   64M   0% /dev/shm",
            node=sc.node_of(init),
        )
    else:
        text = (
            f"[{sc.host(init)}:{sc.pid(init)}:0:{sc.pid(init) + 400}] Caught signal 7 (Bus error: nonexistent physical address)\n==== backtrace (tid: {sc.pid(init) + 400}) ====\n"
            " 0 0x0000000000043090 killpg()  ???:0\n 1 0x000000000008170d ncclGroupEnd()  ???:0\n 2 0x00000000000742f0 ncclGroupEnd()  ???:0\n 3 0x0000000000008609 start_thread()  ???:0\n"
            "================================="
        )
    crash_with_fallout(sc, t, text, exitcode=-7)


RECIPES = (
    Recipe(
        "nccl-network-error", "comm", _network, ("NET/IB : Got completion from peer 10.0.0.2<43211> with error 12",)
    ),
    Recipe(
        "nccl-init-failure",
        "comm",
        _init,
        ("socketStartConnect: Connect to 10.0.0.1<43211> failed : Connection refused",),
    ),
    Recipe(
        "nccl-shm-p2p-failure",
        "comm",
        _shm_p2p,
        ("Error while creating shared memory segment /dev/shm/nccl-a1b2c3 (size 9637888)",),
    ),
)
