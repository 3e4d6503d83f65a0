"""Recipes for resource exhaustion and I/O: device memory, host memory, shared memory, storage."""

from __future__ import annotations

from denpex_ml.synthetic.fragments import Frame, downstream, traceback
from denpex_ml.synthetic.recipes.base import Recipe, crash_with_fallout, script_frames, teardown
from denpex_ml.synthetic.scenario import Scenario

__all__ = ["RECIPES"]

_FWD: list[Frame] = [
    ("sp:torch/nn/modules/module.py", 1532, "_wrapped_call_impl", "return self._call_impl(*args, **kwargs)"),
    ("sp:transformers/models/llama/modeling_llama.py", 1189, "forward", "logits = self.lm_head(hidden_states)"),
]


def _cuda_oom(sc: Scenario) -> None:
    v = sc.pick_variant(("new-message", "old-message", "cublas-alloc", "backward"))
    rng = sc.rng
    gpu = sc.local_of(sc.initiator or 0)
    cap = rng.choice((79.11, 79.15, 39.39, 31.75, 23.65, 139.8))
    want = round(rng.uniform(0.2, cap / 2), 2)
    free = round(rng.uniform(0.01, want * 0.9), 2)
    alloc = round(cap - free - rng.uniform(0.2, 3), 2)
    if v == "old-message" or (sc.old and v == "new-message"):
        exc = (
            f"RuntimeError: CUDA out of memory. Tried to allocate {want:.2f} GiB (GPU {gpu}; {cap:.2f} GiB total capacity; {alloc:.2f} GiB already allocated; "
            f"{free:.2f} GiB free; {alloc + 0.4:.2f} GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF"
        )
    elif v == "cublas-alloc":
        exc = "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"
    else:
        exc = (
            f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {want:.2f} GiB. GPU {gpu} has a total capacity of {cap:.2f} GiB of which {free:.2f} GiB is free. "
            f"Including non-PyTorch memory, this process has {alloc + 0.5:.2f} GiB memory in use. Of the allocated memory {alloc:.2f} GiB is allocated by PyTorch, and "
            f"{rng.uniform(0.05, 4):.2f} GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
        )
    extra: list[Frame] = (
        [("sp:torch/autograd/__init__.py", 267, "backward", "_engine_run_backward(")] if v == "backward" else list(_FWD)
    )
    crash_with_fallout(sc, rng.uniform(10, 40000), traceback(sc, script_frames(sc, *extra), exc))


def _host_oom(sc: Scenario) -> None:
    v = sc.pick_variant(("sigkill-agent", "dmesg", "memoryerror", "ray-oom"))
    rng = sc.rng
    init = sc.initiator or 0
    t = rng.uniform(20, 4000)
    sc.fail_time = t
    node = sc.node_of(init)
    if v == "memoryerror":
        exc = rng.choice(
            (
                "MemoryError",
                "OSError: [Errno 12] Cannot allocate memory",
                "RuntimeError: [enforce fail at alloc_cpu.cpp:83] err == 0. DefaultCPUAllocator: can't allocate memory: you tried to allocate 26843545600 bytes. Error code 12 (Cannot allocate memory)",
            )
        )
        frames = script_frames(
            sc,
            ("sp:torch/serialization.py", 1025, "load", "return _load(opened_zipfile,"),
            ("sp:torch/serialization.py", 1446, "_load", "result = unpickler.load()"),
        )
        crash_with_fallout(sc, t, traceback(sc, frames, exc))
        return
    sc.noise(
        init,
        t - 5,
        f"Loading checkpoint shards:   0%|          | 0/{rng.choice((2, 4, 7, 15))} [00:00<?, ?it/s]",
        stream="stderr",
    )
    if v == "dmesg":
        sc.root(
            None,
            t,
            f"[{rng.uniform(1e4, 9e6):.6f}] Out of memory: Killed process {sc.pid(init)} (python3) total-vm:{rng.randint(10**8, 9 * 10**8)}kB, anon-rss:{rng.randint(10**8, 5 * 10**8)}kB, file-rss:0kB, shmem-rss:{rng.randint(0, 10**6)}kB, UID:0 pgtables:{rng.randint(10**5, 10**6)}kB oom_score_adj:0",
            node=node,
        )
    if v == "ray-oom":
        sc.root(
            None,
            t + 1,
            f"ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.\nMemory on the node (IP: {sc.ip(node)}, ID: {rng.randrange(16**20):020x}) where the task was running was {rng.uniform(400, 990):.2f}GB / {rng.choice((503.0, 1007.0))}GB (0.95), which exceeds the memory usage threshold of 0.95.",
            node=node,
        )
    # the killed rank prints nothing itself: the agent reports exitcode -9 / SIGKILL
    killed = f"ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: {sc.local_of(init)} (pid: {sc.pid(init)}) of binary: {sc.env.python}"
    if sc.launcher in ("torchrun", "torchrun-default", "plain", "jsonl", "per-rank-files") and v != "ray-oom":
        sc.root(
            None,
            t + 2,
            killed
            if sc.old
            else killed.replace(
                "ERROR:torch.distributed.elastic.multiprocessing.api:",
                f"E{sc.when(t):%m%d %H:%M:%S}.{rng.randrange(10**6):06d} {sc.pid(0) - 60} torch/distributed/elastic/multiprocessing/api.py:869] ",
            ),
            node=node,
        )
    else:
        sc.root(None, t + 2, f"Signal 9 (SIGKILL) received by PID {sc.pid(init)}", node=node)
    if sc.chance(0.6) and len(sc.visible) > 1:
        downstream(sc, t, mode=rng.choice(("watchdog", "reset")))
    teardown(sc, t + 3, [(init, -9)])


