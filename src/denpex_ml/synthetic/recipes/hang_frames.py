"""Where the ranks of a hang wait: stack frames and phase lines, as real hang logs show them.

Real hang logs are decided by *what each rank was doing*: a traceback through ``generate``
under ZeRO-3, rank 0 in ``_save_checkpoint`` while the others sit in the next all-reduce,
``main_process_first``'s barrier while rank 0 tokenises, a ``log_dict(sync_dist=True)`` with
different keys per rank, a pipeline ``recv`` that never completes. These helpers add such
frames to a hang scenario, as a traceback after the watchdog aborts the process
(``DistBackendError``), a py-spy dump, or a store timeout; several library wordings each.
"""

from __future__ import annotations

from collections.abc import Sequence

from denpex_ml.synthetic.fragments import Frame, traceback, watchdog_timeout
from denpex_ml.synthetic.recipes.base import script_frames, teardown
from denpex_ml.synthetic.scenario import Scenario

__all__ = ["PHASE_FRAMES", "hang_end", "hang_timeouts", "phase_hang", "phase_stack", "py_spy_dump", "waiting_traceback"]

_C10D = "sp:torch/distributed/distributed_c10d.py"
_LOGGER = ("sp:torch/distributed/c10d_logger.py", 83, "wrapper", "return func(*args, **kwargs)")

