"""Worker script for the reproduced distributed failures (run under torchrun, gloo, CPU).

Usage (what ``training.reproduce.run`` does)::

    torchrun --standalone --nproc-per-node 4 -m training.reproduce.scenarios <scenario>

Every scenario is a small, plausible training loop in which something goes wrong for real:
a rank-0-only collective, long host work, mismatched collectives, mismatched p2p shapes,
divergent FSDP models or forward counts, or a crash. Nothing here prints failure text of
its own; the error messages in the captured logs are PyTorch's, gloo's and torchrun's.

Three harness conveniences, all documented in data/reproduced/README.md:

* stderr is merged into stdout (``dup2``, the same as ``2>&1``) so that each rank's file
  that torchrun writes with ``--redirects 3`` keeps the real interleaving of both streams;
* gloo has no watchdog, so PyTorch never dumps its Flight Recorder by itself for gloo. When a
  rank dies from an exception and ``TORCH_FR_DUMP_TEMP_FILE`` is set, the worker writes
  PyTorch's own Flight Recorder dump (``torch._C._distributed_c10d._dump_fr_trace``, pickle,
  the format the NCCL watchdog writes) to ``<TORCH_FR_DUMP_TEMP_FILE><rank>`` and re-raises;
* with ``REPRO_STACK_DUMP_S`` set, faulthandler dumps every thread's stack after that many
  seconds (``dump_traceback_later``), standing in for the operator's ``py-spy dump`` of a
  silent hang.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":
    # 2>&1 for this worker process: the per-rank log file then holds both streams in order.
    os.dup2(1, 2)

import signal
import time
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record

PG_TIMEOUT_S = int(os.environ.get("REPRO_PG_TIMEOUT_S", "10"))


def log(msg: str) -> None:
    print(msg, flush=True)


def init() -> tuple[int, int]:
    dist.init_process_group("gloo", timeout=timedelta(seconds=PG_TIMEOUT_S))
    rank, world = dist.get_rank(), dist.get_world_size()
    log(f"rank {rank}/{world}: process group ready (backend gloo, timeout {PG_TIMEOUT_S}s)")
    return rank, world


def tiny_model(hidden: int = 16) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 1))


def train_step(model: torch.nn.Module, step: int, rank: int) -> float:
    """One data-parallel step: forward, backward, all_reduce of the gradients by hand."""
    g = torch.Generator().manual_seed(1000 * rank + step)
    x, y = torch.randn(4, 8, generator=g), torch.randn(4, 1, generator=g)
    loss = torch.nn.functional.mse_loss(model(x), y)
    model.zero_grad()
    loss.backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad /= dist.get_world_size()
    with torch.no_grad():
        for p in model.parameters():
            p -= 0.01 * p.grad
    return loss.item()


def train(model: torch.nn.Module, rank: int, steps: int, start: int = 0) -> None:
    for step in range(start, start + steps):
        loss = train_step(model, step, rank)
        if rank == 0:
            log(f"step {step} loss {loss:.4f}")


def finish() -> None:
    dist.destroy_process_group()


# --------------------------------------------------------------------------- subset-rank hangs


def subset_barrier() -> None:
    """Only rank 0 runs evaluation and its barrier; the others carry on training."""
    rank, _ = init()
    model = tiny_model()
    train(model, rank, 3)
    if rank == 0:
        log("Running evaluation on rank 0")
        dist.barrier()  # meant to hold the others until evaluation is done
        log("evaluation done")
    train(model, rank, 3, start=3)
    finish()


def subset_allreduce_save() -> None:
    """Rank 0 saves a checkpoint and all-reduces a metric inside the save path; the others finish."""
    rank, _ = init()
    model = tiny_model()
    train(model, rank, 3)
    if rank == 0:
        os.makedirs("/tmp/repro-ckpt", exist_ok=True)
        log("Saving checkpoint to /tmp/repro-ckpt/step_3.pt")
        torch.save(model.state_dict(), "/tmp/repro-ckpt/step_3.pt")
        val_loss = torch.tensor([0.5])
        dist.all_reduce(val_loss)  # a metric reduced on the save path, only rank 0 is here
        log(f"saved, val_loss {val_loss.item():.4f}")
    log("training finished")
    finish()


def subset_uneven_batches() -> None:
    """Rank 3's shard has fewer batches: it leaves the loop and destroys the process group."""
    rank, world = init()
    model = tiny_model()
    n_batches = 3 if rank == world - 1 else 6
    log(f"rank {rank}: {n_batches} batches in this shard")
    train(model, rank, n_batches)
    log(f"rank {rank}: epoch done")
    finish()


