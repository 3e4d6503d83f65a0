"""Recipes for distributed hangs and deadlocks: the evidence is in SeqNums, ops, sizes and quiet lines."""

from __future__ import annotations

from denpex_ml.synthetic.fragments import traceback, watchdog_timeout
from denpex_ml.synthetic.recipes.base import Recipe, crash_with_fallout, script_frames
from denpex_ml.synthetic.recipes.hang_frames import hang_end, hang_timeouts, phase_hang
from denpex_ml.synthetic.scenario import Scenario

__all__ = ["RECIPES"]

_OPS = ("ALLREDUCE", "_ALLGATHER_BASE", "BROADCAST", "_REDUCE_SCATTER_BASE", "ALLGATHER", "REDUCE")
_FP = "TensorDeviceTypes=TensorOptions(dtype=float (default), device=cuda, layout=Strided (default), requires_grad=false (default), pinned_memory=false (default), memory_format=(nullopt))"


def _mismatch(sc: Scenario) -> None:
    v = sc.pick_variant(("detail-fingerprint", "seqnum-op", "seqnum-size", "metrics-sync-frames"))
    rng = sc.rng
    init = sc.initiator or 0
    if v == "metrics-sync-frames":
        phase_hang(
            sc,
            waiting_phase="metrics-sync",
            waiting_call="all_reduce",
            op="ALLREDUCE",
            suspect_phase="metrics-sync",
            suspect_call="broadcast",
            suspect_op=rng.choice(("BROADCAST", "ALLGATHER")),
        )
        return
    t = rng.uniform(100, 60000)
    sc.fail_time = t
    seq = rng.randint(5, 4_000_000)
    op, odd_op = rng.sample(
        ("ALLTOALL_BASE", "ALLREDUCE", "BROADCAST", "_ALLGATHER_BASE", "REDUCE") if sc.hard_negative else _OPS, 2
    )
    timeout = rng.choice((600000, 1800000))
    if v == "detail-fingerprint":
        other = sc.others(1)[0] if sc.others() else 0
        shape = rng.choice(("[1]", "[6]", "[41, 256, 8]", "[4096]"))
        msg = (
            f"RuntimeError: Detected mismatch between collectives on ranks. Rank {init} is running collective: CollectiveFingerPrint(SequenceNumber={seq}, OpType={odd_op}, TensorShape={shape}, "
            f"TensorDtypes=Float, {_FP}), but Rank {other} is running collective: CollectiveFingerPrint(SequenceNumber={seq}, OpType={op}, TensorShape={shape}, TensorDtypes=Float, {_FP})."
        )
        sc.context(0, 2, "TORCH_DISTRIBUTED_DEBUG=DETAIL")
        frames = script_frames(
            sc,
            ("sp:torch/distributed/c10d_logger.py", 47, "wrapper", "return func(*args, **kwargs)"),
            (
                "sp:torch/distributed/distributed_c10d.py",
                1906,
                "broadcast",
                "work = default_pg.broadcast([tensor], opts)",
            ),
        )
        crash_with_fallout(sc, t, traceback(sc, frames, msg))
        return
    numel = rng.choice((1, 6, 1024, 2359296, 5164000))
    others = sc.others()
    hang_timeouts(sc, t, others, seq, op, numel, timeout)
    odd_numel = numel if v == "seqnum-op" else numel * rng.choice((2, 3)) + rng.randint(1, 512)
    watchdog_timeout(
        sc,
        init,
        t + timeout / 1000 + sc.jitter(1.0),
        seq=seq,
        op=odd_op if v == "seqnum-op" else op,
        numel_in=odd_numel,
        numel_out=odd_numel,
        timeout_ms=timeout,
        role="root",
        verbose=False,
    )
    hang_end(sc, t + timeout / 1000, sc.visible)