def _shm_bus(sc: Scenario) -> None:
    v = sc.pick_variant(("bus-error", "shm-no-space", "worker-killed"))
    rng = sc.rng
    wpid = rng.randint(300, 90000)
    if v == "bus-error":
        pre = "\n".join(
            [
                "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm)."
            ]
            * rng.randint(1, 4)
        )
        exc = f"RuntimeError: DataLoader worker (pid {wpid}) is killed by signal: Bus error. It is possible that dataloader's workers are out of shared memory. Please try to raise your shared memory limit."
    elif v == "shm-no-space":
        pre = ""
        exc = f"RuntimeError: unable to write to file </torch_{wpid}_{rng.randrange(10**9)}_{rng.randint(0, 9)}>: No space left on device (28)"
    else:
        pre = ""
        exc = f"RuntimeError: DataLoader worker (pid(s) {wpid}, {wpid + 1}) exited unexpectedly"
    frames = script_frames(
        sc,
        ("sp:torch/utils/data/dataloader.py", 631, "__next__", "data = self._next_data()"),
        ("sp:torch/utils/data/dataloader.py", 1329, "_next_data", "idx, data = self._get_data()"),
        ("sp:torch/utils/data/dataloader.py", 1133, "_try_get_data", "data = self._data_queue.get(timeout=timeout)"),
        ("sp:torch/utils/data/_utils/signal_handling.py", 66, "handler", "_error_if_any_worker_fails()"),
    )
    t = rng.uniform(30, 30000)
    if sc.chance(0.4):
        sc.context(
            None,
            t - 3000 if t > 3000 else 1,
            "Filesystem      Size  Used Avail Use% Mounted on\nshm              64M   64M     0 100% /dev/shm",
            node=sc.node_of(sc.initiator or 0),
        )
    crash_with_fallout(sc, t, traceback(sc, frames, exc), extra_root=(pre,) if pre else ())


def _storage(sc: Scenario) -> None:
    v = sc.pick_variant(("enospc", "stream-writer", "stale-nfs", "read-only", "quota"))
    rng = sc.rng
    if sc.chance(0.6):
        sc.set_initiator(0)
    step = rng.randint(100, 90000)
    excs = {
        "enospc": "OSError: [Errno 28] No space left on device",
        "stream-writer": f"RuntimeError: [enforce fail at inline_container.cc:{rng.choice((471, 595, 764))}] . PytorchStreamWriter failed writing file data/{rng.randint(0, 400)}: file write failed",
        "stale-nfs": f"OSError: [Errno 116] Stale file handle: '/mnt/nfs/checkpoints/global_step{step}'",
        "read-only": f"OSError: [Errno 30] Read-only file system: '/checkpoints/global_step{step}'",
        "quota": "OSError: [Errno 122] Disk quota exceeded",
    }
    t = rng.uniform(600, 90000)
    init = sc.initiator or 0
    sc.context(
        init,
        t - 1.2,
        f"[{sc.when(t):%Y-%m-%d %H:%M:%S},{rng.randrange(1000):03d}] [INFO] [logging.py:96:log_dist] [Rank 0] Saving model checkpoint: ./output/checkpoint-{step}/global_step{step}/zero_pp_rank_0_mp_rank_00_model_states.pt",
    )
    frames = script_frames(
        sc,
        ("sp:deepspeed/runtime/engine.py", 3281, "save_checkpoint", "self._save_zero_checkpoint(save_dir, tag)"),
        (
            "sp:deepspeed/runtime/checkpoint_engine/torch_checkpoint_engine.py",
            22,
            "save",
            "torch.save(state_dict, path)",
        ),
        (
            "sp:torch/serialization.py",
            628,
            "save",
            "_save(obj, opened_zipfile, pickle_module, pickle_protocol, _disable_byteorder_record)",
        ),
    )
    crash_with_fallout(
        sc, t, traceback(sc, frames, excs[v]), op=rng.choice(("ALLREDUCE", "BROADCAST", "_ALLGATHER_BASE")), numel=1
    )


RECIPES = (
    Recipe(
        "cuda-oom",
        "resources",
        _cuda_oom,
        (
            "Tried to allocate 2.63 GiB",
            "torch.OutOfMemoryError: CUDA out of memory.",
            "torch.cuda.OutOfMemoryError: CUDA out of memory.",
        ),
    ),
    Recipe("host-oom", "resources", _host_oom, ("failed (exitcode: -9) local_rank: 3 (pid: 812917)",)),
    Recipe("dataloader-shm-bus-error", "resources", _shm_bus),
    Recipe("storage-io-failure", "resources", _storage, ("OSError: [Errno 28] No space left on device",)),
)
