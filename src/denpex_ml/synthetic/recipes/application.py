"""Recipes for application failures: uncaught exceptions, native crashes, imports, files, devices."""

from __future__ import annotations

from denpex_ml.synthetic.fragments import Frame, c10_header, traceback
from denpex_ml.synthetic.recipes.base import Recipe, crash_with_fallout, script_frames, teardown
from denpex_ml.synthetic.scenario import Scenario

__all__ = ["RECIPES"]

_HF: list[Frame] = [
    ("sp:transformers/trainer.py", 1938, "train", "return inner_training_loop("),
    ("sp:transformers/trainer.py", 2279, "_inner_training_loop", "tr_loss_step = self.training_step(model, inputs)"),
    ("sp:transformers/trainer.py", 3318, "training_step", "loss = self.compute_loss(model, inputs)"),
]
_MODEL: list[Frame] = [
    ("sp:torch/nn/modules/module.py", 1532, "_wrapped_call_impl", "return self._call_impl(*args, **kwargs)"),
    ("sp:torch/nn/modules/module.py", 1541, "_call_impl", "return forward_call(*args, **kwargs)"),
]


def _uncaught(sc: Scenario) -> None:
    v = sc.pick_variant(("keyerror", "assert", "zerodiv", "valueerror", "typeerror", "indexerror"))
    rng = sc.rng
    excs = {
        "keyerror": f"KeyError: '{rng.choice(('input_ids', 'labels', 'pixel_values', 'attention_mask', 'image'))}'",
        "assert": f"AssertionError: {rng.choice((96, 40, 12))} is not divisible by {rng.choice((64, 16, 8))}",
        "zerodiv": "ZeroDivisionError: division by zero",
        "valueerror": "ValueError: Target modules ['q_proj', 'v_proj'] not found in the base model. Please check the target modules and try again.",
        "typeerror": "TypeError: forward() got an unexpected keyword argument 'num_items_in_batch'",
        "indexerror": "IndexError: list index out of range",
    }
    frames = script_frames(
        sc,
        (
            "/workspace/src/data/collator.py",
            rng.randint(20, 300),
            "__call__",
            "batch[key] = torch.stack([f[key] for f in features])",
        ),
    )
    op = "ALLTOALL_BASE" if sc.hard_negative else None
    crash_with_fallout(sc, rng.uniform(200, 20000), traceback(sc, frames, excs[v]), op=op)


def _segfault(sc: Scenario) -> None:
    v = sc.pick_variant(("segv-core", "fatal-python", "glog-sigsegv", "abort-terminate"))
    rng = sc.rng
    init = sc.initiator
    t = rng.uniform(100, 30000)
    code = -11
    if v == "segv-core":
        text = "Segmentation fault (core dumped)"
    elif v == "fatal-python":
        text = (
            "Fatal Python error: Segmentation fault\n\n"
            f"Thread 0x{rng.randrange(16**12):012x} (most recent call first):\n"
            f'  File "{sc.env.sp("torch/utils/data/_utils/pin_memory.py")}", line 54 in do_one_step\n'
            f'  File "{sc.env.sp("torch/utils/data/_utils/pin_memory.py")}", line 77 in _pin_memory_loop\n\n'
            "Current thread (most recent call first):\n"
            f'  File "{sc.env.sp("torch/autograd/graph.py")}", line 744 in _engine_run_backward\n'
            f'  File "{sc.env.sp("torch/autograd/__init__.py")}", line 267 in backward'
        )
    elif v == "glog-sigsegv":
        text = (
            f"*** SIGSEGV (@0x0) received by PID {sc.pid(init or 0)} (TID 0x{rng.randrange(16**12):012x}) from PID 0; stack trace: ***\n"
            f"    @     0x{rng.randrange(16**12):012x} (unknown)\n    @     0x{rng.randrange(16**12):012x} at::native::index_put_\n"
            f"    @     0x{rng.randrange(16**12):012x} (unknown)"
        )
    else:
        code = -6
        text = (
            "terminate called after throwing an instance of 'c10::Error'\n"
            "  what():  invalid vector subscript\n"
            f"Exception raised from operator() at /opt/pytorch/aten/src/ATen/core/ivalue.cpp:{rng.randint(100, 900)} (most recent call first):"
        )
    crash_with_fallout(sc, t, text, exitcode=code)


