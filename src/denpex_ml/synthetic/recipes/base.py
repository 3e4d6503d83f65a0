"""What a recipe is, and the failure patterns many recipes share.

A :class:`Recipe` names a label and a ``build`` function that adds the scenario's
events: the initiator's root-cause lines, the waiting ranks' symptoms, context lines.
Background noise, red herrings, fingerprint lines and rendering are added by the
generator, not by recipes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from denpex_ml.synthetic.fragments import Frame, downstream, elastic_teardown, traceback
from denpex_ml.synthetic.scenario import Scenario

__all__ = ["Recipe", "crash_with_fallout", "script_frames", "teardown"]


@dataclass(frozen=True)
class Recipe:
    """A scenario recipe for one label.

    Attributes
    ----------
    label:
        The taxonomy id (or ``unknown``) every incident of this recipe carries.
    family:
        Module family (hangs, comm, moe, hardware, resources, numerics, application, unknown).
    build:
        Adds events to a :class:`Scenario`; must set ``sc.fail_time``.
    regex_examples:
        Concrete lines matching this label's regex fingerprints, used when the
        generator samples a regex fingerprint of the taxonomy entry.
    sample_fingerprints:
        Whether the generator may add extra lines carrying the entry's fingerprints (off for
        recipes whose fingerprints are not error lines, e.g. ``no-failure``).
    """

    label: str
    family: str
    build: Callable[[Scenario], None]
    regex_examples: tuple[str, ...] = ()
    sample_fingerprints: bool = True

    @property
    def name(self) -> str:
        return f"{self.family}/{self.label}"


def script_frames(sc: Scenario, *extra: Frame) -> list[Frame]:
    """The user script's outer frames followed by ``extra`` (library) frames."""
    rng = sc.rng
    frames: list[Frame] = [
        ("<script>", rng.randint(120, 900), "<module>", "main()"),
        ("<script>", rng.randint(40, 700), rng.choice(("main", "train", "run")), "trainer.train()"),
    ]
    frames.extend(extra)
    return frames


def teardown(sc: Scenario, t: float, failed: Sequence[tuple[int, int]]) -> None:
    """The launcher's own reaction to failed ranks, in the scenario's launcher style."""
    if not failed:
        return
    rng = sc.rng
    first_rank, code = failed[0]
    node = sc.node_of(first_rank)
    if sc.launcher == "srun":
        step = f"{rng.randint(1000, 99999)}.0"
        for r, c in failed[:4]:
            sc.agent(
                sc.node_of(r),
                t + sc.jitter(1.0),
                f"srun: error: {sc.host(r)}: task {r}: {'Exited with exit code ' + str(c) if c > 0 else 'Aborted' if c == -6 else 'Killed'}",
            )
        sc.agent(
            node,
            t + 1.2,
            f"slurmstepd: error: *** STEP {step} ON {sc.host(0)} CANCELLED AT {sc.when(t + 1):%Y-%m-%dT%H:%M:%S} ***",
        )
        sc.agent(node, t + 1.3, "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.")
    elif sc.launcher == "mpirun":
        sc.agent(
            node,
            t + 1.0,
            "-" * 74
            + "\nPrimary job  terminated normally, but 1 process returned\na non-zero exit code. Per user-direction, the job has been aborted.\n"
            + "-" * 74,
        )
        sc.agent(
            node,
            t + 1.5,
            "-"
            * 74
            + "\nmpirun detected that one or more processes exited with non-zero status, thus causing\nthe job to be terminated. The first process to do so was:\n\n"
            f"  Process name: [[{rng.randint(10000, 60000)},1],{first_rank}]\n  Exit code:    {abs(code) if code > 0 else 134}\n"
            + "-"
            * 74,
        )
    elif sc.launcher == "pdsh":
        for r, _ in failed[:3]:
            sc.agent(
                sc.node_of(r),
                t + sc.jitter(1.0),
                f"[{sc.when(t):%Y-%m-%d %H:%M:%S},{rng.randrange(1000):03d}] [INFO] [launch.py:{rng.choice((286, 315, 428))}:sigkill_handler] Killing subprocess {sc.pid(r)}",
            )
        cmd = f"['{sc.env.python}', '-u', '{sc.env.script}', '--local_rank={sc.local_of(first_rank)}', '--deepspeed', '--deepspeed_config', 'ds_config.json']"
        sc.agent(
            node,
            t + 1.5,
            f"[{sc.when(t + 1.5):%Y-%m-%d %H:%M:%S},{rng.randrange(1000):03d}] [ERROR] [launch.py:{rng.choice((321, 434))}:sigkill_handler] {cmd} exits with return code = {code}",
        )
        sc.agent(
            node,
            t + 1.7,
            f"pdsh@{sc.host(0)}: {sc.host(first_rank)}: ssh exited with exit code {abs(code) if code > 0 else 1}",
        )
    elif sc.launcher == "ray":
        sc.agent(
            0,
            t + 2.0,
            "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
            f"\tclass_name: {rng.choice(('RayTrainWorker', 'WorkerDict', 'TrainWorker'))}\n\tactor_id: {rng.randrange(16**32):032x}\n\tpid: {sc.pid(first_rank)}\n\tip: {sc.ip(node)}\n"
            "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of file.",
        )
    else:
        elastic_teardown(sc, t, failed)


def crash_with_fallout(
    sc: Scenario,
    t_fail: float,
    root_text: str,
    *,
    exitcode: int = 1,
    op: str | None = None,
    mode: str | None = None,
    numel: int | None = None,
    extra_root: Sequence[str] = (),
) -> None:
    """The commonest shape: the initiator dies with ``root_text``; the others are left waiting.

    The waiting ranks print watchdog timeouts, connection resets or heartbeat aborts
    (``mode``), which usually outnumber the initiator's own lines; then the launcher tears
    the job down.
    """
    init = sc.initiator
    sc.fail_time = t_fail
    if init is None:
        raise ValueError("crash_with_fallout needs an initiating rank")
    sc.root(init, t_fail, root_text)
    for i, extra in enumerate(extra_root):
        sc.root(init, t_fail + 0.01 * (i + 1), extra)
    if len(sc.visible) < 2 or (mode is None and sc.chance(0.15)):
        teardown(sc, t_fail + 2.0 + sc.jitter(3.0), [(init, exitcode)])
        return
    t_end = downstream(sc, t_fail, op=op, mode=mode, numel=numel)
    waiting_code = -6 if sc.rng.random() < 0.7 else 1
    failed = [(init, exitcode)] + [(r, waiting_code) for r in sc.others(6)]
    if sc.chance(0.5):
        failed = failed[1:] + failed[:1]  # agents list failures out of order
    teardown(sc, t_end + 1.0 + sc.jitter(2.0), failed)


def python_exception(sc: Scenario, frames: Sequence[Frame], exc: str) -> str:
    """A traceback, sometimes preceded by a chained cause (``The above exception ...``)."""
    return traceback(sc, frames, exc)