#: Library frames per phase (outermost first), several wordings each.
PHASE_FRAMES: dict[str, tuple[tuple[Frame, ...], ...]] = {
    "generation": (
        (
            ("sp:torch/utils/_contextlib.py", 116, "decorate_context", "return func(*args, **kwargs)"),
            ("sp:transformers/generation/utils.py", 2255, "generate", "result = self._sample("),
            (
                "sp:transformers/generation/utils.py",
                3257,
                "_sample",
                "outputs = self(**model_inputs, return_dict=True)",
            ),
            ("sp:torch/nn/modules/module.py", 1747, "_call_impl", "return forward_call(*args, **kwargs)"),
            (
                "sp:deepspeed/runtime/zero/parameter_offload.py",
                392,
                "_pre_forward_module_hook",
                "self.pre_sub_module_forward_function(module)",
            ),
            (
                "sp:deepspeed/runtime/zero/partitioned_param_coordinator.py",
                339,
                "fetch_sub_module",
                "self.__all_gather_params(params_to_prefetch, forward)",
            ),
            (
                "sp:deepspeed/runtime/zero/partition_parameters.py",
                1158,
                "all_gather_coalesced",
                "handles = _dist_allgather_fn(",
            ),
        ),
        (
            (
                "sp:trl/trainer/grpo_trainer.py",
                1016,
                "_generate_and_score_completions",
                "prompt_completion_ids = unwrapped_model.generate(",
            ),
            ("sp:transformers/generation/utils.py", 1989, "generate", "result = self._sample("),
            (
                "sp:transformers/generation/utils.py",
                2932,
                "_sample",
                "outputs = self(**model_inputs, return_dict=True)",
            ),
            (
                "sp:torch/distributed/fsdp/_runtime_utils.py",
                469,
                "_pre_forward_unshard",
                "_unshard(state, handle, unshard_stream, pre_unshard_stream)",
            ),
            (
                "sp:torch/distributed/fsdp/_flat_param.py",
                1396,
                "_all_gather_flat_param",
                "dist.all_gather_into_tensor(",
            ),
        ),
        (
            ("sp:verl/workers/rollout/hf_rollout.py", 141, "generate_sequences", "output = self.module.generate("),
            ("sp:transformers/generation/utils.py", 2024, "generate", "result = self._sample("),
            (
                "sp:transformers/generation/utils.py",
                2982,
                "_sample",
                "outputs = self(**model_inputs, return_dict=True)",
            ),
        ),
    ),
    "checkpoint-save": (
        (
            ("sp:transformers/trainer.py", 2052, "train", "return inner_training_loop("),
            (
                "sp:transformers/trainer.py",
                2487,
                "_inner_training_loop",
                "self._maybe_log_save_evaluate(tr_loss, grad_norm, model, trial, epoch, ignore_keys_for_eval)",
            ),
            (
                "sp:transformers/trainer.py",
                2915,
                "_maybe_log_save_evaluate",
                "self._save_checkpoint(model, trial, metrics=metrics)",
            ),
            (
                "sp:transformers/trainer.py",
                3007,
                "_save_checkpoint",
                "self.save_model(output_dir, _internal_call=True)",
            ),
            (
                "sp:transformers/trainer.py",
                3619,
                "save_model",
                "state_dict = self.accelerator.get_state_dict(self.deepspeed)",
            ),
            (
                "sp:deepspeed/runtime/engine.py",
                3493,
                "_zero3_consolidated_16bit_state_dict",
                "with deepspeed.zero.GatheredParameters(param_list, modifier_rank=0):",
            ),
        ),
        (
            (
                "sp:lightning/pytorch/callbacks/model_checkpoint.py",
                375,
                "_save_checkpoint",
                "trainer.save_checkpoint(filepath, self.save_weights_only)",
            ),
            (
                "sp:lightning/pytorch/trainer/trainer.py",
                1365,
                "save_checkpoint",
                'self.strategy.barrier("Trainer.save_checkpoint")',
            ),
            (
                "sp:lightning/pytorch/strategies/ddp.py",
                301,
                "barrier",
                "torch.distributed.barrier(device_ids=self.determine_ddp_device_ids())",
            ),
        ),
        (
            (
                "/workspace/Megatron-LM/megatron/training/training.py",
                1393,
                "save_checkpoint_and_time",
                "save_checkpoint(iteration, model, optimizer, opt_param_scheduler,",
            ),
            (
                "/workspace/Megatron-LM/megatron/training/checkpointing.py",
                397,
                "save_checkpoint",
                "torch.distributed.barrier()",
            ),
        ),
    ),
    "evaluation": (
        (
            (
                "sp:transformers/trainer.py",
                2925,
                "_maybe_log_save_evaluate",
                "metrics = self._evaluate(trial, ignore_keys_for_eval)",
            ),
            ("sp:transformers/trainer.py", 3985, "evaluate", "output = eval_loop("),
            (
                "sp:transformers/trainer.py",
                4176,
                "evaluation_loop",
                "losses, logits, labels = self.prediction_step(model, inputs, prediction_loss_only, ignore_keys=ignore_keys)",
            ),
            ("sp:accelerate/accelerator.py", 2412, "gather_for_metrics", "data = self.gather(input_data)"),
        ),
        (
            ("sp:lightning/pytorch/loops/evaluation_loop.py", 142, "run", "return self.on_run_end()"),
            ("sp:lightning/pytorch/loops/evaluation_loop.py", 254, "on_run_end", "self._on_evaluation_epoch_end()"),
            (
                "sp:lightning/pytorch/trainer/connectors/logger_connector/result.py",
                445,
                "metrics",
                "value = self._get_cache(result_metric, on_step=False)",
            ),
        ),
    ),
    "preprocessing": (
        (("sp:transformers/training_args.py", 2427, "main_process_first", "dist.barrier()"),),
        (
            ("sp:accelerate/state.py", 417, "main_process_first", "yield from self._goes_first(self.is_main_process)"),
            ("sp:accelerate/state.py", 413, "_goes_first", "self.wait_for_everyone()"),
            ("sp:accelerate/utils/other.py", 191, "wait_for_everyone", "torch.distributed.barrier()"),
        ),
        (
            (
                "sp:datasets/arrow_dataset.py",
                602,
                "wrapper",
                'out: Union["Dataset", "DatasetDict"] = func(self, *args, **kwargs)',
            ),
            (
                "sp:datasets/arrow_dataset.py",
                3073,
                "map",
                "for rank, done, content in Dataset._map_single(**dataset_kwargs):",
            ),
            ("sp:datasets/arrow_dataset.py", 3525, "_map_single", "batch = apply_function_on_filtered_inputs("),
        ),
    ),
    "metrics-sync": (
        (
            ("sp:lightning/pytorch/core/module.py", 641, "log_dict", "self.log("),
            (
                "sp:lightning/pytorch/trainer/connectors/logger_connector/result.py",
                220,
                "update",
                "value = self.sync(value)",
            ),
            (
                "sp:lightning_fabric/utilities/distributed.py",
                220,
                "_sync_ddp",
                "torch.distributed.all_reduce(result, op=op, group=group, async_op=False)",
            ),
        ),
        (
            ("sp:torchmetrics/metric.py", 611, "_sync_dist", "output_dict = apply_to_collection("),
            (
                "sp:torchmetrics/utilities/distributed.py",
                139,
                "gather_all_tensors",
                "torch.distributed.all_gather(local_sizes, local_size, group=group)",
            ),
        ),
    ),
    "pipeline-p2p": (
        (
            ("sp:deepspeed/runtime/pipe/engine.py", 373, "train_batch", "self._exec_schedule(sched)"),
            ("sp:deepspeed/runtime/pipe/engine.py", 1420, "_exec_schedule", "self._exec_instr(**cmd.kwargs)"),
            (
                "sp:deepspeed/runtime/pipe/engine.py",
                1030,
                "_exec_recv_activations",
                "p2p.recv(buffer, self.prev_stage)",
            ),
            ("sp:deepspeed/runtime/pipe/p2p.py", 86, "recv", "return dist.recv(tensor, src_rank)"),
        ),
        (
            (
                "/workspace/Megatron-LM/megatron/core/pipeline_parallel/schedules.py",
                1415,
                "forward_backward_pipelining_without_interleaving",
                "input_tensor = recv_forward(recv_tensor_shapes, config)",
            ),
            (
                "/workspace/Megatron-LM/megatron/core/pipeline_parallel/p2p_communication.py",
                398,
                "recv_forward",
                "input_tensor, _, _ = _communicate(",
            ),
            (
                "/workspace/Megatron-LM/megatron/core/pipeline_parallel/p2p_communication.py",
                343,
                "_communicate",
                "reqs = p2p_func(",
            ),
        ),
    ),
    "init": (
        (
            (
                "sp:torch/distributed/fsdp/fully_sharded_data_parallel.py",
                509,
                "__init__",
                "_init_param_handle_from_module(",
            ),
            (
                "sp:torch/distributed/fsdp/_init_utils.py",
                636,
                "_init_param_handle_from_module",
                "_sync_module_params_and_buffers(",
            ),
            (
                "sp:torch/distributed/fsdp/_init_utils.py",
                1063,
                "_sync_module_params_and_buffers",
                "_sync_params_and_buffers(",
            ),
            ("sp:torch/distributed/utils.py", 303, "_sync_params_and_buffers", "dist._broadcast_coalesced("),
        ),
        (
            ("sp:accelerate/accelerator.py", 1339, "prepare", "result = tuple("),
            (
                "sp:accelerate/accelerator.py",
                1340,
                "<genexpr>",
                "self._prepare_one(obj, first_pass=True, device_placement=d) for obj, d in zip(args, device_placement)",
            ),
            ("sp:accelerate/accelerator.py", 1487, "prepare_model", "model = FSDP(model, **kwargs)"),
        ),
    ),
    "training-step": (
        (
            (
                "sp:transformers/trainer.py",
                2388,
                "_inner_training_loop",
                "tr_loss_step = self.training_step(model, inputs, num_items_in_batch)",
            ),
            ("sp:transformers/trainer.py", 3518, "training_step", "self.accelerator.backward(loss, **kwargs)"),
            ("sp:torch/autograd/__init__.py", 353, "backward", "_engine_run_backward("),
        ),
        (
            (
                "/workspace/Megatron-LM/megatron/training/training.py",
                1143,
                "train_step",
                "losses_reduced = forward_backward_func(",
            ),
            (
                "/workspace/Megatron-LM/megatron/core/distributed/param_and_grad_buffer.py",
                417,
                "finish_grad_sync",
                "self.start_grad_sync()",
            ),
        ),
    ),
    "end-of-training": (
        (
            ("sp:lightning/pytorch/trainer/trainer.py", 1030, "_teardown", "self.strategy.teardown()"),
            ("sp:lightning/pytorch/strategies/ddp.py", 419, "teardown", "super().teardown()"),
        ),
        (
            ("<script>", 412, "cleanup", "dist.destroy_process_group()"),
            (
                "sp:torch/distributed/distributed_c10d.py",
                2079,
                "destroy_process_group",
                "_shutdown_backend(pg_to_shutdown)",
            ),
        ),
    ),
}