def subset_uneven_batches_wait() -> None:
    """As above, but rank 3 goes on to the end-of-epoch barrier while the others still train."""
    rank, world = init()
    model = tiny_model()
    n_batches = 3 if rank == world - 1 else 6
    log(f"rank {rank}: {n_batches} batches in this shard")
    train(model, rank, n_batches)
    log(f"rank {rank}: epoch done, waiting at end-of-epoch barrier")
    dist.barrier()
    finish()


def subset_early_stop() -> None:
    """Only rank 0 checks the early-stopping patience: it leaves the epoch loop and gathers the
    final metrics while the others start the next epoch's gradient all_reduce."""
    rank, world = init()
    model = tiny_model()
    for epoch in range(3):
        train(model, rank, 2, start=2 * epoch)
        if rank == 0:
            log(f"epoch {epoch}: val_loss did not improve (patience {epoch + 1}/2)")
            if epoch == 1:
                log("Early stopping: patience exhausted, leaving the training loop")
                break
    if rank == 0:
        metrics = [torch.zeros(1) for _ in range(world)]
        dist.all_gather(metrics, torch.tensor([0.42]))  # final metrics: only rank 0 is here
        log("final metrics gathered")
    finish()


def subset_ddp_eval() -> None:
    """Rank 0 validates through the DDP-wrapped model (its forward broadcasts the BatchNorm
    buffers); the others wait for it at the barrier after training."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    rank, _ = init()
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.BatchNorm1d(16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    model = DDP(net)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(3):
        g = torch.Generator().manual_seed(1000 * rank + step)
        x, y = torch.randn(4, 8, generator=g), torch.randn(4, 1, generator=g)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0:
            log(f"step {step} loss {loss.item():.4f}")
    if rank == 0:
        log("Validating on rank 0")
        model.eval()
        with torch.no_grad():
            model(torch.randn(4, 8))  # DDP forward: broadcasts buffers to ranks that never come
        log("validation done")
    dist.barrier()
    finish()


# --------------------------------------------------------------------------- host-work timeouts


def host_work_tokenise() -> None:
    """Rank 0 tokenises the dataset (slow) while the others wait at a barrier."""
    rank, _ = init()
    if rank == 0:
        log("tokenising dataset on rank 0 (others wait at barrier)")
        time.sleep(PG_TIMEOUT_S + 12)
        log("tokenising done")
    dist.barrier()
    model = tiny_model()
    train(model, rank, 3)
    finish()


def _busy_rank0_between_steps(before: str, after: str) -> None:
    """Two steps, then rank 0 alone busy on the host past the PG timeout (a busy loop standing in
    for slow serialisation or metric code, printing ``before`` and ``after``), then two more steps:
    the others are already in step 2's all_reduce."""
    rank, _ = init()
    model = tiny_model()
    train(model, rank, 2)
    if rank == 0:
        log(before)
        end = time.monotonic() + PG_TIMEOUT_S + 12
        acc = 0
        while time.monotonic() < end:
            acc += sum(range(1000))
        log(after)
    train(model, rank, 2, start=2)
    finish()


