"""Recipes for mixture-of-experts failures from the seed documents.

All three share the loud symptom (ALLTOALL / all-gather watchdog timeouts); what tells
them apart is quiet: a Megatron argument (``overlap_moe_expert_parallel_comm``,
``pipeline_model_parallel_layout``), per-rank SeqNum/op patterns, DeepEP receiver
timeouts on a large NVLink domain.
"""

from __future__ import annotations

from denpex_ml.synthetic.background import megatron_args
from denpex_ml.synthetic.fragments import nccl_prefix, watchdog_timeout
from denpex_ml.synthetic.recipes.base import Recipe, teardown
from denpex_ml.synthetic.recipes.hang_frames import hang_timeouts
from denpex_ml.synthetic.scenario import Scenario

__all__ = ["RECIPES"]


def _ep_overlap(sc: Scenario) -> None:
    v = sc.pick_variant(("two-pg-timeouts", "nccl-send-failed", "order-mismatch"))
    rng = sc.rng
    init = sc.initiator or 0
    megatron_args(
        sc,
        1,
        {
            "overlap_moe_expert_parallel_comm": True,
            "expert_model_parallel_size": rng.choice((4, 8, 16)),
            "num_experts": rng.choice((64, 128, 256)),
            "moe_token_dispatcher_type": rng.choice(("alltoall", "flex")),
        },
    )
    t = rng.uniform(300, 50000)
    sc.fail_time = t
    timeout = rng.choice((600000, 1800000))
    seq = rng.randint(100, 90000)
    numel = rng.choice((1621248, 1572864, 46684160))
    hang_timeouts(sc, t, sc.others(), seq, "ALLTOALL_BASE", numel, timeout, enq=seq + rng.randint(2, 9))
    tw = t + timeout / 1000 + sc.jitter()
    if v == "two-pg-timeouts" and not sc.old:
        watchdog_timeout(
            sc,
            init,
            tw,
            seq=seq,
            op="ALLTOALL_BASE",
            numel_in=numel,
            numel_out=numel - rng.randint(1, 9999),
            timeout_ms=timeout,
            pg=(11, 117),
            role="symptom",
            verbose=False,
        )
        watchdog_timeout(
            sc,
            init,
            tw + 0.06,
            seq=rng.randint(20, 200),
            op="_ALLGATHER_BASE",
            numel_in=32,
            numel_out=64,
            timeout_ms=timeout,
            pg=(13, 141),
            role="root",
            verbose=False,
        )
    elif v == "nccl-send-failed":
        p = nccl_prefix(sc, init, 30)
        sc.root(
            init,
            t,
            f"{p} transport/net.cc:{rng.choice((1184, 1302))} NCCL WARN [send] via NET/IB/0/GDRDMA failed\n{p} NCCL INFO Call to ncclAllGather failed",
        )
        watchdog_timeout(
            sc,
            init,
            tw,
            seq=seq,
            op="_ALLGATHER_BASE",
            numel_in=32,
            numel_out=64,
            timeout_ms=timeout,
            role="symptom",
            verbose=False,
        )
    else:
        watchdog_timeout(
            sc,
            init,
            tw,
            seq=seq,
            op="_ALLGATHER_BASE",
            numel_in=rng.randint(16, 4096),
            numel_out=rng.randint(4096, 65536),
            timeout_ms=timeout,
            role="root",
            verbose=False,
        )
    teardown(sc, tw + 2, [(r, -6) for r in sc.visible[:6]])


