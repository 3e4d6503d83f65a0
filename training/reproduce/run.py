"""Reproduce real distributed hangs and crashes on CPU (gloo, torchrun, 4 ranks) and keep their logs.

    python -m training.reproduce.run --out data/reproduced            # all runs, one after another
    python -m training.reproduce.run --out data/reproduced --only mismatch-op-detail
    python -m training.reproduce.run --list

Each run starts ``torchrun --standalone --nproc-per-node 4 --redirects 3 --log-dir DIR -m
training.reproduce.scenarios <worker>`` under a hard wall-clock limit and keeps, verbatim
except for masking of the host name and home paths:

* ``jobs/<id>/rank<N>.log``: what rank N wrote (stdout and stderr merged, see scenarios.py);
* ``jobs/<id>/launcher.log``: what torchrun itself printed (agent warnings, ChildFailedError summary);
* ``jobs/<id>/fr_trace_<N>``: PyTorch Flight Recorder dumps (pickle) of the ranks that raised;
* one labelled incident per run in ``reproduced.jsonl`` (docs/dataset-format.md).

``--only`` takes a run id (``mismatch-op-detail``), a scenario (``mismatch``), or a worker
name (``mismatch_op``); the other records of ``reproduced.jsonl`` are kept.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from training.reproduce.scenarios import SCENARIOS

REPO = Path(__file__).resolve().parents[2]
WORLD_SIZE = 4
PG_TIMEOUT_S = 10
FR_PREFIX = "fr_trace_"


@dataclass(frozen=True)
class Run:
    scenario: str  # group: subset-hang, host-work, mismatch, p2p, fsdp, crash
    variant: str
    worker: str  # function name in scenarios.SCENARIOS
    label: str
    initiating_rank: int
    description: str
    env: dict[str, str] = field(default_factory=dict)
    #: send SIGINT to the job's process group after this many seconds, as Ctrl-C in the terminal
    #: does when an operator gives up on a silent hang (the hard wall limit still applies)
    interrupt_after_s: float | None = None

    @property
    def id(self) -> str:
        return f"repro-{self.scenario}-{self.variant}"

    @property
    def short(self) -> str:
        return f"{self.scenario}-{self.variant}"


DETAIL = {"TORCH_DISTRIBUTED_DEBUG": "DETAIL"}
#: a silent hang: a process-group timeout far beyond the run, and every worker's stacks dumped by
#: faulthandler after 6 s (standing in for the operator's ``py-spy dump --pid``)
SILENT = {"REPRO_PG_TIMEOUT_S": "600", "REPRO_STACK_DUMP_S": "6"}

RUNS: tuple[Run, ...] = (
    Run(
        "subset-hang",
        "barrier",
        "subset_barrier",
        "subset-rank-collective-hang",
        0,
        "Only rank 0 enters dist.barrier() in a rank-0 evaluation path; ranks 1-3 go on to the next "
        "step's gradient all_reduce. Gloo pairs them up and every rank times out after the 10 s PG timeout.",
    ),
    Run(
        "subset-hang",
        "allreduce-save",
        "subset_allreduce_save",
        "subset-rank-collective-hang",
        0,
        "Rank 0 prints 'Saving checkpoint', saves, then all_reduces a validation metric inside the save "
        "path; ranks 1-3 skip it, print 'training finished' and call destroy_process_group().",
    ),
    Run(
        "subset-hang",
        "uneven-batches",
        "subset_uneven_batches",
        "subset-rank-collective-hang",
        3,
        "Rank 3's data shard has 3 batches, the others 6: rank 3 leaves the loop and destroys the process "
        "group while ranks 0-2 all_reduce gradients of step 3.",
    ),
    Run(
        "subset-hang",
        "uneven-batches-barrier",
        "subset_uneven_batches_wait",
        "subset-rank-collective-hang",
        3,
        "Rank 3's data shard has 3 batches, the others 6: rank 3 waits at the end-of-epoch barrier while "
        "ranks 0-2 all_reduce gradients of step 3.",
    ),
    Run(
        "subset-hang",
        "early-stop",
        "subset_early_stop",
        "subset-rank-collective-hang",
        0,
        "Only rank 0 checks the early-stopping patience: after epoch 1 it leaves the loop and all_gathers "
        "the final metrics while ranks 1-3 start epoch 2's gradient all_reduce.",
    ),
    Run(
        "subset-hang",
        "ddp-eval",
        "subset_ddp_eval",
        "subset-rank-collective-hang",
        0,
        "A DDP model with BatchNorm: rank 0 validates through the DDP wrapper (its forward broadcasts the "
        "buffers) while ranks 1-3 wait at the barrier after training.",
    ),
    Run(
        "subset-hang",
        "silent-interrupted",
        "subset_barrier",
        "subset-rank-collective-hang",
        0,
        "Only rank 0 enters dist.barrier() in a rank-0 evaluation path while ranks 1-3 train on, with a "
        "600 s PG timeout: nothing times out. faulthandler dumps every rank's stack after 6 s; after 12 s the "
        "operator presses Ctrl-C (SIGINT to the process group).",
        SILENT,
        interrupt_after_s=12,
    ),
    Run(
        "host-work",
        "tokenise",
        "host_work_tokenise",
        "host-work-timeout",
        0,
        "Rank 0 'tokenises the dataset' (time.sleep 22 s) before a barrier; the others wait at the barrier "
        "with a 10 s PG timeout.",
    ),
    Run(
        "host-work",
        "checkpoint",
        "host_work_checkpoint",
        "host-work-timeout",
        0,
        "Rank 0 'writes a checkpoint' with a busy host loop of 22 s after step 1; ranks 1-3 enter the "
        "gradient all_reduce of step 2 and time out after 10 s.",
    ),
    Run(
        "host-work",
        "eval",
        "host_work_eval",
        "host-work-timeout",
        0,
        "Rank 0 runs a 22 s host-side evaluation after step 1 (a busy loop, no collective); ranks 1-3 "
        "enter the gradient all_reduce of step 2 and time out after 10 s.",
    ),
    Run(
        "host-work",
        "silent-interrupted",
        "host_work_checkpoint",
        "host-work-timeout",
        0,
        "Rank 0 'writes a checkpoint' with a busy host loop after step 1 while ranks 1-3 wait in step 2's "
        "gradient all_reduce, with a 600 s PG timeout: nothing times out. faulthandler dumps every rank's "
        "stack after 6 s; after 12 s the operator presses Ctrl-C (SIGINT to the process group).",
        SILENT,
        interrupt_after_s=12,
    ),
    Run(
        "mismatch",
        "op",
        "mismatch_op",
        "collective-mismatch",
        2,
        "Rank 2 calls all_gather on a metric where ranks 0, 1, 3 call all_reduce (TORCH_DISTRIBUTED_DEBUG unset).",
    ),
    Run(
        "mismatch",
        "op-detail",
        "mismatch_op",
        "collective-mismatch",
        2,
        "Rank 2 calls all_gather where the others call all_reduce, with TORCH_DISTRIBUTED_DEBUG=DETAIL.",
        DETAIL,
    ),
    Run(
        "mismatch",
        "size",
        "mismatch_size",
        "collective-mismatch",
        2,
        "Rank 2 all_reduces a tensor of 24 elements, the others of 16 (TORCH_DISTRIBUTED_DEBUG unset).",
    ),
    Run(
        "mismatch",
        "size-detail",
        "mismatch_size",
        "collective-mismatch",
        2,
        "Rank 2 all_reduces 24 elements, the others 16, with TORCH_DISTRIBUTED_DEBUG=DETAIL.",
        DETAIL,
    ),
    Run(
        "mismatch",
        "op-silent-interrupted",
        "mismatch_op",
        "collective-mismatch",
        2,
        "Rank 2 calls all_gather where the others call all_reduce, with a 600 s PG timeout: faulthandler "
        "dumps every rank's stack after 6 s; after 12 s the operator presses Ctrl-C.",
        SILENT,
        interrupt_after_s=12,
    ),
    Run(
        "p2p",
        "recv-smaller",
        "p2p_shape_smaller",
        "pipeline-p2p-shape-mismatch",
        1,
        "Pipeline pairs 0->1 and 2->3: senders send activations of shape (2, 128, 8), receivers post recv "
        "buffers of shape (2, 96, 8).",
    ),
    Run(
        "p2p",
        "microbatch-count",
        "p2p_microbatch_count",
        "pipeline-p2p-shape-mismatch",
        0,
        "Pipeline pairs 0->1 and 2->3: sender stages run 3 microbatches, receiver stages were configured for 2 "
        "and go on to a barrier, so the third send is never matched.",
    ),
    Run(
        "fsdp",
        "divergent-init",
        "fsdp_divergent_init",
        "fsdp-divergent-init-hang",
        1,
        "FSDP2 (fully_shard) on CPU/gloo: rank 1 builds its model with hidden=24, the others hidden=16, "
        "so the parameter all-gathers of the first forward disagree in size.",
    ),
    Run(
        "fsdp",
        "divergent-forward",
        "fsdp_divergent_forward",
        "zero3-divergent-forward-hang",
        1,
        "FSDP2 (fully_shard) on CPU/gloo: after step 1 rank 1 runs one extra generate-style forward under "
        "no_grad; its parameter all-gathers no longer line up with the other ranks' collectives.",
    ),
    Run(
        "crash",
        "value-error",
        "crash_value_error",
        "uncaught-exception-crash",
        1,
        "Rank 1 raises ValueError in its batch check at step 3 while ranks 0, 2, 3 wait in the gradient all_reduce.",
    ),
    Run(
        "crash",
        "segfault",
        "crash_segfault",
        "segfault-native-crash",
        2,
        "Rank 2 is killed by SIGSEGV at step 3 (os.kill(os.getpid(), SIGSEGV), standing in for a native fault).",
    ),
    Run(
        "crash",
        "file-not-found",
        "crash_file_not_found",
        "file-not-found",
        0,
        "Rank 0 resumes from a checkpoint path that does not exist (torch.load raises FileNotFoundError) "
        "while ranks 1-3 wait at a barrier.",
    ),
)


# --------------------------------------------------------------------------- masking


def _masker():
    names = {n for n in {socket.gethostname(), socket.getfqdn(), socket.gethostname().split(".")[0]} if n}
    names -= {"localhost", "localhost.localdomain"}
    host_re = (
        re.compile(
            r"(?<![\w.-])(" + "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)) + r")(?![\w-])"
        )
        if names
        else None
    )
    home_re = re.compile(r"/root(?=/|\b)|/home/[^/\s'\"]+")

    def mask(text: str) -> str:
        if host_re is not None:
            text = host_re.sub("node-a", text)
        return home_re.sub("/home/user", text)

    return mask


MASK = _masker()


# --------------------------------------------------------------------------- one run


def _torchrun() -> str:
    exe = Path(sys.executable).parent / "torchrun"
    return str(exe) if exe.exists() else (shutil.which("torchrun") or "torchrun")


def _base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_NCCL_", "NCCL_", "TORCH_FR_"))}
    env.pop("TORCH_DISTRIBUTED_DEBUG", None)
    env.pop("TORCH_CPP_LOG_LEVEL", None)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _read(path: Path) -> str:
    return path.read_bytes().decode("utf-8", "replace") if path.exists() else ""


def run_one(run: Run, out: Path, wall_limit_s: int) -> dict:
    jobs = out / "jobs"
    job_dir = jobs / run.id
    with tempfile.TemporaryDirectory(prefix="repro-") as tmp:
        tmp_path = Path(tmp)
        log_dir, fr_dir = tmp_path / "logs", tmp_path / "fr"
        fr_dir.mkdir()
        run_env = {
            "PYTHONUNBUFFERED": "1",
            "TORCH_FR_BUFFER_SIZE": "2000",
            "TORCH_FR_DUMP_TEMP_FILE": str(fr_dir / FR_PREFIX),
            "REPRO_PG_TIMEOUT_S": str(PG_TIMEOUT_S),
            **run.env,
        }
        env = {**_base_env(), **run_env}
        cmd = [
            _torchrun(),
            "--standalone",
            f"--nproc-per-node={WORLD_SIZE}",
            "--redirects",
            "3",
            "--log-dir",
            str(log_dir),
            "-m",
            "training.reproduce.scenarios",
            run.worker,
        ]
        t0 = time.monotonic()
        proc = subprocess.Popen(
            cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
        )
        killed = interrupted = False
        try:
            launcher_raw, _ = proc.communicate(timeout=run.interrupt_after_s or wall_limit_s)
        except subprocess.TimeoutExpired:
            if run.interrupt_after_s:
                interrupted = True
                os.killpg(proc.pid, signal.SIGINT)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    launcher_raw, _ = proc.communicate(timeout=wall_limit_s)
            if proc.returncode is None:
                killed = True
                os.killpg(proc.pid, signal.SIGKILL)
                launcher_raw, _ = proc.communicate()
        wall = time.monotonic() - t0

        logs: dict[str, str] = {}
        for r in range(WORLD_SIZE):
            found = sorted(log_dir.glob(f"**/attempt_*/{r}/stdout.log"))
            text = _read(found[-1]) if found else ""
            err = _read(found[-1].with_name("stderr.log")) if found else ""
            if err.strip():  # nothing should be left here after dup2, but keep it if there is
                text += err
            if text.strip():
                logs[f"rank{r}.log"] = MASK(text)
        launcher = MASK(launcher_raw.decode("utf-8", "replace"))
        logs["launcher.log"] = launcher

        if job_dir.exists():
            shutil.rmtree(job_dir)
        job_dir.mkdir(parents=True)
        for name, text in logs.items():
            (job_dir / name).write_text(text, encoding="utf-8")
        dumps = []
        for f in sorted(fr_dir.glob(FR_PREFIX + "*")):
            shutil.copyfile(f, job_dir / f.name)
            dumps.append(f.name)
        fr_analysis = _analyse_fr(fr_dir) if dumps else None
        fr_summary = _summarise_fr(fr_dir) if dumps else None

    m = re.search(r"Root Cause \(first observed failure\):.*?rank\s*:\s*(\d+)", launcher, re.S)
    record = {
        "id": run.id,
        "label": run.label,
        "logs": logs,
        "initiating_rank": run.initiating_rank,
        "source": f"reproduced:training/reproduce/run.py:{run.short}",
        "meta": {
            "provenance": "reproduced",
            "backend": "gloo",
            "torch": _torch_version(),
            "world_size": WORLD_SIZE,
            "env": run_env | {"TORCH_FR_DUMP_TEMP_FILE": f"<job dir>/{FR_PREFIX}"},
            "scenario": run.short,
            "worker": f"training/reproduce/scenarios.py:{run.worker}",
            "description": run.description,
            "pg_timeout_s": PG_TIMEOUT_S,
            "launcher_cmd": "torchrun --standalone --nproc-per-node=4 --redirects 3 --log-dir <tmp> "
            f"-m training.reproduce.scenarios {run.worker}",
            "launcher_exit_code": proc.returncode,
            "killed_by_wall_limit": killed,
            "interrupted_after_s": run.interrupt_after_s if interrupted else None,
            "wall_s": round(wall, 1),
            "torchrun_root_cause_rank": int(m.group(1)) if m else None,
            "job_dir": f"data/reproduced/jobs/{run.id}",
            "fr_dumps": dumps,
            "fr_dump_format": "pickle (torch._C._distributed_c10d._dump_fr_trace), written by the worker on exception"
            if dumps
            else None,
        },
    }
    if fr_summary:
        record["meta"]["fr_summary"] = fr_summary
    if fr_analysis:
        ok, text = fr_analysis
        record["meta"]["fr_analysis" if ok else "fr_analysis_error"] = MASK(text)
    return record


def _summarise_fr(fr_dir: Path) -> dict:
    """Per rank: the process-group status and the last Flight Recorder entries of the dump."""
    import pickle

    out = {}
    for f in sorted(fr_dir.glob(FR_PREFIX + "*")):
        try:
            d = pickle.loads(f.read_bytes())
        except Exception as e:  # keep going; the dump file itself is kept
            out[f.name] = {"error": repr(e)}
            continue
        out[f.name] = {
            "version": d.get("version"),
            "pg_status": d.get("pg_status"),
            "n_entries": len(d.get("entries", [])),
            "last_entries": [
                {
                    k: e.get(k)
                    for k in (
                        "collective_seq_id",
                        "p2p_seq_id",
                        "profiling_name",
                        "input_sizes",
                        "output_sizes",
                        "input_dtypes",
                        "state",
                        "timeout_ms",
                        "is_p2p",
                    )
                }
                for e in d.get("entries", [])[-3:]
            ],
        }
    return out


def _analyse_fr(fr_dir: Path) -> tuple[bool, str] | None:
    """PyTorch's own Flight Recorder analyser over the dumps (best effort, partial ranks allowed)."""
    try:
        p = subprocess.run(
            [
                sys.executable,
                "-m",
                "torch.distributed.flight_recorder.fr_trace",
                str(fr_dir),
                "-p",
                FR_PREFIX,
                "--allow-incomplete-ranks",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=REPO,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (p.stdout + p.stderr).replace(str(fr_dir), "<job dir>").strip()
    if p.returncode != 0:  # keep only the error line, not the analyser's traceback
        return False, text.splitlines()[-1] if text else f"exit {p.returncode}"
    return (True, text) if text else None


def _torch_version() -> str:
    out = subprocess.run(
        [sys.executable, "-c", "import torch;print(torch.__version__)"], capture_output=True, text=True
    )
    return out.stdout.strip()


# --------------------------------------------------------------------------- driver


def select(only: list[str] | None) -> list[Run]:
    if not only:
        return list(RUNS)
    chosen = []
    for name in only:
        key = name.removeprefix("repro-")
        hits = [r for r in RUNS if key in (r.short, r.scenario, r.worker, r.worker.replace("_", "-"))]
        if not hits:
            raise SystemExit(f"unknown run {name!r}; known: {', '.join(r.short for r in RUNS)}")
        chosen += [r for r in hits if r not in chosen]
    return chosen


def write_dataset(out: Path, records: dict[str, dict]) -> Path:
    path = out / "reproduced.jsonl"
    existing: dict[str, dict] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                rec = json.loads(line)
                existing[rec["id"]] = rec
    existing.update(records)
    order = [r.id for r in RUNS]
    ids = sorted(existing, key=lambda i: (order.index(i) if i in order else len(order), i))
    path.write_text("".join(json.dumps(existing[i], ensure_ascii=False) + "\n" for i in ids), encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=REPO / "data" / "reproduced")
    ap.add_argument("--only", action="append", help="run id, scenario or worker name (repeatable)")
    ap.add_argument("--wall-limit-s", type=int, default=90, help="hard wall-clock limit per run")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args(argv)
    assert all(r.worker in SCENARIOS for r in RUNS)
    if args.list:
        for r in RUNS:
            print(f"{r.short:32} {r.label:32} {r.worker}")
        return 0
    runs = select(args.only)
    args.out.mkdir(parents=True, exist_ok=True)
    records = {}
    for run in runs:
        print(f"[{time.strftime('%H:%M:%S')}] {run.id} ...", flush=True)
        rec = run_one(run, args.out, args.wall_limit_s)
        records[run.id] = rec
        meta = rec["meta"]
        print(
            f"    exit {meta['launcher_exit_code']} in {meta['wall_s']}s, killed={meta['killed_by_wall_limit']}, "
            f"root-cause rank {meta['torchrun_root_cause_rank']}, fr dumps {meta['fr_dumps']}",
            flush=True,
        )
    path = write_dataset(args.out, records)
    print(f"wrote {len(records)} record(s) to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