def host_work_checkpoint() -> None:
    """Rank 0 writes a checkpoint with a busy host loop; the others enter the next all_reduce."""
    _busy_rank0_between_steps("writing checkpoint step_2 (rank 0)", "checkpoint written")


def host_work_eval() -> None:
    """Rank 0 runs a long evaluation on the host after step 1; the others enter step 2."""
    _busy_rank0_between_steps("Running evaluation on the validation set (rank 0)", "evaluation done: accuracy 0.71")


# --------------------------------------------------------------------------- collective mismatch


def mismatch_op() -> None:
    """Rank 2 all_gathers where the others all_reduce."""
    rank, world = init()
    model = tiny_model()
    train(model, rank, 2)
    metric = torch.tensor([float(rank)])
    if rank == 2:
        out = [torch.zeros(1) for _ in range(world)]
        dist.all_gather(out, metric)
    else:
        dist.all_reduce(metric)
    log(f"metric {metric.tolist()}")
    train(model, rank, 2, start=2)
    finish()


def mismatch_size() -> None:
    """Rank 2 all_reduces a tensor of a different numel (a different bucket layout)."""
    rank, _ = init()
    model = tiny_model()
    train(model, rank, 2)
    n = 24 if rank == 2 else 16
    stats = torch.ones(n)
    dist.all_reduce(stats)
    log(f"stats sum {stats.sum().item()}")
    train(model, rank, 2, start=2)
    finish()


# --------------------------------------------------------------------------- pipeline p2p


def p2p_shape_smaller() -> None:
    """Stage pairs (0->1, 2->3) exchange activations; the receiver's buffer is too small."""
    rank, _ = init()
    seq_send, seq_recv = 128, 96  # variable sequence length: receiver assumes the old length
    for mb in range(2):
        if rank % 2 == 0:
            act = torch.randn(2, seq_send, 8)
            log(f"stage {rank // 2} mb {mb}: send activations {tuple(act.shape)} to rank {rank + 1}")
            dist.send(act, dst=rank + 1)
        else:
            buf = torch.empty(2, seq_recv, 8)
            log(f"stage {rank // 2} mb {mb}: recv activations {tuple(buf.shape)} from rank {rank - 1}")
            dist.recv(buf, src=rank - 1)
    dist.barrier()
    finish()


def p2p_microbatch_count() -> None:
    """Sender stages run 3 microbatches, receiver stages were configured for 2."""
    rank, _ = init()
    n_mb = 3 if rank % 2 == 0 else 2
    log(f"stage {rank // 2}: num_microbatches={n_mb}")
    for mb in range(n_mb):
        if rank % 2 == 0:
            act = torch.randn(2, 64, 8)
            log(f"stage {rank // 2} mb {mb}: send activations {tuple(act.shape)} to rank {rank + 1}")
            dist.send(act, dst=rank + 1)
        else:
            buf = torch.empty(2, 64, 8)
            log(f"stage {rank // 2} mb {mb}: recv activations {tuple(buf.shape)} from rank {rank - 1}")
            dist.recv(buf, src=rank - 1)
    log(f"rank {rank}: pipeline step done, waiting at barrier")
    dist.barrier()
    finish()


# --------------------------------------------------------------------------- FSDP


def _fsdp_model(hidden: int) -> torch.nn.Module:
    from torch.distributed.fsdp import fully_shard

    model = tiny_model(hidden)
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    return model


def fsdp_divergent_init() -> None:
    """Rank 1 builds its model from a different config (hidden 24 instead of 16)."""
    rank, _ = init()
    hidden = 24 if rank == 1 else 16
    log(f"rank {rank}: building model with hidden={hidden}")
    model = _fsdp_model(hidden)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(3):
        x, y = torch.randn(4, 8), torch.randn(4, 1)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        log(f"rank {rank} step {step} loss {loss.item():.4f}")
    finish()


