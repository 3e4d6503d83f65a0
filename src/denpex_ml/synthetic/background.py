"""Normal background output and harmless red herrings.

Background is what a healthy job prints: NCCL INFO init chatter, training-step lines in
one of several framework styles, tqdm bars with carriage returns, deprecation warnings,
argument dumps. Red herrings are scary-looking but harmless lines that real jobs print
(a single fp16 overflow skip, an NCCL plugin warning, a redirects NOTE...). Neither may
decide the label; both teach a model to look past them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from denpex_ml.synthetic.fragments import c10_header, nccl_prefix
from denpex_ml.synthetic.scenario import Scenario

__all__ = [
    "STEP_STYLES",
    "background",
    "megatron_args",
    "nccl_init",
    "red_herrings",
    "step_line",
]

STEP_STYLES = ("megatron", "hf", "deepspeed", "lightning", "plain", "tqdm")

_BUS_IDS = (
    "4f000",
    "52000",
    "56000",
    "57000",
    "ce000",
    "d1000",
    "d5000",
    "d6000",
    "18000",
    "2a000",
    "3a000",
    "5d000",
    "9a000",
    "ab000",
    "ba000",
    "db000",
)


def _bar(frac: float, width: int = 10) -> str:
    blocks = " ▏▎▍▌▋▊▉█"
    full = int(frac * width)
    rest = int((frac * width - full) * 8)
    body = "█" * full + (blocks[rest] if full < width else "")
    return body.ljust(width)


def step_line(
    sc: Scenario,
    style: str,
    step: int,
    total: int,
    loss: float | str,
    *,
    grad_norm: float | str = 1.0,
    scale: float = 65536.0,
    t: float | None = None,
) -> str:
    """One training-progress line in ``style`` (see :data:`STEP_STYLES`)."""
    rng = sc.rng
    loss_s = loss if isinstance(loss, str) else f"{loss:.4f}"
    gn = grad_norm if isinstance(grad_norm, str) else f"{grad_norm:.3f}"
    if style == "megatron":
        ts = sc.when(t if t is not None else sc.fail_time)
        loss_e = loss if isinstance(loss, str) else f"{loss:.6E}"
        return (
            f" [{ts:%Y-%m-%d %H:%M:%S}] iteration {step:>8}/{total:>8} | consumed samples: {step * 1024:>12} | elapsed time per iteration (ms): "
            f"{rng.uniform(900, 9000):.1f} | learning rate: {rng.uniform(1e-5, 3e-4):.6E} | global batch size: {1024:>5} | lm loss: {loss_e} | "
            f"loss scale: {scale:.1f} | grad norm: {gn} | number of skipped iterations: {0:>3} | number of nan iterations: {0:>3} |"
        )
    if style == "hf":
        return f"{{'loss': {loss_s}, 'grad_norm': {gn}, 'learning_rate': {rng.uniform(1e-6, 3e-4):.10g}, 'epoch': {step / max(total, 1):.2f}}}"
    if style == "deepspeed":
        ts = sc.when(t if t is not None else sc.fail_time)
        return f"[{ts:%Y-%m-%d %H:%M:%S},{rng.randrange(1000):03d}] [INFO] [logging.py:96:log_dist] [Rank 0] step={step}, skipped={rng.randint(0, 3)}, lr=[{rng.uniform(1e-5, 3e-4):.6g}], mom=[[0.9, 0.95]]"
    if style == "lightning":
        frac = step / max(total, 1)
        return f"Epoch 0: {int(frac * 100):>3}%|{_bar(frac)}| {step}/{total} [{step // 60:02d}:{step % 60:02d}<{(total - step) // 60:02d}:00, {rng.uniform(0.5, 3):.2f}it/s, loss={loss_s}, v_num=0]"
    if style == "plain":
        return f"iter {step}: loss {loss_s}, time: {rng.uniform(200, 7000):.2f}ms, grad_norm {gn}"
    frac = step / max(total, 1)
    return f"{int(frac * 100):>3}%|{_bar(frac)}| {step}/{total} [{step // 60:02d}:{step % 60:02d}<{(total - step) // 60:02d}:{step % 60:02d}, {rng.uniform(0.5, 9):.2f}s/it]"


def nccl_init(sc: Scenario, t: float, *, verbose: bool = True) -> None:
    """NCCL INFO init chatter (version, bootstrap, channels, Init COMPLETE) on visible ranks."""
    rng = sc.rng
    ver = (
        rng.choice(("2.10.3", "2.14.3", "2.18.1"))
        if sc.old
        else rng.choice(("2.19.3", "2.20.5", "2.21.5", "2.23.4", "2.26.2"))
    )
    cu = rng.choice(("11.8", "12.1")) if sc.old else rng.choice(("12.2", "12.4", "12.8"))
    iface = rng.choice(("eth0", "ib0", "bond0", "enp86s0f0"))
    for r in sc.visible:
        p = nccl_prefix(sc, r)
        node = sc.node_of(r)
        tt = t + sc.jitter(3.0)
        lines = []
        if r == 0:
            lines.append(f"{p} NCCL INFO Bootstrap : Using {iface}:{sc.ip(0)}<0>")
            lines.append(f"{p} NCCL INFO NCCL version {ver}+cuda{cu}")
        if verbose or r == 0:
            lines.append(f"{p} NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB {iface}:{sc.ip(node)}<0>")
            lines.append(
                f"{p} NCCL INFO Using network IB"
                if sc.n_ranks > sc.gpus_per_node
                else f"{p} NCCL INFO Using network Socket"
            )
            bus = _BUS_IDS[sc.local_of(r) % len(_BUS_IDS)]
            comm = f"0x{rng.randrange(0x55000000, 0x56000000):x}"
            lines.append(
                f"{p} NCCL INFO comm {comm} rank {r} nranks {sc.n_ranks} cudaDev {sc.local_of(r)} busId {bus} - Init START"
            )
            nxt = (sc.local_of(r) + 1) % sc.gpus_per_node
            for ch in range(rng.randint(1, 3)):
                lines.append(
                    f"{p} NCCL INFO Channel {ch:02d}/0 : {r}[{bus}] -> {(r + 1) % sc.n_ranks}[{_BUS_IDS[nxt % len(_BUS_IDS)]}] via P2P/IPC/read"
                )
            lines.append(f"{p} NCCL INFO Connected all rings")
            lines.append(f"{p} NCCL INFO Connected all trees")
            lines.append(
                f"{p} NCCL INFO comm {comm} rank {r} nranks {sc.n_ranks} cudaDev {sc.local_of(r)} busId {bus} - Init COMPLETE"
            )
        for ln in lines:
            sc.noise(r, tt, ln)
            tt += 0.001


def megatron_args(sc: Scenario, t: float, overrides: Mapping[str, object], *, rank: int = 0) -> None:
    """A Megatron ``arguments`` dump on ``rank``, with recipe-specific values merged in."""
    rng = sc.rng
    args: dict[str, object] = {
        "accumulate_allreduce_grads_in_fp32": True,
        "bf16": True,
        "context_parallel_size": 1,
        "expert_model_parallel_size": rng.choice((1, 1, 2, 4, 8)),
        "ffn_hidden_size": rng.choice((11008, 14336, 28672)),
        "global_batch_size": rng.choice((256, 512, 1024)),
        "hidden_size": rng.choice((2048, 4096, 8192)),
        "lr": rng.choice((0.0003, 0.0001, 1.5e-4)),
        "micro_batch_size": rng.choice((1, 2, 4)),
        "moe_router_topk": 2,
        "num_attention_heads": rng.choice((32, 64)),
        "num_layers": rng.choice((24, 32, 48, 61)),
        "overlap_grad_reduce": rng.choice((True, False)),
        "overlap_param_gather": rng.choice((True, False)),
        "pipeline_model_parallel_size": rng.choice((1, 2, 4)),
        "seq_length": rng.choice((2048, 4096, 8192)),
        "sequence_parallel": True,
        "tensor_model_parallel_size": rng.choice((1, 2, 4, 8)),
        "use_distributed_optimizer": True,
        "world_size": sc.n_ranks,
    }
    args.update(overrides)
    keys = sorted(args)
    shown = [k for k in keys if k in overrides or rng.random() < 0.75]
    lines = ["------------------------ arguments ------------------------"]
    for k in shown:
        lines.append(f"  {k} {'.' * max(3, 48 - len(k))} {args[k]}")
    lines.append("-------------------- end of arguments ---------------------")
    sc.context(rank, t, "\n".join(lines))


def background(
    sc: Scenario,
    t0: float,
    t1: float,
    count: int,
    *,
    style: str | None = None,
    loss_at: Callable[[int], float | str] | None = None,
) -> str:
    """``count`` background lines between ``t0`` and ``t1``; returns the step style used.

    Rank 0 prints most progress lines; other visible ranks print occasional warnings.
    Lines are cheap to make so ``count`` may reach a million.
    """
    rng = sc.rng
    style = style or rng.choice(STEP_STYLES)
    total = rng.choice((1000, 5000, 9847, 31397, 250000, 500000))
    start = rng.randint(1, max(2, total // 3))
    span = max(t1 - t0, 1e-3)
    progress = max(1, int(count * 0.85))
    tqdm_chain = style in ("tqdm", "lightning") and rng.random() < 0.6
    step = start
    i = 0
    while i < progress:
        t = t0 + span * i / progress
        loss = loss_at(step) if loss_at else max(0.05, 2.5 * math.exp(-step / (total * 0.8)) + rng.gauss(0, 0.08))
        line = step_line(sc, style, step, total, loss, grad_norm=abs(rng.gauss(1.0, 0.4)), t=t)
        if tqdm_chain and i + 3 < progress:
            parts = [line]
            for _ in range(rng.randint(2, 5)):
                step += 1
                parts.append(step_line(sc, style, step, total, loss, t=t))
            line = "\r".join(parts)
            i += len(parts) - 1
        sc.noise(0 if 0 in sc.visible else sc.visible[0], t, line, stream="stdout")
        step += 1
        i += 1
    extra = count - progress
    for j in range(extra):
        r = rng.choice(sc.visible)
        t = t0 + span * rng.random()
        sc.noise(r, t, _misc_line(sc, r, t, j))
    return style


def _misc_line(sc: Scenario, r: int, t: float, j: int) -> str:
    rng = sc.rng
    k = rng.randrange(6)
    if k == 0:
        return f"{nccl_prefix(sc, r)} NCCL INFO Channel {rng.randrange(32):02d}/1 : {r}[{_BUS_IDS[sc.local_of(r) % 16]}] -> {(r + 1) % sc.n_ranks}[{_BUS_IDS[(sc.local_of(r) + 1) % 16]}] via P2P/IPC/read"
    if k == 1:
        return f"{sc.env.sp('torch/utils/checkpoint.py')}:464: UserWarning: torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly."
    if k == 2:
        return f"Loading checkpoint shards: {rng.randint(0, 100):>3}%|{_bar(rng.random())}| {rng.randint(0, 8)}/8 [00:{rng.randint(0, 59):02d}<00:{rng.randint(0, 59):02d}, {rng.uniform(0.1, 3):.2f}s/it]"
    if k == 3:
        return f"[{sc.when(t):%Y-%m-%d %H:%M:%S},{rng.randrange(1000):03d}] [INFO] [real_accelerator.py:161:get_accelerator] Setting ds_accelerator to cuda (auto detect)"
    if k == 4:
        return f"INFO:root:rank {r}: data shard {j % 97} loaded, {rng.randint(1000, 90000)} samples"
    return f"{sc.env.sp('torch/_dynamo/eval_frame.py')}:{rng.choice((600, 632, 745))}: UserWarning: torch._dynamo: compiled graph has {rng.randint(1, 40)} graph breaks"


def red_herrings(sc: Scenario, t0: float, t1: float, k: int) -> list[str]:
    """Add ``k`` harmless but scary lines; returns their names for the incident's meta."""
    rng = sc.rng
    names = []
    pool = list(_HERRINGS)
    rng.shuffle(pool)
    for name in pool[:k]:
        r = rng.choice(sc.visible)
        t = rng.uniform(t0, t1)
        text = _herring_text(sc, name, r, t)
        sc.noise(r if name not in ("redirects", "omp") else None, t, text, node=sc.node_of(r), stream="stderr")
        names.append(name)
    return names