_WAIT_CALLS: dict[str, Frame] = {
    "barrier": (_C10D, 4622, "barrier", "work = group.barrier(opts=opts)"),
    "all_reduce": (_C10D, 2806, "all_reduce", "work = group.allreduce([tensor], opts)"),
    "all_gather": (
        _C10D,
        3789,
        "all_gather_into_tensor",
        "work = group._allgather_base(output_tensor, input_tensor, opts)",
    ),
    "broadcast": (_C10D, 2726, "broadcast", "work = group.broadcast([tensor], opts)"),
    "recv": (_C10D, 2493, "recv", "pg.recv([tensor], group_src_rank, tag).wait()"),
}


def phase_stack(sc: Scenario, phase: str, wait: str | None = "all_reduce") -> list[Frame]:
    """The user script's outer frames, one wording of ``phase``'s library frames and the wait call."""
    frames = list(sc.pick(PHASE_FRAMES[phase]))
    if wait is not None:
        frames += [_LOGGER, _WAIT_CALLS[wait]]
    return script_frames(sc, *frames)


def waiting_traceback(sc: Scenario, rank: int, frames: Sequence[Frame], *, seq: int, op: str, timeout_ms: int) -> str:
    """The traceback a waiting rank prints when the watchdog's abort surfaces in Python."""
    pg = f"[PG ID 0 PG GUID 0(default_pg) Rank {rank}]" if not sc.old else f"[Rank {rank}]"
    exc = sc.pick(
        (
            f"torch.distributed.DistBackendError: {pg} Watchdog caught collective operation timeout: "
            f"WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn=1, NumelOut=1, Timeout(ms)={timeout_ms}) ran for "
            f"{timeout_ms + sc.rng.randint(5, 900)} milliseconds before timing out.",
            f"RuntimeError: {pg} Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, "
            f"NumelIn=1, NumelOut=1, Timeout(ms)={timeout_ms}) ran for {timeout_ms + sc.rng.randint(5, 900)} milliseconds before timing out.",
            f"torch.distributed.DistStoreError: wait timeout after {timeout_ms}ms, keys: /default_pg/0//cuda//0",
        )
    )
    return traceback(sc, frames, exc)