def _missing_module(sc: Scenario) -> None:
    v = sc.pick_variant(("no-module", "undefined-symbol", "cannot-import"))
    rng = sc.rng
    excs = {
        "no-module": f"ModuleNotFoundError: No module named '{rng.choice(('flash_attn', 'apex', 'torch._six', 'megatron.core', 'transformer_engine', 'deepspeed'))}'",
        "undefined-symbol": f"ImportError: {sc.env.sp('flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so')}: undefined symbol: _ZN3c104cuda9SetDeviceEi",
        "cannot-import": "ImportError: cannot import name 'is_torch_fx_available' from 'transformers.utils.import_utils'",
    }
    frames = script_frames(
        sc,
        ("sp:deepspeed/__init__.py", 16, "<module>", "from . import ops"),
        ("sp:deepspeed/runtime/engine.py", 25, "<module>", "from deepspeed.runtime.utils import see_memory_usage"),
    )
    t = rng.uniform(3, 40)
    sc.fail_time = t
    all_ranks = sc.chance(0.6)
    ranks = sc.visible if all_ranks else [r for r in sc.visible if sc.node_of(r) == sc.node_of(sc.initiator or 0)]
    first = min(ranks, key=lambda r: (r != sc.initiator, r))
    for r in ranks:
        tt = t + (0 if r == first else 0.05 + sc.jitter(1.0))
        sc.emit(r, tt, traceback(sc, frames, excs[v]), "root" if r == first else "symptom")
    teardown(sc, t + 2.0, [(r, 1) for r in ranks[:6]])


def _file_not_found(sc: Scenario) -> None:
    v = sc.pick_variant(("data-path", "checkpoint-rename", "config", "hf-dataset"))
    rng = sc.rng
    excs = {
        "data-path": f"FileNotFoundError: [Errno 2] No such file or directory: '/data/user/datasets/shard_{rng.randint(0, 2000):05d}.parquet'",
        "checkpoint-rename": f"FileNotFoundError: [Errno 2] No such file or directory: 'output/tmp-checkpoint-{rng.randint(10, 9000)}' -> 'output/checkpoint-{rng.randint(10, 9000)}'",
        "config": "FileNotFoundError: [Errno 2] No such file or directory: 'configs/ds_config_zero3.json'",
        "hf-dataset": "FileNotFoundError: Unable to find '/mnt/data/train.jsonl'",
    }
    frames = script_frames(
        sc,
        ("sp:datasets/load.py", 2594, "load_dataset", "builder_instance = load_dataset_builder("),
        ("sp:datasets/data_files.py", 385, "resolve_pattern", "raise FileNotFoundError(error_msg)"),
    )
    if v == "checkpoint-rename":
        sc.set_initiator(0 if sc.chance(0.5) else sc.initiator)
        frames = script_frames(
            sc,
            *_HF[:2],
            ("sp:transformers/trainer.py", 2395, "_save_checkpoint", "os.rename(staging_output_dir, output_dir)"),
        )
    crash_with_fallout(sc, rng.uniform(5, 9000), traceback(sc, frames, excs[v]))


def _permission(sc: Scenario) -> None:
    v = sc.pick_variant(("makedirs", "triton-cache", "checkpoint-write", "device"))
    rng = sc.rng
    if v == "device":
        init = sc.initiator or 0
        text = (
            f"{sc.host(init)}:{sc.pid(init)}:{sc.pid(init) + 40} [{sc.local_of(init)}] NCCL WARN NET/IB : Unable to open device mlx5_0: Permission denied\n"
            f"PermissionError: [Errno 13] Permission denied: '/dev/infiniband/uverbs0'"
        )
        crash_with_fallout(sc, rng.uniform(5, 60), text)
        return
    target = {
        "makedirs": "'/data'",
        "triton-cache": "'/app/.triton/cache'",
        "checkpoint-write": f"'/mnt/shared/checkpoints/run{rng.randint(1, 99)}/global_step{rng.randint(100, 9000)}'",
    }[v]
    frames = script_frames(
        sc,
        ("/usr/lib/python3.10/os.py", 215, "makedirs", "makedirs(head, exist_ok=exist_ok)"),
        ("/usr/lib/python3.10/os.py", 225, "makedirs", "mkdir(name, mode)"),
    )
    crash_with_fallout(
        sc, rng.uniform(5, 20000), traceback(sc, frames, f"PermissionError: [Errno 13] Permission denied: {target}")
    )