def fsdp_divergent_forward() -> None:
    """Rank 1 does an extra generate-style forward (no synced forward) before the next step."""
    rank, _ = init()
    model = _fsdp_model(16)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(4):
        x, y = torch.randn(4, 8), torch.randn(4, 1)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        log(f"rank {rank} step {step} loss {loss.item():.4f}")
        if step == 1 and rank == 1:
            log("rank 1: generating a sample for logging")
            with torch.no_grad():
                model(torch.randn(1, 8))
    finish()


# --------------------------------------------------------------------------- crashes


def crash_value_error() -> None:
    """Rank 1 raises ValueError in its data pipeline mid-training."""
    rank, _ = init()
    model = tiny_model()
    for step in range(6):
        if rank == 1 and step == 3:
            batch = {"input_ids": [1, 2, 3], "labels": [1, 2]}
            if len(batch["input_ids"]) != len(batch["labels"]):
                raise ValueError(
                    f"input_ids and labels have different lengths ({len(batch['input_ids'])} vs {len(batch['labels'])})"
                )
        loss = train_step(model, step, rank)
        if rank == 0:
            log(f"step {step} loss {loss:.4f}")
    finish()


def crash_segfault() -> None:
    """Rank 2 dies from SIGSEGV (a native fault in an extension, simulated with os.kill)."""
    rank, _ = init()
    model = tiny_model()
    for step in range(6):
        if rank == 2 and step == 3:
            os.kill(os.getpid(), signal.SIGSEGV)
        loss = train_step(model, step, rank)
        if rank == 0:
            log(f"step {step} loss {loss:.4f}")
    finish()


def crash_file_not_found() -> None:
    """Rank 0 resumes from a checkpoint path that does not exist; the others wait at a barrier."""
    rank, _ = init()
    model = tiny_model()
    if rank == 0:
        path = "/tmp/repro-checkpoints/run-42/step_1000/model.pt"
        log(f"resuming from {path}")
        model.load_state_dict(torch.load(path))
    dist.barrier()
    train(model, rank, 3)
    finish()


SCENARIOS = {
    "subset_barrier": subset_barrier,
    "subset_allreduce_save": subset_allreduce_save,
    "subset_uneven_batches": subset_uneven_batches,
    "subset_uneven_batches_wait": subset_uneven_batches_wait,
    "subset_early_stop": subset_early_stop,
    "subset_ddp_eval": subset_ddp_eval,
    "host_work_tokenise": host_work_tokenise,
    "host_work_checkpoint": host_work_checkpoint,
    "host_work_eval": host_work_eval,
    "mismatch_op": mismatch_op,
    "mismatch_size": mismatch_size,
    "p2p_shape_smaller": p2p_shape_smaller,
    "p2p_microbatch_count": p2p_microbatch_count,
    "fsdp_divergent_init": fsdp_divergent_init,
    "fsdp_divergent_forward": fsdp_divergent_forward,
    "crash_value_error": crash_value_error,
    "crash_segfault": crash_segfault,
    "crash_file_not_found": crash_file_not_found,
}


def _dump_flight_recorder() -> None:
    prefix = os.environ.get("TORCH_FR_DUMP_TEMP_FILE") or os.environ.get("TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
    if not prefix or not dist.is_initialized():
        return
    try:
        data = torch._C._distributed_c10d._dump_fr_trace(True, True, False)
        with open(f"{prefix}{dist.get_rank()}", "wb") as f:
            f.write(data)
    except Exception:  # a failed dump must not hide the real error
        pass


@record
def main() -> None:
    name = sys.argv[1]
    if os.environ.get("REPRO_STACK_DUMP_S"):  # the stacks of a silent hang, as py-spy dump would show them
        import faulthandler

        faulthandler.dump_traceback_later(float(os.environ["REPRO_STACK_DUMP_S"]), exit=False)
    try:
        SCENARIOS[name]()
    except BaseException:
        _dump_flight_recorder()
        raise


if __name__ == "__main__":
    main()