def _subset(sc: Scenario) -> None:
    v = sc.pick_variant(
        ("seq-ahead", "desync-report", "horovod-missing", "rank0-save", "save-frames", "eval-frames", "uneven-end")
    )
    rng = sc.rng
    if v in ("save-frames", "eval-frames"):
        sc.set_initiator(0)
        phase = "checkpoint-save" if v == "save-frames" else "evaluation"
        phase_lines: tuple[str, ...] = (
            ("Saving model checkpoint to output/checkpoint-" + str(rng.randint(100, 9000)),)
            if v == "save-frames"
            else ("***** Running Evaluation *****", f"  Num examples = {rng.randint(100, 9000)}")
        )
        phase_hang(
            sc,
            waiting_phase="training-step",
            waiting_call="all_reduce",
            op="ALLREDUCE",
            suspect_phase=phase,
            suspect_call=rng.choice(("barrier", "all_gather", None)),
            activity=phase_lines,
            suspect_seq_delta=rng.choice((0, 1, 2)),
            suspect_op="_ALLGATHER_BASE",
        )
        return
    if v == "uneven-end":
        end = rng.choice(
            (
                f"{{'train_runtime': {rng.uniform(100, 90000):.1f}, 'train_samples_per_second': {rng.uniform(1, 90):.3f}, 'epoch': {rng.randint(1, 5)}.0}}",
                "Training completed. Do not forget to share your model on huggingface.co/models =)",
                f"Epoch {rng.randint(0, 9)}: 100%|##########| {rng.randint(100, 900)}/{rng.randint(100, 900)} [done]",
            )
        )
        phase_hang(
            sc,
            waiting_phase="training-step",
            waiting_call="all_reduce",
            op="ALLREDUCE",
            suspect_phase="end-of-training",
            suspect_call=None,
            activity=(end,),
        )
        return
    t = rng.uniform(100, 80000)
    sc.fail_time = t
    seq = rng.randint(10, 600000)
    timeout = rng.choice((600000, 1800000))
    if v in ("rank0-save", "desync-report") and sc.chance(0.7):
        sc.set_initiator(0)
    init = sc.initiator or 0
    op = "ALLTOALL" if sc.hard_negative else rng.choice(("ALLREDUCE", "BROADCAST", "_ALLGATHER_BASE"))
    if v == "horovod-missing":
        lines = [
            f"[{sc.when(t):%Y-%m-%d %H:%M:%S}.{rng.randrange(10**6):06d}: W horovod/common/operations.cc:588] HorovodBroadcast_{name}_0 [missing ranks: {init}]"
            for name in rng.sample(("dense_bias", "conv2d_kernel", "global_step", "dense_1_kernel_Momentum"), 3)
        ]
        lines.append(
            f"[{sc.when(t + 60):%Y-%m-%d %H:%M:%S}.{rng.randrange(10**6):06d}: W horovod/common/operations.cc:588] One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of ranks for more than 60 seconds. "
            "This may indicate that different ranks are trying to submit different tensors or that only subset of ranks is submitting tensors, which will cause deadlock."
        )
        sc.symptom(0 if init != 0 else sc.others(1)[0] if sc.others() else 0, t + 60, "\n".join(lines))
        sc.root(
            init, t - 5, f"rank {init}: reached end of data after {rng.randint(100, 9000)} steps; leaving training loop"
        )
        return
    if v == "rank0-save":
        sc.root(
            0,
            t,
            f"[{sc.when(t):%Y-%m-%d %H:%M:%S},{rng.randrange(1000):03d}] INFO     Saving DeepSpeed Model and Optimizer",
        )
        hang_timeouts(sc, t, sc.others(), seq, "ALLREDUCE", rng.choice((126834688, 1024)), timeout)
        hang_end(sc, t + timeout / 1000, sc.visible)
        return
    # the divergent ranks are one or two SeqNums ahead of the rest
    ahead = [init, *[r for r in sc.others() if sc.node_of(r) == sc.node_of(init)][: rng.randint(0, 2)]]
    behind = [r for r in sc.visible if r not in ahead]
    numel = rng.choice((1, 6, 1024, 46684160))
    gap = rng.randint(1, 2)
    hang_timeouts(sc, t, behind, seq, op, numel, timeout, enq=seq + rng.randint(0, 3))
    for r in ahead:
        watchdog_timeout(
            sc,
            r,
            t + timeout / 1000 + sc.jitter(1.0),
            seq=seq + gap,
            op=rng.choice(("BROADCAST", "_ALLGATHER_BASE", "ALLREDUCE")),
            numel_in=rng.randint(1, 600),
            numel_out=rng.randint(600, 2400),
            timeout_ms=timeout,
            role="root" if r == init else "symptom",
            verbose=False,
        )
    if v == "desync-report" and not sc.old:
        rep = (
            f"{'[rank0]:' if sc.launcher != 'torchrun' else ''}[E{sc.when(t).month}{sc.when(t).day:02d} {sc.when(t):%H:%M:%S}.{rng.randrange(10**9):09d} ProcessGroupNCCL.cpp:1937] Rank 0\n"
            f"         - [0] Timeout at collective: {op}, #{seq}\n"
            "         - To our best knowledge, the lagging/dead/mismatched ranks that caused the desync are:\n"
            f"             [{', '.join(map(str, behind[:6]))}] finished collective #{seq - 1}, but didn't join collective #{seq} (count from 1)"
        )
        sc.symptom(0, t + timeout / 1000 + 2, rep)
    hang_end(sc, t + timeout / 1000, sc.visible)


