"""Ranks named inside the text of a line, for lines no launcher prefix assigned to a rank.

Many real logs are one process's output pasted without ``[rankN]:`` prefixes, or a combined
file where only the launcher speaks for the workers. The failing rank is still plain to see
in the words of the messages themselves:

* the launcher reports the worker it saw fail: torchelastic's ``failed (exitcode: -9)
  local_rank: 3 (pid: …)`` and ``local_rank 3 FAILED with no error file``, ``mp.spawn``'s
  ``-- Process 1 terminated with the following error`` / ``process 1 terminated with signal
  SIGKILL``, DeepSpeed's launcher ``[…, '--local_rank=2', …] exits with return code = 1``,
  PyTorch/XLA's ``xmp.spawn`` ``Exception in device=TPU:6: …`` (the process's ordinal), XLA's
  PjRt client ``Execution of replica 0 failed: …``, a device-memory error naming its GPU
  (``CUDA out of memory. Tried to allocate … (GPU 3; …``),
  Open MPI's ``mpirun`` ``The first process to do so was: Process name: [[18963,1],2]`` or
  ``mpirun noticed that process rank 2 with PID … exited on signal 9`` (a world rank, on any
  number of hosts), torchelastic's printed ``ProcessFailure(local_rank=0, …, exitcode=-7, …)``,
  PaddlePaddle's launcher ``the trainer process with rank=[2] was aborted``, Composer's launcher
  ``Rank 4 crashed with exit code -6``;
* the error names its own rank: DDP's ``did not receive grad for rank 3``, ``[Rank 5]
  Watchdog caught …`` quoted inside a message, ``rank = 7`` in a DeepEP/NCCL check, Megatron's
  ``Rank 3: found NaN in local grad norm``, Ascend's ``(PID:…, Device:1, RankID:1) ERR…``, DataParallel's
  ``Caught StopIteration in replica 0 on device 0``.

A launcher names a *local* rank; it is taken as the global rank only when the job shows a
single host (the usual case of a pasted excerpt). Each clue is one piece of evidence for
:func:`denpex_ml.model.initiator.find_initiator`, never a verdict on its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from denpex_ml.features.select import is_error_line
from denpex_ml.logs.bundle import GLOBAL_STREAM, LogBundle, LogLine

__all__ = ["RankClue", "error_line_naming_rank", "launcher_failed_worker", "only_rank_named", "rank_named_in"]

# the launcher's report of a worker that failed (a local rank)
_LAUNCHER = re.compile(
    r"failed \(exitcode: -?\d+\) local_rank: (?P<a>\d+) \(pid"
    r"|local_rank (?P<b>\d+) FAILED with no error file"
    r"|-- Process (?P<c>\d+) terminated with the following error"
    r"|\bprocess (?P<d>\d+) terminated with (?:signal|exit code)"
    r"|--local_rank=(?P<e>\d+)'.*\] exits with return code = -?[1-9]"
    r"|\bException in device=(?:TPU|GPU|CPU|XLA|CUDA):(?P<f>\d+)\b"
    r"|failed \(exitcode: -?\d+\) for binary located at \S+ with local_rank: (?P<g>\d+)"
    # torchelastic's failure record as it is printed (a dict of ProcessFailure by rank)
    r"|\bProcessFailure\(local_rank=(?P<h>\d+), pid=\d+, exitcode=-?[1-9]"
)
_LAUNCHER_HINT = ("local_rank", "terminated with", "Exception in device=")
# Open MPI's mpirun naming the first process that exited non-zero: "Process name: [[jobid,1],3]"
# (its vpid is the MPI world rank) after "The first process to do so was:"
_MPI_FIRST = re.compile(r"^\s*Process name: \[\[\d+,\d+\],(?P<a>\d+)\]")
# ... or, when a process died of a signal, "mpirun noticed that process rank 3 with PID 4242 on
# node n exited on signal 9 (Killed)" (the world rank again; mpirun reports the first it saw); other
# launchers' reports of the first process that died or aborted, one named group per launcher
_FIRST_DIED = re.compile(
    r"\b(?:mpirun|mpiexec|prterun) noticed that process rank (?P<noticed>\d+) with PID \S+ on node \S+ "
    r"exited on signal"
    r"|\b(?:mpirun|prterun) has exited due to process rank (?P<mpirun>\d+) with PID"
    # paddle.distributed.launch: "ABORT!!! Out of all 4 trainers, the trainer process with rank=[2] was aborted"
    r"|\bthe trainer process with rank=\[(?P<paddle>\d+)\] was aborted"
    # MPICH/PALS mpiexec (Aurora, Polaris): "rank 0 died from signal 11 and dumped core", then the
    # ranks it killed ("rank 4 died from signal 9"): the first line names the process that failed
    r"|^(?:\S+: )?rank (?P<mpiexec>\d+) died from signal (?!9\b|15\b)\d+"
    # Hugging Face's text-generation-launcher naming the shard (tensor-parallel rank) that failed:
    # "ERROR text_generation_launcher: Shard 0 failed to start" (the others are then shut down)
    r"|\btext_generation_launcher: Shard (?P<tgi>\d+) (?:failed to start|crashed)"
    # MosaicML Composer's launcher: "composer.cli.launcher - ERROR - Rank 4 crashed with exit code -6."
    r"|\bcomposer\.cli\.launcher\W+(?:ERROR\W+)?Rank (?P<composer>\d+) crashed with exit code -?[1-9]"
)
#: the words a line needs for :data:`_FIRST_DIED` to be asked, and who each named group is
_FIRST_DIED_HINTS = (
    "noticed that process rank",
    "due to process rank",
    "process with rank=[",
    " died from signal ",
    "text_generation_launcher: Shard ",
    "crashed with exit code",
)
_FIRST_DIED_WHO = {
    "mpirun": "mpirun",
    "paddle": "paddle.distributed.launch",
    "mpiexec": "mpiexec",
    "tgi": "text-generation-launcher",
    "composer": "composer's launcher",
}
# MS-MPI's report after "job aborted:" / "[ranks] message": the rank with an error of its own
# ("[1] process exited without calling finalize", "[0] fatal error"), the others "[0] terminated"
_MSMPI_RANK = re.compile(r"^\[(?P<a>\d+)\] (?:fatal error|process exited without calling finalize)\s*$")
# a replica named as the one that failed - XLA's PjRt client naming the replica (device) whose
# execution failed: the process's device ordinal, taken as the rank only on one host (as a
# launcher's local rank)
_REPLICA = re.compile(
    r"\bExecution of replica (?P<a>\d+) failed"
    # DataParallel re-raising a replica's exception in the main process: "Caught StopIteration in
    # replica 0 on device 0." (the replica's device, taken as the rank as a launcher's local rank is)
    r"|\bCaught \w+ in replica (?P<b>\d+) on device \d+"
)
# a device-memory error naming the GPU it ran out on (PyTorch's "(GPU 3; 23.65 GiB total capacity"
# and "GPU 3 has a total capacity of", spelt "capacty" by PyTorch 2.1; Paddle's "Out of memory
# error on GPU 3."): the process's device ordinal, taken as the rank only on one host (25 of 27
# real logs that state both agree)
_OOM_GPU = re.compile(
    r"CUDA out of memory\. Tried to allocate [\d.]+ \w+ \(GPU (?P<a>\d+);|\bGPU (?P<b>\d+) has a total capac(?:i)?ty of"
    r"|Out of memory error on GPU (?P<c>\d+)\."
)
# Slurm's srun reporting one task (its global SLURM_PROCID, i.e. the rank) that failed
_SRUN_TASK = re.compile(r"^srun: error: \S+: task (?P<a>\d+): (?!Exited with exit code 0\b)[A-Z]")
# an error message that names the rank it happened on
_NAMED = re.compile(
    r"\b(?:for|on) rank (?P<a>\d+)\b"
    # "[Rank 5]" quoted from a watchdog message; Habana's bridge writes "[Rank:0] FATAL ERROR :: …"
    r"|\[Rank[ :](?P<b>\d+)\]"
    r"|\brank\s*=\s*(?P<c>\d+)\b"
    # Megatron's numerics check: "Rank 3: found NaN in local grad norm in backwards pass"
    r"|\bRank (?P<d>\d+): found (?:NaN|Inf|nan|inf)\b"
    # NCCL's proxy thread of a rank failing an operation (a set-up connect, a transfer):
    # "[Proxy Service 8] Failed to execute operation Connect from rank 8, retcode 2"
    r"|\[Proxy Service (?P<e>\d+)\] Failed to execute operation \w+ from rank \d+"
    # Ascend's runtime stamps its own error lines: "[ERROR] … (PID:1506967, Device:1, RankID:1) ERR02200"
    r"|\bDevice:\d+, RankID:(?P<f>\d+)\)"
)
# any mention of a rank in a line's words: "Process Group destroyed on rank 0", Lightning's
# "LOCAL_RANK: 0 - CUDA_VISIBLE_DEVICES: [0]", MPICH's "(rank 0 in comm 0)", DeepSpeed's
# "OVERFLOW! Rank 0 Skipping step", c10d's "Added key: … for rank: 0"
_ANY_RANK = re.compile(r"\b(?:local_|global_)?rank(?:[ \t]*[:=][ \t]*|[ \t]+|\[)(\d+)\b", re.IGNORECASE)


@dataclass(frozen=True)
class RankClue:
    """A rank named in a line, and what names it."""

    rank: int
    reason: str
    line: LogLine


def _group(m: re.Match[str]) -> int:
    return int(next(v for v in m.groupdict().values() if v is not None))


def _single_host(bundle: LogBundle) -> bool:
    hosts: set[str] = set()
    for st in bundle.streams.values():
        hosts |= st.hosts
    return len(hosts) <= 1


def rank_named_in(line: LogLine, bundle: LogBundle) -> RankClue | None:
    """The rank a line's own words name (an error about a rank, a launcher's failed worker)."""
    text = line.text
    if "ank" in text:
        m = _NAMED.search(text)
        if m:
            return RankClue(_group(m), "the error message names the rank", line)
    if any(h in text for h in _LAUNCHER_HINT):
        m = _LAUNCHER.search(text)
        if m and _single_host(bundle):
            return RankClue(_group(m), "the launcher reports this worker failed", line)
    if "GPU" in text and "emory" in text:
        m = _OOM_GPU.search(text)
        if m and _single_host(bundle):
            return RankClue(_group(m), "the out-of-memory error names the GPU (one host: the rank)", line)
    if "replica" in text and _single_host(bundle):
        clue = _replica(line)
        if clue is not None:
            return clue
    return _srun_task(line, "srun reports this task failed")


def _replica(line: LogLine) -> RankClue | None:
    """The replica XLA or DataParallel names as the one that failed on ``line`` (one host: the rank)."""
    m = _REPLICA.search(line.text)
    if m is None:
        return None
    who = "XLA" if m.group("a") is not None else "DataParallel"
    return RankClue(_group(m), f"{who} names the replica whose execution failed", line)


def _srun_task(line: LogLine, reason: str) -> RankClue | None:
    """The task (rank) srun reports as failed on ``line``, if it is such a report."""
    m = _SRUN_TASK.search(line.text) if line.text.startswith("srun: error:") else None
    return RankClue(_group(m), reason, line) if m else None


def launcher_failed_worker(bundle: LogBundle) -> RankClue | None:
    """The first worker the launcher reports as failed, from lines no rank prefix claimed."""
    st = bundle.streams.get(GLOBAL_STREAM)
    if st is None:
        return None
    local_is_global = _single_host(bundle)  # a local rank is the rank only on one host
    msmpi = False
    for line in st.lines:
        text = line.text
        if text.startswith("job aborted:"):
            msmpi = True
        elif msmpi and text.startswith("["):
            m = _MSMPI_RANK.search(text)
            if m:
                return RankClue(_group(m), "MS-MPI names it as the process that failed", line)
        if "Process name: [[" in text:
            m = _MPI_FIRST.search(text)
            if m:
                return RankClue(_group(m), "mpirun names it as the first process to exit non-zero", line)
        if any(h in text for h in _FIRST_DIED_HINTS):
            m = _FIRST_DIED.search(text)
            if m:
                # "noticed" is said by Open MPI's mpirun, mpiexec and prterun: the match's first word
                who = _FIRST_DIED_WHO.get(str(m.lastgroup)) or text[m.start() :].split()[0]
                return RankClue(_group(m), f"{who} names it as the first process that died or aborted", line)
        if local_is_global and any(h in text for h in _LAUNCHER_HINT):
            m = _LAUNCHER.search(text)
            if m:
                return RankClue(_group(m), "the launcher reports this worker failed first", line)
        else:
            clue = _srun_task(line, "srun reports this task failed first")
            if clue is not None:
                return clue
    return None


def error_line_naming_rank(bundle: LogBundle) -> RankClue | None:
    """The rank named by the first line no rank prefix claimed that reports an error of its own
    (:func:`~denpex_ml.features.select.is_error_line`) in words that name the rank it happened
    on (LBANN's ``Caught signal 11 (SIGSEGV ...) on rank 5``, an error ``for rank 3``; on one host
    also the replica DataParallel or XLA names), when no
    fingerprint line carried a rank. Lines of streams keyed by process or host (NCCL debug lines
    of a job whose ranks the log never maps) count as unclaimed too, in the order of the log."""
    unclaimed = [st for key, st in bundle.streams.items() if not isinstance(key, int)]  # "global", "host:pidN"
    if not unclaimed:
        return None
    lines = [ln for st in unclaimed for ln in st.lines]
    if len(unclaimed) > 1:
        lines.sort(key=lambda ln: (ln.source, ln.lineno))
    one_host = _single_host(bundle)
    for line in lines:
        text = line.text
        if "ank" in text and is_error_line(text):
            m = _NAMED.search(text)
            if m:
                return RankClue(_group(m), "an error line names the rank it happened on", line)
        if one_host and "replica" in text and is_error_line(text):
            clue = _replica(line)
            if clue is not None:
                return clue
    return None


def only_rank_named(bundle: LogBundle) -> RankClue | None:
    """The one rank that the words of a job's unprefixed lines ever name, when they name exactly
    one and the job shows one host: the output of a single process pasted without rank prefixes
    (a one-GPU run, or one rank's log) still says whose it is (``Process Group destroyed on rank
    0``, ``LOCAL_RANK: 0 - CUDA_VISIBLE_DEVICES: [0]``, ``(rank 0 in comm 0)``). ``None`` when
    lines name two ranks or more, none, or the job spans hosts (a local rank is not the rank)."""
    if bundle.ranks or not _single_host(bundle):
        return None
    named: set[int] = set()
    first: LogLine | None = None
    for key, st in bundle.streams.items():
        if isinstance(key, int):
            continue
        for line in st.lines:
            if "ank" not in line.text and "ANK" not in line.text:
                continue
            if "ProcessFailure(" in line.text or "--local_rank" in line.text:
                continue  # a launcher's record of a worker: its exit code says whether it failed
            for m in _ANY_RANK.finditer(line.text):
                named.add(int(m.group(1)))
                if len(named) > 1:
                    return None
                first = first or line
    if len(named) != 1 or first is None:
        return None
    return RankClue(next(iter(named)), "the only rank the log's own lines name (one process's output)", first)
