"""Recipes for real failures outside the taxonomy (label ``unknown``), for abstention.

Each is a plausible job failure none of the taxonomy ids covers: an agent killed by
SIGHUP, a licence server, a custom framework's fatal check, a Triton/Inductor
compile failure, an experiment tracker hang, a hub rate limit.
"""

from __future__ import annotations

from denpex_ml.synthetic.fragments import downstream, traceback
from denpex_ml.synthetic.recipes.base import Recipe, crash_with_fallout, script_frames, teardown
from denpex_ml.synthetic.scenario import Scenario

__all__ = ["RECIPES"]


def _unknown(sc: Scenario) -> None:
    v = sc.pick_variant(
        (
            "sighup",
            "licence-server",
            "custom-fatal",
            "triton-compile",
            "wandb-hang",
            "hub-rate-limit",
        )
    )
    rng = sc.rng
    t = rng.uniform(60, 90000)
    sc.fail_time = t
    if v == "sighup":
        sc.set_initiator(None)
        sc.symptom(
            None,
            t,
            "WARNING:torch.distributed.elastic.agent.server.api:Received 1 death signal, shutting down workers",
            node=0,
        )
        for r in sc.visible[:4]:
            sc.symptom(
                None,
                t + 0.1,
                f"WARNING:torch.distributed.elastic.multiprocessing.api:Sending process {sc.pid(r)} closing signal SIGHUP",
                node=0,
            )
        sc.symptom(
            None,
            t + 1,
            traceback(
                sc,
                [
                    (
                        "sp:torch/distributed/elastic/multiprocessing/api.py",
                        62,
                        "_terminate_process_handler",
                        'raise SignalException(f"Process {os.getpid()} got signal: {sigval}", sigval=sigval)',
                    )
                ],
                f"torch.distributed.elastic.multiprocessing.api.SignalException: Process {sc.pid(0) - 60} got signal: 1",
            ),
            node=0,
        )
        return
    if v == "licence-server":
        text = traceback(
            sc,
            script_frames(sc, ("/opt/simtool/python/simtool/license.py", 88, "checkout", "raise LicenseError(msg)")),
            f"simtool.license.LicenseError: License checkout failed for feature 'solver_gpu': license server 27000@{sc.ip(9)} not responding (error -15)",
        )
    elif v == "custom-fatal":
        text = f"F{sc.when(t):%m%d %H:%M:%S}.{rng.randrange(10**6):06d} {sc.pid(sc.initiator or 0)} trainer_core.cc:{rng.randint(100, 900)}] Check failed: shard_manifest.version() == kManifestVersion (3 vs. 4) incompatible shard manifest\n*** Check failure stack trace: ***"
    elif v == "triton-compile":
        text = traceback(
            sc,
            script_frames(
                sc,
                ("sp:torch/_inductor/codecache.py", 2280, "load", "return cls._load_module(key, path)"),
                ("sp:triton/compiler/compiler.py", 282, "compile", "next_module = compile_ir(module, metadata)"),
            ),
            "torch._inductor.exc.InductorError: RuntimeError: PassManager::run failed\n\nSet TORCHDYNAMO_VERBOSE=1 for the internal stack trace (please do this especially if you're reporting a bug to PyTorch).",
        )
    elif v == "wandb-hang":
        sc.set_initiator(0)
        text = "wandb: Network error (ConnectTimeout), entering retry loop.\n" + traceback(
            sc,
            script_frames(sc, ("sp:wandb/sdk/wandb_init.py", 1266, "init", "wi.init()")),
            "wandb.errors.errors.CommError: Run initialization has timed out after 90.0 sec. Please refer to the documentation for additional information: https://docs.wandb.ai/guides/track/tracking-faq#initstarterror-error-communicating-with-wandb-process-",
        )
    else:
        text = traceback(
            sc,
            script_frames(
                sc,
                (
                    "sp:huggingface_hub/utils/_http.py",
                    477,
                    "hf_raise_for_status",
                    "raise _format(HfHubHTTPError, str(e), response) from e",
                ),
            ),
            "huggingface_hub.errors.HfHubHTTPError: 429 Client Error: Too Many Requests for url: https://huggingface.co/api/models/org/model/revision/main",
        )
    if sc.chance(0.5):
        crash_with_fallout(sc, t, text)
    else:
        sc.root(sc.initiator, t, text)
        if sc.chance(0.5):
            downstream(sc, t, mode="watchdog")
        teardown(sc, t + 5, [(sc.initiator or 0, 1)])


RECIPES = (Recipe("unknown", "unknown", _unknown),)