def _host_work(sc: Scenario) -> None:
    v = sc.pick_variant(("dataset-map", "checkpoint-save", "evaluation", "compile", "tokenize-frames", "save-frames"))
    rng = sc.rng
    if sc.chance(0.7):
        sc.set_initiator(0)
    if v == "tokenize-frames":
        n = rng.randint(1000, 9_000_000)
        frac = rng.uniform(0.2, 0.9)
        phase_hang(
            sc,
            waiting_phase="preprocessing",
            waiting_call="barrier",
            op="BARRIER" if sc.chance(0.3) else "ALLREDUCE",
            suspect_phase="preprocessing" if sc.chance(0.4) else None,
            suspect_call=None,
            seq=rng.randint(1, 3),
            activity=(
                f"{rng.choice(('Running tokenizer on dataset', 'Map', 'Tokenizing train dataset', 'Map (num_proc=8)'))}: "
                f"{int(frac * 100):>3}%|{'█' * int(frac * 10):<10}| {int(frac * n)}/{n} [{rng.randint(10, 59)}:{rng.randint(10, 59)}<{rng.randint(10, 59)}:00, {rng.randint(500, 3000)} examples/s]",
            ),
        )
        return
    if v == "save-frames":
        phase_hang(
            sc,
            waiting_phase="checkpoint-save",
            waiting_call="barrier",
            op="BARRIER" if sc.chance(0.3) else "ALLREDUCE",
            suspect_phase="checkpoint-save",
            suspect_call=None,
            activity=(f"Saving model checkpoint to output/checkpoint-{rng.randint(100, 9000)}",),
        )
        return
    init = sc.initiator or 0
    t = rng.uniform(30, 40000)
    sc.fail_time = t
    timeout = rng.choice((600000, 1800000, 1800000))
    dur = timeout / 1000 + rng.uniform(10, 3000)
    n = rng.randint(3, 8)
    for i in range(n):
        frac = (i + 1) / (n + 2)
        if v == "dataset-map":
            text = f"Map (num_proc={rng.choice((1, 4, 8))}): {int(frac * 100):>3}%|{'█' * int(frac * 10):<10}| {int(frac * 4_000_000)}/4000000 [{int(frac * dur) // 60:02d}:{int(frac * dur) % 60:02d}<{int(dur - frac * dur) // 60:02d}:00, {rng.randint(500, 3000)} examples/s]"
        elif v == "checkpoint-save":
            text = f"Saving model checkpoint to output/checkpoint-{rng.randint(100, 9000)} (shard {i + 1}/{n})"
        elif v == "evaluation":
            text = f"Preparing test set...: {int(frac * 100):>3}%| {i + 1}/{n + 2} [{int(frac * dur) // 60:02d}:{int(frac * dur) % 60:02d}<{int(dur - frac * dur) // 60:02d}:00, {rng.uniform(30, 90):.2f}s/it]"
        else:
            text = f"W{sc.when(t).month:02d}{sc.when(t).day:02d} torch/_dynamo/convert_frame.py:{rng.choice((744, 762))}] torch._dynamo hit config.cache_size_limit (8); recompiling function forward ({i + 1})"
        sc.emit(init, t + frac * dur, text, "root" if i == 0 else "context", stream="stderr")
    op = rng.choice(("ALLREDUCE", "BROADCAST", "_ALLGATHER_BASE"))
    hang_timeouts(
        sc,
        t,
        sc.others(),
        rng.randint(1, 50) if v == "dataset-map" else rng.randint(100, 90000),
        op,
        rng.choice((1, 6, 1024)),
        timeout,
    )
    hang_end(sc, t + timeout / 1000, sc.visible)


