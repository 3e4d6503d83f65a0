"""Recipes for jobs with no failure (label ``no-failure``): healthy, still running, or stopped on purpose.

A healthy log must not be diagnosed as a failure because one line looks like a symptom
("Saving checkpoint", a warning, a loss spike that recovers). Variants: a run that completes,
a run still going when the log was taken, a Slurm time limit or preemption, an ``scancel``,
a user's Ctrl-C, a Kubernetes eviction.
"""

from __future__ import annotations

from denpex_ml.synthetic.recipes.base import Recipe
from denpex_ml.synthetic.scenario import Scenario

__all__ = ["RECIPES"]


def _healthy(sc: Scenario) -> None:
    v = sc.pick_variant(("completed", "still-running", "time-limit", "preempted", "scancel", "ctrl-c", "evicted"))
    rng = sc.rng
    sc.set_initiator(None)
    t = rng.uniform(300, 90000)
    sc.fail_time = t
    for i in range(rng.randint(0, 3)):
        tt = t * (i + 1) / 4
        sc.context(
            0,
            tt,
            rng.choice(
                (
                    f"Saving model checkpoint to output/checkpoint-{(i + 1) * 500}",
                    f"[INFO] Saving checkpoint at iteration {(i + 1) * 1000} to /checkpoints/run",
                    f"{{'eval_loss': {rng.uniform(0.5, 3):.4f}, 'eval_runtime': {rng.uniform(5, 300):.2f}, 'epoch': {i + 1}.0}}",
                    f"Epoch {i}: 100%|##########| {rng.randint(100, 900)}/{rng.randint(100, 900)} [{rng.randint(1, 59)}:{rng.randint(10, 59)}<00:00, {rng.uniform(1, 9):.2f}it/s, loss={rng.uniform(0.2, 3):.3f}]",
                )
            ),
        )
    if v == "completed":
        end = rng.choice(
            (
                "Training completed. Do not forget to share your model on huggingface.co/models =)",
                f"{{'train_runtime': {t:.1f}, 'train_samples_per_second': {rng.uniform(1, 90):.3f}, 'train_steps_per_second': {rng.uniform(0.1, 9):.3f}, 'train_loss': {rng.uniform(0.2, 2):.4f}, 'epoch': {rng.randint(1, 5)}.0}}",
                f"[after training is done] datetime: {sc.when(t):%Y-%m-%d %H:%M:%S}",
                "`Trainer.fit` stopped: `max_epochs=" + str(rng.randint(1, 50)) + "` reached.",
            )
        )
        sc.root(0, t, end)
    elif v in ("time-limit", "preempted"):
        why = "DUE TO TIME LIMIT" if v == "time-limit" else "DUE TO PREEMPTION"
        sc.root(
            None,
            t,
            f"slurmstepd: error: *** JOB {rng.randint(10**5, 10**7)} ON {sc.host(0)} CANCELLED AT {sc.when(t):%Y-%m-%dT%H:%M:%S} {why} ***",
            node=0,
        )
        if sc.chance(0.6):
            sc.symptom(
                None,
                t + 0.5,
                "WARNING:torch.distributed.elastic.agent.server.api:Received 15 death signal, shutting down workers",
                node=0,
            )
    elif v == "scancel":
        step = f"{rng.randint(10**4, 10**6)}.0"
        sc.root(None, t, "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.", node=0)
        sc.symptom(
            None,
            t + 0.2,
            f"slurmstepd: error: *** STEP {step} ON {sc.host(0)} CANCELLED AT {sc.when(t):%Y-%m-%dT%H:%M:%S} ***",
            node=0,
        )
    elif v == "ctrl-c":
        sc.root(
            None,
            t,
            "WARNING:torch.distributed.elastic.agent.server.api:Received 2 death signal, shutting down workers",
            node=0,
        )
        for r in sc.visible[: rng.randint(1, 3)]:
            sc.symptom(r, t + 0.1, "KeyboardInterrupt")
    elif v == "evicted":
        sc.root(
            None,
            t,
            rng.choice(
                (
                    "The node was low on resource: ephemeral-storage. Evicted pod trainer-worker-0",
                    "Spot instance is being preempted: termination notice received, node will shut down in 120s",
                    "Preemption notice received for node; draining workers",
                )
            ),
            node=0,
        )
    # "still-running": the background alone (steps, losses, checkpoints) up to where the log was taken


RECIPES = (Recipe("no-failure", "healthy", _healthy, sample_fingerprints=False),)
