"""Recipes for training numerics and DDP misuse: fp16 overflow, temperature collapse, NaN loss, unused params."""

from __future__ import annotations

from denpex_ml.synthetic.background import step_line
from denpex_ml.synthetic.fragments import Frame, traceback
from denpex_ml.synthetic.recipes.base import Recipe, crash_with_fallout, script_frames, teardown
from denpex_ml.synthetic.scenario import Scenario

__all__ = ["RECIPES"]


def _nan_steps(sc: Scenario, t: float, n: int, *, scale_drop: bool = False, first_role: str = "root") -> float:
    """Step lines turning NaN on rank 0 from ``t``; returns the time after the last one."""
    rng = sc.rng
    step = rng.randint(50, 90000)
    scale = 65536.0
    for i in range(n):
        if scale_drop:
            scale = max(1.0, scale / 2)
        line = step_line(sc, sc.step_style, step + i, step * 3, "nan", grad_norm="nan", scale=scale, t=t + i * 4.0)
        sc.emit(0, t + i * 4.0, line, first_role if i == 0 else "symptom", stream="stdout")
    return t + n * 4.0


def _overflow_report(sc: Scenario, module: str, what: str) -> str:
    """transformers' DebugUnderflowOverflow style frame dump ending at ``module``."""
    rng = sc.rng
    lines = [
        f"Detected inf/nan during batch_number={rng.randint(0, 40)}",
        f"Last {rng.randint(8, 21)} forward frames:",
        "abs min  abs max  metadata",
    ]
    for i in range(rng.randint(3, 6)):
        lines.append(f"                  {module.rsplit('.', 1)[0]}.{i} Linear")
        lines.append(f"{rng.uniform(1e-8, 1e-3):.2e} {rng.uniform(1, 6e4):.2e} weight")
    lines.append(f"                  {module} {what}")
    lines.append(f"{rng.uniform(1e-6, 1):.2e} {rng.uniform(6.6e4, 9e4):.2e} input[0]")
    lines.append("0.00e+00      inf output")
    return "\n".join(lines)


def _anomaly(sc: Scenario, fn: str, frames: list[Frame]) -> str:
    head = f"[W python_anomaly_mode.cpp:104] Warning: Error detected in {fn}. Traceback of forward call that caused the error:"
    fwd = "\n".join(
        f'  File "{sc.env.sp(f[0][3:]) if f[0].startswith("sp:") else f[0]}", line {f[1]}, in {f[2]}' for f in frames
    )
    return f"{head}\n{fwd}\n (function _print_stack)"


def _fp16_cfg(sc: Scenario, t: float) -> None:
    sc.context(
        0,
        t,
        sc.pick(
            (
                "fp16: True, bf16: False",
                '"fp16": {"enabled": true, "loss_scale": 0, "initial_scale_power": 16}',
                "  fp16 ............................................ True",
                "Mixed precision type: fp16",
            )
        ),
    )


def _rmsnorm(sc: Scenario) -> None:
    v = sc.pick_variant(("anomaly-rsqrt", "debug-overflow", "variance-print", "nan-after-norm"))
    rng = sc.rng
    sc.set_initiator(sc.initiator if v.startswith("anomaly") else 0)
    _fp16_cfg(sc, 5)
    t = rng.uniform(600, 50000)
    sc.fail_time = t
    norm = rng.choice(("T5LayerNorm", "LlamaRMSNorm", "RMSNorm", "MixedFusedRMSNorm"))
    layer = rng.randint(0, 40)
    if v == "anomaly-rsqrt":
        frames: list[Frame] = [
            (
                "sp:transformers/models/llama/modeling_llama.py",
                73,
                "forward",
                "hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)",
            )
        ]
        sc.root(
            sc.initiator, t - 0.1, _anomaly(sc, rng.choice(("RsqrtBackward0", "PowBackward0", "MeanBackward1")), frames)
        )
        exc = f"RuntimeError: Function '{rng.choice(('RsqrtBackward0', 'PowBackward0'))}' returned nan values in its 0th output."
        crash_with_fallout(
            sc,
            t,
            traceback(
                sc, script_frames(sc, ("sp:torch/autograd/__init__.py", 267, "backward", "_engine_run_backward(")), exc
            ),
        )
        return
    if v == "debug-overflow":
        sc.root(0, t, _overflow_report(sc, f"model.layers.{layer}.post_attention_layernorm", norm))
    elif v == "variance-print":
        lines = []
        for _ in range(rng.randint(2, 4)):
            lines.append(
                f"min={rng.uniform(-3e5, -1e4):.2e} max={rng.uniform(1e4, 3e5):.2e} var={rng.uniform(1e7, 9e7):.2e} ({norm})"
            )
            lines.append(
                f"min={rng.uniform(1e5, 2e6):.2e} max={rng.uniform(6.6e4, 7e8):.2e} var={rng.uniform(1e14, 1e16):.2e} ({norm} variance)"
            )
        sc.root(0, t, "\n".join(lines))
    else:
        sc.root(
            0,
            t,
            f"WARNING: layers.{layer}.input_layernorm produced inf in fp16 (max |x|^2 > 65504); activations are NaN from layer {layer}",
        )
    end = _nan_steps(sc, t + 2, rng.randint(2, 6), scale_drop=True, first_role="symptom")
    sc.fail_time = t
    if sc.chance(0.4):
        teardown(sc, end + 1, [(0, 1)])