def _fsdp_init(sc: Scenario) -> None:
    v = sc.pick_variant(("ddp-param-count", "param-shape", "allgather-size", "heartbeat-init", "init-frames"))
    rng = sc.rng
    if v == "init-frames":
        phase_hang(
            sc,
            waiting_phase="init",
            waiting_call=rng.choice(("broadcast", "all_gather")),
            op=rng.choice(("BROADCAST", "_ALLGATHER_BASE")),
            suspect_phase="init",
            suspect_call="all_gather",
            seq=rng.randint(1, 4),
            suspect_op="_ALLGATHER_BASE",
        )
        return
    init = sc.initiator or 0
    t = rng.uniform(20, 600)
    sc.fail_time = t
    if rng.random() < 0.5:
        sc.context(
            init,
            t - 10,
            "Some weights of the model checkpoint at /models/base were not used when initializing LlamaForCausalLM: ['lm_head.weight']",
        )
    if v == "ddp-param-count":
        msg = f"RuntimeError: DDP expects same model across all ranks, but Rank {init} has {rng.randint(8, 3000)} params, while rank 0 has inconsistent {rng.randint(0, 7)} params."
        frames = script_frames(
            sc,
            (
                "sp:torch/nn/parallel/distributed.py",
                674,
                "__init__",
                "_verify_param_shape_across_processes(self.process_group, parameters)",
            ),
            (
                "sp:torch/distributed/utils.py",
                118,
                "_verify_param_shape_across_processes",
                "return dist._verify_params_across_processes(process_group, tensors, logger)",
            ),
        )
        crash_with_fallout(sc, t, traceback(sc, frames, msg))
        return
    if v == "param-shape":
        msg = f"RuntimeError: [{init}]: params[{rng.randint(0, 300)}] in this process with sizes [{rng.choice((4096, 5120))}, {rng.choice((1024, 11008))}] appears not to match sizes of the same param in process 0."
        frames = script_frames(
            sc,
            (
                "sp:torch/distributed/fsdp/fully_sharded_data_parallel.py",
                483,
                "__init__",
                "_init_param_handle_from_module(",
            ),
        )
        crash_with_fallout(sc, t, traceback(sc, frames, msg))
        return
    seq = rng.randint(1, 6)
    numel = rng.choice((88200, 2359296, 75264, 131072000))
    timeout = rng.choice((600000, 1800000))
    if v == "heartbeat-init" and not sc.old:
        from denpex_ml.synthetic.fragments import heartbeat_abort

        sc.context(
            0,
            t - 5,
            f"Trainable params: {rng.randint(10**6, 10**9):,} || all params: {rng.randint(10**9, 10**11):,} || trainable%: {rng.uniform(0.01, 2):.4f}",
        )
        for r in sc.others():
            heartbeat_abort(sc, r, t + 600 + sc.jitter(2))
    else:
        hang_timeouts(sc, t, sc.others(), seq, "_ALLGATHER_BASE", numel, timeout)
    odd = numel + rng.randint(1, 8) * 4096
    watchdog_timeout(
        sc,
        init,
        t + timeout / 1000 + sc.jitter(1),
        seq=seq,
        op="_ALLGATHER_BASE",
        numel_in=odd,
        numel_out=odd * sc.n_ranks,
        timeout_ms=timeout,
        role="root",
        verbose=False,
    )
    hang_end(sc, t + timeout / 1000, sc.visible)


