"""Templates and salient-line selection: a bounded, deduplicated set of lines per job.

The cost of classifying a job must not grow with its noise, so only a bounded number of
distinct line *templates* (numbers, addresses, pseudonyms replaced by placeholders) is
embedded: lines with root-cause fingerprints first, then exceptions and errors, then
other salient lines, then the last lines each rank printed before it went silent.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import re2

from denpex_ml.features.fingerprints import FingerprintHit
from denpex_ml.logs.bundle import LogBundle, LogLine
from denpex_ml.logs.patterns import GLOG_ERROR, template
from denpex_ml.logs.patterns import templates as make_templates
from denpex_ml.taxonomy import FingerprintRole

__all__ = ["EXCEPTION_RE", "PROGRESS_BAR", "SelectedLine", "is_error_line", "select_lines", "template"]

#: a progress bar (tqdm / rich / HF ``Map``): context at best, never the proof of a failure
PROGRESS_BAR = re.compile(r"\d{1,3}%\s*\||\|\s*\d+/\d+\s*\[|\d+(?:\.\d+)?\s*(?:it|s)/(?:s|it)\]")

EXCEPTION_RE = re.compile(
    r"\b\w*(?:Error|Exception|Interrupt)\b|Traceback|[Ss]egmentation fault|Killed|SIG[A-Z]{3,}|core dumped|"
    r"NCCL WARN|Xid|[Ff]atal|FAILED|[Aa]borted|terminate called|exit(?:ed with)? ?code|exitcode|"
    # errors that do not name an exception class: argparse / CLI ``error:``, log levels, errno,
    # socket and set-up failures (``failed to connect``, ``Connection timed out``)
    r"\berror: |\bERROR\b|\berrno\b|[Ff]ailed to (?:connect|open|create|initiali[sz]e|allocate|bind|load|launch)\b|"
    r"Connection (?:refused|reset|timed out)|\b[Aa]n error occurred\b|"
    # native and runtime failures in other stacks' words: a glog/TF ``Check failed``, TF1's
    # ``Caused by op '...'``, UCX's crash backtrace, ORTE/MPI errors, absl status codes, a kernel's TIMEOUT
    r"Check failed: |Caused by op '|==== backtrace|_ERROR_LOG\b|\bMPI error\b|\bTIMEOUT\b|"
    r"NVIDIA-SMI has failed|\bTest (?:CUDA|NCCL) failure\b|\bAssertion (?:error|failed)\b|caught segfault|<signal handler called>|"
    r"\bretry count exceeded\b|已杀死|"
    r"\b(?:INTERNAL|UNAVAILABLE|RESOURCE_EXHAUSTED|FAILED_PRECONDITION|DEADLINE_EXCEEDED|DATA_LOSS|ABORTED): |"
    # failures worded without an exception class: Lua Torch's ``THCudaCheck FAIL``, ``cuda runtime
    # error (2)``, ``out of memory``, ``Compilation failure:``, ``Execution of replica 0 failed:``,
    # a shell's ``[1] 4242 killed``, libc++'s uncaught exception, MPI's and schedulers' own words
    r"\b(?:cuda|CUDA|cuDNN|CUDNN|cublas|CUBLAS|hip|HIP)(?: runtime)? error\b|\bFAIL\b|\b[Oo]ut of memory\b|"
    r"\b[Ff]ailure: |\bfailed: |\bFailed, |\b[Cc]onnection refused\b|\bkilled\b|"
    r"terminating (?:due to|with) uncaught exception|has taken over [\d.]+ seconds|command not found|"
    r"[Cc]ould not resolve hostname|will now abort|MPI_ABORT was invoked|submit error|\bTT_FATAL\b|\|\s*FATAL\s*\||"
    # Lua Torch's uncaught error (``luajit: file.lua:210: write error ...``, then ``stack traceback:``),
    # a Windows structured exception, MS-MPI's ``job aborted:``
    r"\blua(?:jit)?: |stack traceback:|Caught Win32 exception|job aborted:|"
    # glog's ERROR and FATAL levels (``E0410 21:04:57.403295  30715 file.cc:77]``, TensorFlow's ``E tensorflow/...cc:352]``)
    r"\b" + GLOG_ERROR + "|"
    # a traceback's last line naming a dotted exception class that does not end in Error
    # (``torch._dynamo.exc.FailOnRecompileLimitHit: ...``, ``omegaconf.errors.MissingMandatoryValue: ...``)
    r"(?:^|[\s\]>])(?:[a-z_][a-z0-9_]*\.){1,6}[A-Z][A-Za-z0-9]*: "
)
#: :data:`EXCEPTION_RE` without its word boundaries and left contexts, for RE2: every line
#: that ``EXCEPTION_RE`` matches holds a match of this (each alternative is one of
#: ``EXCEPTION_RE``'s with its zero-width conditions dropped), found ~13x faster; most lines hold none.
_EXCEPTION_SCREEN = re2.compile(
    rb"Error|Exception|Interrupt|Traceback|[Ss]egmentation fault|Killed|SIG[A-Z]{3,}|core dumped|"
    rb"NCCL WARN|Xid|[Ff]atal|FAILED|[Aa]borted|terminate called|exit(?:ed with)? ?code|exitcode|"
    rb"error: |ERROR|errno|[Ff]ailed to (?:connect|open|create|initiali[sz]e|allocate|bind|load|launch)|"
    rb"Connection (?:refused|reset|timed out)|[Aa]n error occurred|"
    rb"Check failed: |Caused by op '|==== backtrace|_ERROR_LOG|MPI error|TIMEOUT|"
    rb"NVIDIA-SMI has failed|Test CUDA failure|Test NCCL failure|Assertion error|Assertion failed|caught segfault|<signal handler called>|"
    rb"retry count exceeded|" + "已杀死".encode() + rb"|"
    rb"(?:INTERNAL|UNAVAILABLE|RESOURCE_EXHAUSTED|FAILED_PRECONDITION|DEADLINE_EXCEEDED|DATA_LOSS|ABORTED): |"
    rb"(?:cuda|CUDA|cuDNN|CUDNN|cublas|CUBLAS|hip|HIP)(?: runtime)? error|FAIL|[Oo]ut of memory|"
    rb"[Ff]ailure: |failed: |Failed, |[Cc]onnection refused|killed|"
    rb"terminating (?:due to|with) uncaught exception|has taken over [\d.]+ seconds|command not found|"
    rb"[Cc]ould not resolve hostname|will now abort|MPI_ABORT was invoked|submit error|TT_FATAL|\|\s*FATAL\s*\||"
    rb"lua: |luajit: |stack traceback:|Caught Win32 exception|job aborted:|" + GLOG_ERROR.encode() + rb"|"
    rb"(?:[a-z_][a-z0-9_]*\.){1,6}[A-Z][A-Za-z0-9]*: "
)


def is_error_line(text: str) -> bool:
    """``bool(EXCEPTION_RE.search(text))``: RE2 screens the line, Python's ``re`` (Unicode word
    boundaries) decides only on the few the screen lets through."""
    if _EXCEPTION_SCREEN.search(text.encode("utf-8", "surrogatepass")) is None:
        return False
    return EXCEPTION_RE.search(text) is not None


@dataclass(frozen=True)
class SelectedLine:
    """One selected template with its first occurrence and why it was selected."""

    line: LogLine
    template: str
    priority: float
    reasons: tuple[str, ...]
    count: int = 1


def select_lines(
    bundle: LogBundle,
    hits: Sequence[FingerprintHit],
    *,
    max_lines: int = 96,
    tail_per_rank: int = 3,
    benign: Callable[[str], bool] | None = None,
) -> list[SelectedLine]:
    """At most ``max_lines`` distinct templates of the job, most telling first; a line that
    ``benign`` accepts (a normal message that reads like an error) is no error line."""
    best: dict[str, tuple[float, LogLine, set[str], int]] = {}
    # the template of every line offered below (a line is often offered more than once: hit,
    # salient, tail), all made at once
    texts = dict.fromkeys(h.line.text for h in hits)
    for stream in bundle.streams.values():
        texts.update((line.text, None) for line in stream.lines if line.salient)
        texts.update((line.text, None) for line in stream.lines[-tail_per_rank:])
    templates: dict[str, str] = dict(zip(texts, make_templates(list(texts)), strict=True))

    def offer(line: LogLine, priority: float, reason: str) -> None:
        tpl = templates.get(line.text)
        if tpl is None:
            tpl = templates[line.text] = template(line.text)
        if not tpl:
            return
        cur = best.get(tpl)
        if cur is None:
            best[tpl] = (priority, line, {reason}, 1)
        else:
            p, first, reasons, n = cur
            reasons.add(reason)
            best[tpl] = (max(p, priority), first, reasons, n + 1)

    for h in hits:
        if h.role is FingerprintRole.ROOT_CAUSE:
            offer(h.line, 3.0 + h.weight, f"root-cause fingerprint of {h.entry_id}")
        elif h.role is FingerprintRole.CONTEXT:
            offer(h.line, 1.5 + 0.5 * h.weight, f"context fingerprint of {h.entry_id}")
        else:
            offer(h.line, 1.0 + 0.5 * h.weight, f"symptom fingerprint of {h.entry_id}")
    for stream in bundle.streams.values():
        for line in stream.lines:
            if line.salient:
                if benign is not None and benign(line.text):
                    offer(line, 1.0, "normal message that reads like an error")
                else:
                    offer(line, 2.0 if is_error_line(line.text) else 1.0, "error or warning line")
        for line in stream.lines[-tail_per_rank:]:
            offer(line, 0.5, "last line before the stream ended")
    ranked = sorted(best.items(), key=lambda kv: (-kv[1][0], kv[1][1].source, kv[1][1].lineno))
    return [
        SelectedLine(line, tpl, prio, tuple(sorted(reasons)), n) for tpl, (prio, line, reasons, n) in ranked[:max_lines]
    ]
