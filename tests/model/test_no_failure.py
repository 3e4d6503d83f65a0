"""The shipped model says "no failure found" for healthy, completed, cancelled and interrupted jobs."""

from __future__ import annotations

import pytest

from denpex_ml import classify

HEALTHY = {
    "healthy run with a checkpoint save": (
        "[rank0]: {'loss': 2.1043, 'grad_norm': 1.25, 'learning_rate': 1.9e-05, 'epoch': 0.1}\n"
        "[rank0]: {'loss': 1.9342, 'grad_norm': 1.02, 'learning_rate': 1.8e-05, 'epoch': 0.2}\n"
        "[rank0]: Saving model checkpoint to output/checkpoint-500\n"
        "[rank0]: {'loss': 1.8127, 'grad_norm': 0.98, 'learning_rate': 1.7e-05, 'epoch': 0.3}\n"
    ),
    "completed": (
        "step 100 loss 2.31 lr 3e-4\nstep 200 loss 2.02 lr 3e-4\nSaving checkpoint at iteration 200\n"
        "{'train_runtime': 1234.5, 'train_samples_per_second': 12.3, 'train_loss': 1.9, 'epoch': 3.0}\n"
        "Training completed. Do not forget to share your model on huggingface.co/models =)\n"
    ),
    "slurm time limit": (
        "step 100 loss 2.31\nstep 200 loss 2.02\n"
        "slurmstepd: error: *** JOB 1234567 ON node-a CANCELLED AT 2025-01-01T10:00:00 DUE TO TIME LIMIT ***\n"
    ),
    "ctrl-c": (
        "[rank0]: step 12 loss 2.0\n"
        "W1201 10:00:00.000 torch/distributed/elastic/agent/server/api.py:704] Received 2 death signal, shutting down workers\n"
        '[rank0]: Traceback (most recent call last):\n[rank0]:   File "train.py", line 40, in <module>\n[rank0]: KeyboardInterrupt\n'
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(HEALTHY))
def test_no_failure_found(name: str) -> None:
    d = classify(text=HEALTHY[name])
    assert d.label == "no-failure", (d.label, d.alternatives[:3])
    assert d.no_failure and d.initiating_rank is None


@pytest.mark.slow
def test_a_real_failure_is_not_no_failure() -> None:
    d = classify(
        text="[rank0]: step 3 loss 1.0\n[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    )
    assert d.label == "cuda-oom" and d.initiating_rank == 1