def _zero3(sc: Scenario) -> None:
    v = sc.pick_variant(("trace-cache", "generate-no-sync", "seq-numel", "generate-frames", "generate-frames"))
    rng = sc.rng
    if v == "generate-frames":
        if sc.chance(0.5):
            sc.context(
                0, 3, '"zero_optimization": {"stage": 3, "overlap_comm": true, "stage3_prefetch_bucket_size": 5e8}'
            )
        phase_hang(
            sc,
            waiting_phase="generation",
            waiting_call="all_gather",
            op="_ALLGATHER_BASE",
            suspect_phase=None,
            suspect_call=None,
        )
        return
    init = sc.initiator or 0
    t = rng.uniform(300, 80000)
    sc.fail_time = t
    seq = rng.randint(400, 300000)
    timeout = rng.choice((600000, 1800000, 7200000))
    numel = rng.choice((2359296, 88200, 1048576))
    if v == "trace-cache":
        sc.root(
            init,
            t - 30,
            f"Invalidate trace cache @ step {rng.randint(0, 9)}: expected module {rng.randint(1, 40)}, but got module {rng.randint(41, 400)}",
        )
    elif v == "generate-no-sync":
        sc.context(init, t - 20, "[Eval batch=1/90] Eval on eval data")
        sc.root(
            init,
            t - 10,
            f"rank {init}: generation finished early at {rng.randint(20, 200)} new tokens (eos reached); synced_gpus=False",
        )
    sc.context(0, 3, '"zero_optimization": {"stage": 3, "overlap_comm": true, "stage3_prefetch_bucket_size": 5e8}')
    hang_timeouts(sc, t, sc.others(), seq, "_ALLGATHER_BASE", numel, timeout)
    odd = rng.choice((75264, 4096, 262144))
    watchdog_timeout(
        sc,
        init,
        t + timeout / 1000 + sc.jitter(),
        seq=seq,
        op="_ALLGATHER_BASE",
        numel_in=odd,
        numel_out=odd * 8,
        timeout_ms=timeout,
        role="symptom" if v != "seq-numel" else "root",
        verbose=False,
    )
    hang_end(sc, t + timeout / 1000, sc.visible)