def py_spy_dump(sc: Scenario, rank: int, frames: Sequence[Frame]) -> str:
    """``py-spy dump --pid`` output of one rank (innermost frame first, as py-spy prints)."""
    out = [
        f"Process {sc.pid(rank)}: python -u train.py",
        f"Python v3.{sc.env.minor}.{sc.rng.randint(0, 12)} (/usr/bin/python3.{sc.env.minor})",
        "",
        f'Thread {sc.pid(rank)} (active): "MainThread"',
    ]
    for file, line, func, _ in reversed(frames):
        path = sc.env.sp(file[3:]) if file.startswith("sp:") else (sc.env.script if file == "<script>" else file)
        out.append(f"    {func} ({path.lstrip('/')}:{line})")
    return "\n".join(out)


def hang_end(sc: Scenario, t: float, ranks: list[int]) -> None:
    teardown(sc, t + 2 + sc.jitter(2), [(r, -6) for r in ranks[:6]])


def hang_timeouts(
    sc: Scenario,
    t: float,
    ranks: list[int],
    seq: int,
    op: str,
    numel: int,
    timeout_ms: int,
    *,
    role: str = "symptom",
    enq: int | None = None,
) -> None:
    for r in ranks:
        out = numel * sc.n_ranks if "GATHER" in op else numel
        watchdog_timeout(
            sc,
            r,
            t + timeout_ms / 1000 + sc.jitter(1.5),
            seq=seq,
            op=op,
            numel_in=numel,
            numel_out=out,
            timeout_ms=timeout_ms,
            role=role,
            last_enqueued=enq,
        )


def phase_hang(
    sc: Scenario,
    *,
    waiting_phase: str,
    waiting_call: str,
    op: str,
    suspect_phase: str | None,
    suspect_call: str | None,
    activity: tuple[str, ...] = (),
    seq: int | None = None,
    suspect_seq_delta: int = 0,
    suspect_op: str | None = None,
) -> None:
    """A hang told by frames: the waiting ranks' tracebacks/py-spy dumps show ``waiting_phase``,
    the suspect (the initiator) shows ``suspect_phase`` or only its ``activity`` lines."""
    rng = sc.rng
    init = sc.initiator if sc.initiator is not None else 0
    t = rng.uniform(60, 60000)
    sc.fail_time = t
    timeout = rng.choice((600000, 1800000, 1800000))
    seq = seq if seq is not None else rng.randint(6, 90000)
    numel = rng.choice((1, 1, 6, 1024, 2359296))
    others = sc.others()
    for i, line in enumerate(activity):
        sc.emit(init, t - 30 + i * 20 + sc.jitter(3), line, "root" if i == len(activity) - 1 else "context")
    if others:
        hang_timeouts(sc, t, others, seq, op, numel, timeout, enq=seq)
    for r in others[: rng.randint(1, 3)]:
        frames = phase_stack(sc, waiting_phase, waiting_call)
        if sc.chance(0.75):
            text = waiting_traceback(sc, r, frames, seq=seq, op=op, timeout_ms=timeout)
        else:
            text = py_spy_dump(sc, r, frames)
        sc.emit(r, t + timeout / 1000 + 1 + sc.jitter(1), text, "symptom")
    shown = bool(activity)
    if suspect_phase is not None and sc.chance(0.6):
        shown = True
        frames = phase_stack(sc, suspect_phase, suspect_call)
        if suspect_call is not None and sc.chance(0.5):
            text = waiting_traceback(
                sc, init, frames, seq=seq + suspect_seq_delta, op=suspect_op or op, timeout_ms=timeout
            )
        else:
            text = py_spy_dump(sc, init, frames)
        sc.emit(init, t + timeout / 1000 + 2 + sc.jitter(1), text, "root")
    elif suspect_call is not None and suspect_seq_delta and sc.chance(0.5):
        shown = True
        watchdog_timeout(
            sc,
            init,
            t + timeout / 1000 + sc.jitter(1.0),
            seq=seq + suspect_seq_delta,
            op=suspect_op or op,
            numel_in=rng.randint(1, 600),
            numel_out=rng.randint(600, 2400),
            timeout_ms=timeout,
            role="root",
            verbose=False,
        )
    if not shown:
        sc.set_initiator(None)  # the rank the others wait for printed nothing: the log cannot show it
    hang_end(sc, t + timeout / 1000, sc.visible)