def _softmax(sc: Scenario) -> None:
    v = sc.pick_variant(("anomaly-softmax", "debug-overflow", "attn-inf", "nan-steps"))
    rng = sc.rng
    _fp16_cfg(sc, 5)
    t = rng.uniform(600, 50000)
    sc.fail_time = t
    frames: list[Frame] = [
        (
            "sp:transformers/models/bert/modeling_bert.py",
            359,
            "forward",
            "attention_probs = nn.functional.softmax(attention_scores, dim=-1)",
        ),
        ("sp:torch/nn/functional.py", 1885, "softmax", "ret = input.softmax(dim)"),
    ]
    if v == "anomaly-softmax":
        sc.root(sc.initiator, t - 0.1, _anomaly(sc, "SoftmaxBackward0", frames))
        crash_with_fallout(
            sc,
            t,
            traceback(
                sc,
                script_frames(sc),
                "RuntimeError: Function 'SoftmaxBackward0' returned nan values in its 0th output.",
            ),
        )
        return
    sc.set_initiator(0)
    if v == "debug-overflow":
        sc.root(0, t, _overflow_report(sc, f"encoder.layer.{rng.randint(0, 23)}.attention.self", "BertSelfAttention"))
    elif v == "attn-inf":
        sc.root(
            0,
            t,
            f"attention scores max={rng.uniform(6.6e4, 9e4):.1f} exceeds fp16 range; attn_weights contain inf after softmax scaling (layer {rng.randint(0, 40)})",
        )
    else:
        sc.root(
            0, t, f"{sc.env.sp('torch/nn/functional.py')}:1885: UserWarning: softmax input contains inf; result is NaN"
        )
    _nan_steps(sc, t + 3, rng.randint(2, 6), first_role="symptom")


def _contrastive(sc: Scenario) -> None:
    v = sc.pick_variant(("stuck-logn", "scale-explodes", "temperature-zero"))
    rng = sc.rng
    sc.set_initiator(0)
    t = rng.uniform(600, 80000)
    sc.fail_time = t
    bs = rng.choice((256, 1024, 4096, 32768))
    import math

    logn = math.log(bs)
    for i in range(rng.randint(3, 7)):
        if v == "stuck-logn":
            scale, loss = 100.0, f"{logn + rng.uniform(-0.002, 0.002):.4f}"
        elif v == "scale-explodes":
            scale, loss = (100.0 * (3**i), "nan" if i > 1 else f"{rng.uniform(0.5, 2):.4f}")
        else:
            scale, loss = (max(0.01, 1.0 / (i + 1) ** 3), "nan" if i > 2 else f"{logn:.4f}")
        line = (
            f"Train Epoch: {rng.randint(0, 30)} [{(i + 1) * bs * 200:>9}/{bs * 10000} ({i + 1}%)] Data (t): {rng.uniform(0.05, 0.3):.3f} Batch (t): {rng.uniform(0.5, 2):.3f}, "
            f"{rng.uniform(500, 2000):.1f}/s, {rng.uniform(60, 200):.1f}/s/gpu LR: {rng.uniform(1e-5, 5e-4):.6f} Logit Scale: {scale:.3f} Contrastive_loss: {loss} ({loss}) Loss: {loss} ({loss})"
        )
        sc.emit(0, t + i * 60, line, "root" if i == 0 else "symptom", stream="stdout")
    if v == "temperature-zero":
        sc.root(
            0,
            t - 1,
            f"temperature={rng.uniform(1e-5, 1e-3):.6f} (learned, unclamped); logits_per_image max={rng.uniform(1e4, 9e4):.1f}",
        )
    if sc.chance(0.3):
        teardown(sc, t + 600, [(0, 1)])