def _pipeline(sc: Scenario) -> None:
    v = sc.pick_variant(("grad-shape", "recv-size", "send-recv-timeout", "p2p-frames"))
    rng = sc.rng
    if v == "p2p-frames":
        phase_hang(
            sc,
            waiting_phase="pipeline-p2p",
            waiting_call="recv",
            op="RECV",
            suspect_phase="pipeline-p2p",
            suspect_call="recv",
            suspect_op="SEND",
        )
        return
    t = rng.uniform(20, 9000)
    sc.fail_time = t
    seq_len = rng.choice((2048, 4096))
    if v == "grad-shape":
        a, b = rng.choice((4096, 2048, 5120)), rng.choice((1024, 2361, 3000))
        exc = f"RuntimeError: Mismatch in shape: grad_output[0] has a shape of torch.Size([{rng.choice((4, 8))}, {a}]) and output[0] has a shape of torch.Size([{rng.choice((4, 8))}, {b}])."
        frames = script_frames(
            sc,
            ("sp:deepspeed/runtime/pipe/engine.py", 336, "train_batch", "self._exec_schedule(sched)"),
            (
                "sp:deepspeed/runtime/pipe/engine.py",
                735,
                "_exec_backward_pass",
                "torch.autograd.backward(tensors=(outputs, ), grad_tensors=(grad_tensors, ))",
            ),
        )
        crash_with_fallout(sc, t, traceback(sc, frames, exc), op="RECV")
        return
    if v == "recv-size":
        got = rng.randint(10**6, 4 * 10**7)
        exc = f"RuntimeError: shape '[{rng.choice((1, 2, 4))}, {seq_len}, 4096]' is invalid for input of size {got}"
        frames = script_frames(
            sc,
            (
                "/workspace/Megatron-LM/megatron/core/pipeline_parallel/p2p_communication.py",
                376,
                "_communicate",
                "tensor_recv_prev = torch.empty(recv_prev_shape,",
            ),
        )
        sc.context(
            0,
            2,
            f"  variable_seq_lengths ............................ False\n  seq_length ...................................... {seq_len}",
        )
        crash_with_fallout(sc, t, traceback(sc, frames, exc), op="RECV")
        return
    init = sc.initiator or 0
    timeout = rng.choice((600000, 1800000))
    seq = rng.randint(10, 9000)
    good = rng.choice((1, 2, 4)) * seq_len * 4096
    watchdog_timeout(
        sc,
        init,
        t + timeout / 1000,
        seq=seq,
        op="SEND",
        numel_in=good // seq_len * rng.randint(300, seq_len - 1),
        numel_out=0,
        timeout_ms=timeout,
        role="root",
        verbose=False,
    )
    hang_timeouts(sc, t, sc.others(), seq, "RECV", good, timeout)
    hang_end(sc, t + timeout / 1000, sc.visible)


def _duplicate(sc: Scenario) -> None:
    v = sc.pick_variant(("nccl-duplicate", "local-rank-env", "same-device"))
    rng = sc.rng
    init = sc.initiator or 1
    other = sc.others(1)[0] if sc.others() else 0
    t = rng.uniform(5, 60)
    sc.fail_time = t
    nccl_v = rng.choice(("2.18.6", "2.19.3", "2.20.5", "2.21.5"))
    dev = rng.choice(("1000", "2000", "4000", "10", "1b000"))
    exc = (
        f"torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:{rng.choice((1333, 1691, 1970))}, invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version {nccl_v}\n"
        "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.\nLast error:\n"
        f"Duplicate GPU detected : rank {init} and rank {other} both on CUDA device {dev}"
    )
    if v == "local-rank-env":
        sc.context(init, 1, f"LOCAL_RANK=0 RANK={init} WORLD_SIZE={sc.n_ranks} CUDA_VISIBLE_DEVICES=0")
    if v == "same-device":
        sc.context(init, 2, f"rank {init} using device cuda:0")
    frames = script_frames(
        sc,
        (
            "sp:torch/nn/parallel/distributed.py",
            795,
            "__init__",
            "_verify_param_shape_across_processes(self.process_group, parameters)",
        ),
        (
            "sp:torch/distributed/utils.py",
            265,
            "_verify_param_shape_across_processes",
            "return dist._verify_params_across_processes(process_group, tensors, logger)",
        ),
    )
    crash_with_fallout(sc, t, traceback(sc, frames, exc))


RECIPES = (
    Recipe("collective-mismatch", "hangs", _mismatch, ("Detected mismatch between collectives on ranks",)),
    Recipe("subset-rank-collective-hang", "hangs", _subset),
    Recipe("host-work-timeout", "hangs", _host_work),
    Recipe("fsdp-divergent-init-hang", "hangs", _fsdp_init),
    Recipe("zero3-divergent-forward-hang", "hangs", _zero3),
    Recipe("pipeline-p2p-shape-mismatch", "hangs", _pipeline),
    Recipe(
        "duplicate-gpu-assignment",
        "hangs",
        _duplicate,
        ("Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 4000",),
    ),
)
