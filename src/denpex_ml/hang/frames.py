"""Stack frames from what a job printed: Python tracebacks, py-spy dumps, faulthandler dumps.

Where a rank waits is told by its frames: ``generate`` under ZeRO-3, ``_save_checkpoint`` on
rank 0 only, ``Dataset.map`` while the others sit in a barrier. Three formats are read:

* a Python traceback: ``File "/x/trainer.py", line 2200, in _save_checkpoint``;
* faulthandler (``SIGUSR1``/``TORCH_NCCL`` stack dumps): ``File "/x/trainer.py", line 2200 in _save_checkpoint``;
* ``py-spy dump --pid``: ``    _save_checkpoint (transformers/trainer.py:2200)`` under a
  ``Thread 0x7f... (active): "MainThread"`` header.

Frames are returned outermost first, as Python prints them (py-spy prints innermost first;
its frames are reversed).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Frame", "parse_frames"]

_TRACEBACK = re.compile(r'File "([^"]+)", line (\d+),? in ([\w<>.]+)')
_PYSPY = re.compile(r"^\s*([\w<>.]+) \(([^()\s]+\.py):(\d+)\)\s*$")
_PYSPY_THREAD = re.compile(r"^\s*Thread (?:0x[0-9a-fA-F]+|\d+) \(")
_FAULTHANDLER_THREAD = re.compile(r"^\s*(?:Current thread 0x[0-9a-fA-F]+ |Stack )\(most recent call first\)")


@dataclass(frozen=True, slots=True)
class Frame:
    """One stack frame: function, file (masked path, as printed) and line."""

    function: str
    file: str
    line: int
    kind: str  #: "traceback", "faulthandler" or "py-spy"

    def __str__(self) -> str:
        return f"{self.function} ({self.file.rsplit('/', 2)[-1] if '/' in self.file else self.file}:{self.line})"

    @property
    def module_path(self) -> str:
        """The file path from ``site-packages/`` on (library frames), else the path."""
        i = self.file.find("site-packages/")
        return self.file[i + len("site-packages/") :] if i >= 0 else self.file


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
    out.extend(reversed(spy))
    return out