def _loss_nan(sc: Scenario) -> None:
    v = sc.pick_variant(("nan-steps", "scale-minimum", "overflow-loop", "megatron-nan-assert"))
    rng = sc.rng
    t = rng.uniform(600, 90000)
    sc.fail_time = t
    if v == "nan-steps":
        sc.set_initiator(0)
        _nan_steps(sc, t, rng.randint(3, 8))
        return
    if v == "overflow-loop":
        sc.set_initiator(0)
        s = 2.0 ** rng.randint(10, 16)
        lines = []
        while s >= 1:
            lines.append(
                f"[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {int(s)}, reducing to {max(1, int(s / 2))}"
            )
            s /= 2
        sc.root(0, t, "\n".join(lines))
        return
    if v == "scale-minimum":
        frames = script_frames(
            sc, ("sp:deepspeed/runtime/fp16/loss_scaler.py", 183, "update_scale", "raise Exception(")
        )
        crash_with_fallout(
            sc,
            t,
            traceback(
                sc,
                frames,
                "Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.",
            ),
        )
        return
    init = sc.initiator or 0
    exc = f"AssertionError: Rank {init}: found NaN in local grad norm in backward pass before data-parallel communication collective. Device: {sc.local_of(init)}, node: {sc.host(init)}"
    frames = script_frames(
        sc,
        (
            "/workspace/Megatron-LM/megatron/core/distributed/param_and_grad_buffer.py",
            171,
            "check_grads",
            "assert not norm_is_nan, (",
        ),
    )
    crash_with_fallout(sc, t, traceback(sc, frames, exc))


def _unused(sc: Scenario) -> None:
    v = sc.pick_variant(("prior-reduction", "marked-twice", "indices-only"))
    rng = sc.rng
    init = sc.initiator or 0
    if v == "marked-twice":
        exc = (
            f"RuntimeError: Expected to mark a variable ready only once. This error is caused by one of the following reasons: 1) Use of a module parameter outside the `forward` function. "
            f"2) Reused parameters in multiple reentrant backward passes. Parameter at index {rng.randint(10, 400)} with name model.layers.{rng.randint(0, 30)}.mlp.gate_proj.weight has been marked as ready twice."
        )
    else:
        idx = " ".join(str(i) for i in sorted(rng.sample(range(500), rng.randint(1, 4))))
        exc = (
            "RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one. This error indicates that your module has parameters that were not used in producing loss. "
            "You can enable unused parameter detection by passing the keyword argument `find_unused_parameters=True` to `torch.nn.parallel.DistributedDataParallel`, and by \n"
            "making sure all `forward` function outputs participate in calculating loss. \n"
            f"Parameter indices which did not receive grad for rank {init}: {idx}\n"
            "In addition, you can set the environment variable TORCH_DISTRIBUTED_DEBUG to either INFO or DETAIL to print out information about which particular parameters did not receive gradient on this rank as part of this error"
        )
    frames = script_frames(
        sc,
        (
            "sp:torch/nn/parallel/distributed.py",
            1593,
            "forward",
            "inputs, kwargs = self._pre_forward(*inputs, **kwargs)",
        ),
        (
            "sp:torch/nn/parallel/distributed.py",
            1484,
            "_pre_forward",
            "if torch.is_grad_enabled() and self.reducer._rebuild_buckets():",
        ),
    )
    crash_with_fallout(sc, rng.uniform(10, 400), traceback(sc, frames, exc))


RECIPES = (
    Recipe("fp16-rmsnorm-overflow", "numerics", _rmsnorm),
    Recipe("fp16-attention-softmax-overflow", "numerics", _softmax),
    Recipe("contrastive-temperature-collapse", "numerics", _contrastive),
    Recipe("loss-nan-divergence", "numerics", _loss_nan, ("grad norm: nan", "'loss': nan")),
    Recipe("ddp-unused-parameters", "numerics", _unused),
)
