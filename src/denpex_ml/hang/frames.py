"""Stack frames from what a job printed: Python tracebacks, py-spy dumps, faulthandler dumps.

Where a rank waits is told by its frames: ``generate`` under ZeRO-3, ``_save_checkpoint`` on
rank 0 only, ``Dataset.map`` while the others sit in a barrier. Three formats are read:

* a Python traceback: ``File "/x/trainer.py", line 2200, in _save_checkpoint``;
* faulthandler (``SIGUSR1``/``TORCH_NCCL`` stack dumps): ``File "/x/trainer.py", line 2200 in _save_checkpoint``;
* ``py-spy dump --pid``: ``    _save_checkpoint (transformers/trainer.py:2200)`` under a
  ``Thread 0x7f... (active): "MainThread"`` header.

Frames are returned outermost first, as Python prints them (py-spy and faulthandler print
innermost first; their frames are reversed). The questions the hang analysis asks of them live
here too: which stacks were taken of a live, waiting process (:func:`live_stacks`), the
collective call a rank waits in (:func:`collective_call`), a sharded-parameter gather
(:func:`gathers_sharded_params`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "NATIVE_WAITING",
    "PARAM_GATHER_CALLS",
    "WAITING_CALLS",
    "Frame",
    "collective_call",
    "gathers_sharded_params",
    "is_traceback_frame",
    "live_stacks",
    "parse_frames",
]

_TRACEBACK = re.compile(r'File "([^"]+)", line (\d+),? in ([\w<>.]+)')
#: a traceback frame's head, whatever follows ``in`` (:func:`is_traceback_frame`)
_TRACEBACK_LINE = re.compile(r'File "[^"]+", line \d+, in ')
_PYSPY = re.compile(r"^\s*([\w<>.]+) \(([^()\s]+\.py):(\d+)\)\s*$")
_PYSPY_THREAD = re.compile(r"^\s*Thread (?:0x[0-9a-fA-F]+|\d+) \(")
_FAULTHANDLER_THREAD = re.compile(r"^\s*(?:Current thread 0x[0-9a-fA-F]+ |Stack )\(most recent call first\)")
#: a native frame as gdb prints it (``thread apply all bt``): ``#3  0x00007f… in MPIC_Recv () from
#: /usr/lib64/mpich/lib/libmpi.so.12`` or ``#1  ncclGroupEnd () at src/group.cc:411``
_NATIVE = re.compile(
    r"^\s*#(?P<n>\d+)\s+(?:0x[0-9a-fA-F]+ in )?(?P<fn>[\w:~<>,.*&$@\[\]-]+?) ?\(.*?\)"
    r"(?: at (?P<file>\S+?):(?P<line>\d+)| from (?P<lib>\S+))?\s*$"
)


@dataclass(frozen=True, slots=True)
class Frame:
    """One stack frame: function, file (masked path, as printed) and line."""

    function: str
    file: str
    line: int
    kind: str  #: "traceback", "faulthandler", "py-spy" or "native" (gdb's backtrace of a C/C++ thread)

    def __str__(self) -> str:
        return f"{self.function} ({self.file.rsplit('/', 2)[-1] if '/' in self.file else self.file}:{self.line})"

    @property
    def module_path(self) -> str:
        """The file path from ``site-packages/`` on (library frames), else the path."""
        i = self.file.find("site-packages/")
        return self.file[i + len("site-packages/") :] if i >= 0 else self.file


def is_traceback_frame(text: str) -> bool:
    """Whether ``text`` is a Python traceback's frame line (``File "/x/train.py", line 12, in
    main``): a stack printed because something raised. faulthandler's ``line 12 in main`` (no
    comma) and py-spy's frames are stack dumps of a live process, not this. A frame whose function
    name the paste cut off (``line 304, in `` and nothing after) still counts."""
    return 'File "' in text and _TRACEBACK_LINE.search(text) is not None


def parse_frames(lines: Iterable[str]) -> list[Frame]:
    """Frames found in ``lines``, outermost first within each dump.

    py-spy and faulthandler blocks (innermost first as printed: "most recent call first") are
    reversed so every dump reads outermost first, as a Python traceback does.
    """
    out: list[Frame] = []
    spy: list[Frame] = []  # the current innermost-first block
    for text in lines:
        m = _TRACEBACK.search(text)
        if m:
            if ", in " in text:
                out.extend(reversed(spy))
                spy = []
                out.append(Frame(m.group(3), m.group(1), int(m.group(2)), "traceback"))
            else:
                if spy and spy[-1].kind != "faulthandler":
                    out.extend(reversed(spy))
                    spy = []
                spy.append(Frame(m.group(3), m.group(1), int(m.group(2)), "faulthandler"))
            continue
        if _PYSPY_THREAD.match(text) or _FAULTHANDLER_THREAD.match(text):
            out.extend(reversed(spy))
            spy = []
            continue
        m2 = _PYSPY.match(text)
        if m2:
            if spy and spy[-1].kind != "py-spy":
                out.extend(reversed(spy))
                spy = []
            spy.append(Frame(m2.group(1), m2.group(2), int(m2.group(3)), "py-spy"))
            continue
        m3 = _NATIVE.match(text) if "#" in text else None
        if m3:
            if spy and (spy[-1].kind != "native" or m3.group("n") == "0"):  # "#0" starts a thread's stack
                out.extend(reversed(spy))
                spy = []
            where = m3.group("file") or m3.group("lib") or ""
            spy.append(Frame(m3.group("fn"), where, int(m3.group("line") or 0), "native"))
    out.extend(reversed(spy))
    return out


#: the collective calls a stack dump shows a rank parked in (torch.distributed, DeepSpeed's comm, Horovod)
WAITING_CALLS = frozenset(
    (
        "barrier",
        "monitored_barrier",
        "all_reduce",
        "all_gather",
        "all_gather_object",
        "all_gather_into_tensor",
        "all_gather_single",
        "_all_gather_base",
        "reduce_scatter",
        "reduce_scatter_tensor",
        "broadcast",
        "broadcast_object_list",
        "all_to_all",
        "all_to_all_single",
        "gather_object",
        "send",
        "recv",
        "wait",
    )
)


def live_stacks(frames: Sequence[Frame], *, interrupted: bool, fatal: bool) -> list[Frame]:
    """The frames of stack dumps taken while the rank was alive and waiting: py-spy; faulthandler
    and gdb's native backtraces, unless a fatal signal made them print; the traceback of a run its
    user interrupted."""
    usable = {"py-spy"} | ({"traceback"} if interrupted else set()) | (set() if fatal else {"faulthandler", "native"})
    return [f for f in frames if f.kind in usable]


#: native calls a thread waits in for its peers, at the libraries' API (not their internals): MPI's
#: collectives and waits, NCCL's collectives, PyTorch's c10d work objects waiting, gloo's transport waits
NATIVE_WAITING = re.compile(
    r"^(?:P?MPI_(?:Allreduce|Allgatherv?|Alltoallv?|Barrier|Bcast|Gatherv?|Reduce\w*|Scatterv?|Recv|Send|Wait\w*)"
    r"|nccl(?:AllReduce|AllGather|ReduceScatter|Broadcast|Reduce|AllToAll|Send|Recv|GroupEnd)"
    r"|c10d::\S*(?:Work\w*::(?:wait|synchronize\w*)|barrier)|gloo::\S*::(?:wait\w*|recv|send))"
)


def _innermost_collective(frames: Sequence[Frame]) -> int | None:
    """Index of the innermost collective call of a distributed library among ``frames``."""
    for i in range(len(frames) - 1, -1, -1):
        f = frames[i]
        if f.kind == "native":
            if NATIVE_WAITING.match(f.function):
                return i
        elif f.function in WAITING_CALLS and ("distributed" in f.file or "horovod" in f.file or "/comm/" in f.file):
            return i
    return None


def collective_call(frames: Sequence[Frame]) -> str | None:
    """The innermost collective call of a distributed library among ``frames`` (outermost first)."""
    i = _innermost_collective(frames)
    return None if i is None else frames[i].function


def _library(f: Frame) -> bool:
    return (
        f.kind == "native"  # a C/C++ frame is the runtime's, never the line of the program that called it
        or "site-packages/" in f.file
        or "dist-packages/" in f.file
        or f.file.startswith("<frozen")
    )


def collective_caller(frames: Sequence[Frame]) -> str | None:
    """The function of the program (outside installed libraries) that made the innermost
    collective call among ``frames`` (outermost first); ``None`` without one."""
    i = _innermost_collective(frames)
    if i is None:
        return None
    return next((g.function for g in reversed(frames[:i]) if not _library(g)), None)


def collective_call_site(frames: Sequence[Frame]) -> str | None:
    """``file:line`` of the program's frame (outside installed libraries) that made the innermost
    collective call among ``frames`` (outermost first): where in the program the rank entered it;
    ``None`` without one."""
    i = _innermost_collective(frames)
    if i is None:
        return None
    g = next((g for g in reversed(frames[:i]) if not _library(g)), None)
    return None if g is None else f"{g.file.rsplit('/', 1)[-1]}:{g.line}"


#: the calls that gather sharded parameters (FSDP's unshard, DeepSpeed ZeRO-3's fetch), in their libraries
PARAM_GATHER_CALLS = frozenset(
    ("unshard", "foreach_all_gather", "_all_gather_flat_param", "fetch_sub_module", "all_gather_coalesced")
)
_SHARDED = re.compile(r"distributed/fsdp/|deepspeed/runtime/zero/")


def gathers_sharded_params(frames: Iterable[Frame]) -> bool:
    """Does any frame gather sharded parameters inside FSDP or DeepSpeed ZeRO-3?"""
    return any(f.function in PARAM_GATHER_CALLS and _SHARDED.search(f.file) for f in frames)


#: point-to-point calls of torch.distributed and of pipeline engines (Megatron, DeepSpeed)
P2P_CALLS = frozenset(
    (
        "send",
        "recv",
        "isend",
        "irecv",
        "batch_isend_irecv",
        "send_object_list",
        "recv_object_list",
        "_communicate",
        "send_forward",
        "recv_forward",
        "send_backward",
        "recv_backward",
    )
)
_P2P_FILES = re.compile(r"distributed|pipeline|p2p")


def exchanges_p2p(frames: Iterable[Frame]) -> bool:
    """Does any frame send or receive point to point (a pipeline stage's activations)?"""
    return any(f.function in P2P_CALLS and _P2P_FILES.search(f.file) for f in frames)