def _device_mismatch(sc: Scenario) -> None:
    v = sc.pick_variant(("same-device", "cpu-cuda", "input-weight-type"))
    rng = sc.rng
    a, b = rng.sample(range(8), 2)
    excs = {
        "same-device": f"RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:{a} and cuda:{b}! (when checking argument for argument index in method wrapper_CUDA__index_select)",
        "cpu-cuda": f"RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cpu and cuda:{a}!",
        "input-weight-type": "RuntimeError: Input type (torch.cuda.FloatTensor) and weight type (torch.FloatTensor) should be the same",
    }
    frames = script_frames(
        sc,
        *_HF,
        *_MODEL,
        (
            "sp:torch/nn/functional.py",
            2264,
            "embedding",
            "return torch.embedding(weight, input, padding_idx, scale_grad_by_freq, sparse)",
        ),
    )
    crash_with_fallout(sc, rng.uniform(20, 600), traceback(sc, frames, excs[v]))


def _device_assert(sc: Scenario) -> None:
    v = sc.pick_variant(("index-select", "nll-classes", "scatter-gather"))
    rng = sc.rng
    src = (
        "/opt/conda/conda-bld/pytorch_1595629416375/work/aten/src/THC/THCTensorIndex.cu:272"
        if sc.old
        else "../aten/src/ATen/native/cuda/Indexing.cu:1289"
    )
    asserts = {
        "index-select": f"{src}: indexSelectLargeIndex: block: [{rng.randint(0, 400)},0,0], thread: [{{t}},0,0] Assertion `srcIndex < srcSelectDimSize` failed.",
        "nll-classes": "../aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], thread: [{t},0,0] Assertion `t >= 0 && t < n_classes` failed.",
        "scatter-gather": '../aten/src/ATen/native/cuda/ScatterGatherKernel.cu:144: operator(): block: [0,0,0], thread: [{t},0,0] Assertion `idx_dim >= 0 && idx_dim < index_size && "index out of bounds"` failed.',
    }
    start = rng.randint(0, 60)
    kern = "\n".join(asserts[v].format(t=start + i) for i in range(rng.randint(2, 6)))
    exc = (
        "RuntimeError: CUDA error: device-side assert triggered\n"
        "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\n"
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1"
        + ("\nCompile with `TORCH_USE_CUDA_DSA` to enable device-side assertions." if not sc.old else "")
    )
    frames = script_frames(sc, *_HF, *_MODEL)
    t = rng.uniform(30, 9000)
    sc.root(sc.initiator, t - 0.01, kern)
    extra = []
    if sc.chance(0.4):
        extra.append(
            f"{c10_header(sc, sc.initiator or 0, t, 'E', 'ProcessGroupNCCL.cpp:1595')} [PG ID 0 PG GUID 0(default_pg) Rank {sc.initiator}] Process group watchdog thread terminated with exception: CUDA error: device-side assert triggered"
        )
    crash_with_fallout(sc, t, traceback(sc, frames, exc), exitcode=-6 if extra else 1, extra_root=extra)


RECIPES = (
    Recipe("uncaught-exception-crash", "application", _uncaught),
    Recipe("segfault-native-crash", "application", _segfault),
    Recipe("missing-module", "application", _missing_module, ("ModuleNotFoundError: No module named 'flash_attn'",)),
    Recipe(
        "file-not-found",
        "application",
        _file_not_found,
        ("FileNotFoundError: [Errno 2] No such file or directory: '/data/x.bin'",),
    ),
    Recipe(
        "permission-denied", "application", _permission, ("PermissionError: [Errno 13] Permission denied: '/data'",)
    ),
    Recipe("tensor-device-mismatch", "application", _device_mismatch),
    Recipe("cuda-device-side-assert", "application", _device_assert),
)