_HERRINGS = (
    "deprecated",
    "nccl-plugin",
    "nccl-ib-hca",
    "overflow-once",
    "redirects",
    "omp",
    "env-deprecated",
    "barrier-device",
    "tokenizers-fork",
    "seq-too-long",
    "pg-not-destroyed",
)


def _herring_text(sc: Scenario, name: str, r: int, t: float) -> str:
    rng = sc.rng
    if name == "deprecated":
        return rng.choice(
            (
                f"{sc.env.sp('transformers/training_args.py')}:1525: FutureWarning: `evaluation_strategy` is deprecated and will be removed in version 4.46 of 🤗 Transformers. Use `eval_strategy` instead\n  warnings.warn(",
                f"{sc.env.sp('torch/_utils.py')}:831: UserWarning: TypedStorage is deprecated. It will be removed in the future and UntypedStorage will be the only storage class.\n  return self.fget.__get__(instance, owner)()",
                f"{sc.env.sp('torch/distributed/fsdp/_init_utils.py')}:440: UserWarning: FSDP is switching to use `NO_SHARD` instead of ShardingStrategy.FULL_SHARD since the world size is 1.",
            )
        )
    if name == "nccl-plugin":
        return f"{nccl_prefix(sc, r)} NCCL INFO NET/Plugin: Plugin load (libnccl-net.so) returned 2 : libnccl-net.so: cannot open shared object file: No such file or directory"
    if name == "nccl-ib-hca":
        return f"{nccl_prefix(sc, r)} NCCL WARN NCCL_IB_HCA set to mlx5_0,mlx5_1,mlx5_4 but device mlx5_4 not found, ignoring it"
    if name == "overflow-once":
        return rng.choice(
            (
                f"[{sc.when(t):%Y-%m-%d %H:%M:%S},{rng.randrange(1000):03d}] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank {r} Skipping step. Attempted loss scale: 65536, reducing to 32768",
                "Warning: gradient overflow. Skipping step, loss scaler 0 reducing loss scale to 32768.0",
            )
        )
    if name == "redirects":
        return (
            "[W socket.cpp:663] [c10d] The client socket has failed to connect to [localhost]:29500 (errno: 99 - Cannot assign requested address).\nNOTE: Redirects are currently not supported in Windows or MacOs."
            if rng.random() < 0.3
            else "torch.distributed.elastic.multiprocessing.redirects: NOTE: Redirects are currently not supported in Windows or MacOs."
        )
    if name == "omp":
        return (
            "WARNING:torch.distributed.run:\n*****************************************\nSetting OMP_NUM_THREADS environment variable for each process to be 1 in default, "
            "to avoid your system being overloaded, please further tune the variable for optimal performance in your application as needed. \n*****************************************"
        )
    if name == "env-deprecated":
        return f"{c10_header(sc, r, t, 'W', 'Utils.hpp:133')} Warning: Environment variable NCCL_ASYNC_ERROR_HANDLING is deprecated; use TORCH_NCCL_ASYNC_ERROR_HANDLING instead (function getCvarInt)"
    if name == "barrier-device":
        return f"{c10_header(sc, r, t, 'W', 'ProcessGroupNCCL.cpp:4115')} [PG ID 0 PG GUID 0 Rank {r}]  using GPU {sc.local_of(r)} to perform barrier as devices used by this process are currently unknown. This can potentially cause a hang if this rank to GPU mapping is incorrect."
    if name == "tokenizers-fork":
        return "huggingface/tokenizers: The current process just got forked, after parallelism has already been used. Disabling parallelism to avoid deadlocks...\nTo disable this warning, you can either:\n\t- Avoid using `tokenizers` before the fork if possible\n\t- Explicitly set the environment variable TOKENIZERS_PARALLELISM=(true | false)"
    if name == "seq-too-long":
        return "Token indices sequence length is longer than the specified maximum sequence length for this model (2301 > 2048). Running this sequence through the model will result in indexing errors"
    return f"{c10_header(sc, r, t, 'W', 'ProcessGroupNCCL.cpp:1250')} Warning: WARNING: process group has NOT been destroyed before we destruct ProcessGroupNCCL. On normal program exit, the application should call destroy_process_group to ensure that any pending NCCL operations have finished in this process."