def _pp_layout(sc: Scenario) -> None:
    v = sc.pick_variant(("after-first-forward", "aux-loss-logging", "faulthandler-stack"))
    rng = sc.rng
    pp = rng.choice((2, 4, 8))
    layout = rng.choice(("Et|(tt|)*6mL", "Ettt|tttt|tttt|tL", "E|t*8|t*8|L", "Et*2|(t|)*14L"))
    megatron_args(
        sc,
        1,
        {
            "pipeline_model_parallel_size": pp,
            "pipeline_model_parallel_layout": layout,
            "num_experts": rng.choice((8, 16, 64)),
            "moe_layer_freq": "([0]*3+[1]*21)",
            "moe_aux_loss_coeff": 0.01,
        },
    )
    init = sc.initiator or 0
    t = rng.uniform(60, 900) if v != "aux-loss-logging" else rng.uniform(900, 9000)
    sc.fail_time = t
    sc.context(
        init,
        5,
        f" > number of parameters on (tensor, pipeline) model parallel rank (0, {rng.randint(0, pp - 1)}): {rng.randint(10**8, 9 * 10**8)}",
    )
    timeout = rng.choice((600000, 1800000))
    seq = rng.randint(3, 40)
    nl = rng.choice((24, 32, 48))
    hang_timeouts(sc, t, sc.others(), seq, "ALLREDUCE", nl, timeout)
    watchdog_timeout(
        sc,
        init,
        t + timeout / 1000 + sc.jitter(),
        seq=seq + 1,
        op=rng.choice(("RECV", "SEND", "COALESCED")),
        numel_in=4 * 4096 * 4096,
        numel_out=4 * 4096 * 4096,
        timeout_ms=timeout,
        role="root",
        verbose=False,
    )
    if v == "faulthandler-stack":
        victim = sc.others(1)[0] if sc.others() else init
        stack = (
            f"Fatal Python error: Aborted\n\nThread 0x{rng.randrange(16**12):012x} (most recent call first):\n"
            f'  File "{sc.env.sp("torch/distributed/distributed_c10d.py")}", line 2288 in all_reduce\n'
            '  File "/workspace/Megatron-LM/megatron/core/transformer/moe/moe_utils.py", line 563 in reduce_aux_losses_tracker_across_ranks\n'
            '  File "/workspace/Megatron-LM/megatron/training/training.py", line 1205 in training_log'
        )
        sc.symptom(victim, t + timeout / 1000 + 2, stack)
    teardown(sc, t + timeout / 1000 + 3, [(r, -6) for r in sc.visible[:6]])


def _nvl_domain(sc: Scenario) -> None:
    v = sc.pick_variant(("deepep-nvl-receiver", "deepep-cpu-timeout", "nccl-alltoall-only"))
    rng = sc.rng
    sc.set_initiator(None)
    t = rng.uniform(600, 90000)
    sc.fail_time = t
    nranks = sc.n_ranks
    for r in sc.visible[:2]:
        sc.context(
            r,
            10,
            f"{nccl_prefix(sc, r)} NCCL INFO comm 0x{rng.randrange(16**8):08x} rank {r} nRanks {nranks} nNodes {max(1, nranks // 4)} localRanks 4 localRank {r % 4} MNNVL 1",
        )
    sc.context(
        sc.visible[0],
        11,
        f"{nccl_prefix(sc, sc.visible[0])} NCCL INFO MNNVL busId 0x19000 fabric UUID {rng.randrange(16**16):016x}.{rng.randrange(16**16):016x} cliqueId 0x1 state 3 healthMask 0x0",
    )
    phase = rng.choice(("dispatch", "combine"))
    if v == "deepep-nvl-receiver":
        for r in sc.visible[:6]:
            lines = [
                f"DeepEP {phase} NVL receiver timeout, channel: {rng.randint(0, 23)}, RDMA: {r // 8}, nvl: {r % 8}, src RDMA: {rng.randint(0, 1)}, src nvl: {rng.randint(0, 7)}, start: 0, end: 0"
                for _ in range(rng.randint(2, 5))
            ]
            sc.symptom(r, t + sc.jitter(1), "\n".join(lines))
    elif v == "deepep-cpu-timeout":
        for r in sc.visible[:6]:
            sc.symptom(
                r,
                t + sc.jitter(1),
                f"RuntimeError: DeepEP error: timeout ({phase} CPU)\n"
                + "\n".join(
                    f"DeepEP timeout check failed: rank = {r}, thread = {i}, value = {rng.choice((0, 1024))})"
                    for i in range(rng.randint(2, 6))
                ),
            )
    timeout = rng.choice((600000, 1800000))
    seq = rng.randint(100, 90000)
    hang_timeouts(
        sc,
        t,
        sc.visible,
        seq,
        rng.choice(("ALLTOALL", "ALLTOALL_BASE")),
        rng.choice((46684160, 1572864)),
        timeout,
        enq=seq,
    )
    teardown(sc, t + timeout / 1000 + 2, [(r, -6) for r in sc.visible[:6]])


RECIPES = (
    Recipe("moe-ep-overlap-deadlock", "moe", _ep_overlap, ("NCCL WARN [send] via NET/IB/0/GDRDMA failed",)),
    Recipe("moe-pp-layout-aux-loss-hang", "moe", _pp_layout),
    Recipe(
        "moe-alltoall-nvlink-domain-timeout",
        "moe",
        _nvl_domain,
        ("DeepEP dispatch NVL receiver timeout, channel: 3, RDMA: 0, nvl: 6",),
    ),
)
