"""What every ``denpex-ml`` command shares: the exit codes, the console, the progress display and
the error lines.

Exit codes: 0 success; 1 some jobs/items failed (batch commands); 2 usage error;
3 input error (a :class:`~denpex_ml.errors.DenpexError`: bad path, archive, taxonomy...);
4 a retrained model failed its promotion gate while a promotion was asked for (``--promote-to``);
130 interrupted (Ctrl-C).

rich is imported inside the functions that draw, so that ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress as RichProgress
    from rich.progress import TaskID

    from denpex_ml.errors import DenpexError

__all__ = [
    "EXIT_GATE_FAILED",
    "EXIT_INPUT_ERROR",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_PARTIAL",
    "EXIT_USAGE",
    "Progress",
    "SubParsers",
    "add_model_args",
    "console",
    "input_error",
    "usage_error",
]

EXIT_OK = 0
EXIT_PARTIAL = 1
EXIT_USAGE = 2
EXIT_INPUT_ERROR = 3
EXIT_GATE_FAILED = 4
EXIT_INTERRUPTED = 130

#: The object ``ArgumentParser.add_subparsers`` returns: what each command module's
#: ``add_parser(sub, name)`` adds its parser to.
SubParsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def add_model_args(p: argparse.ArgumentParser, *, taxonomy: bool = True) -> None:
    """``--model DIR`` (and ``--taxonomy DIR``, repeatable): the model a command loads."""
    p.add_argument("--model", metavar="DIR", help="model directory (default: the shipped model)")
    if taxonomy:
        p.add_argument(
            "--taxonomy",
            action="append",
            default=[],
            metavar="DIR",
            help="extra taxonomy directory the model was trained with (repeatable)",
        )


def console(*, stderr: bool = False, piped_width: int = 200) -> Console:
    """A rich console on stdout (or stderr): a terminal's width, or ``piped_width`` columns,
    unwrapped, when the stream is a pipe or a file, so that ids and lines stay whole."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    return Console(soft_wrap=False, width=None if stream.isatty() else piped_width, stderr=stderr)


def usage_error(command: str, message: str) -> int:
    """Print ``denpex-ml COMMAND: error: MESSAGE`` on stderr; returns :data:`EXIT_USAGE`."""
    print(f"denpex-ml {command}: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def input_error(exc: DenpexError) -> int:
    """Print an input error on stderr, masked like log text (messages name inputs: member
    names, paths); returns :data:`EXIT_INPUT_ERROR`."""
    from denpex_ml.logs.masking import Masker

    print(f"denpex-ml: error: {Masker().mask(str(exc))}", file=sys.stderr)
    return EXIT_INPUT_ERROR


class Progress:
    """The progress display of the long commands (over rich's).

    ``Progress()`` shows the steps of ``train``, ``retrain`` and ``eval``: a bar per step on stdout;
    :meth:`step` is the ``progress`` callback those library functions take.

    ``Progress(jobs=N, quiet=q)`` counts the jobs of ``score``, with the rate and the errors: a bar
    on stderr when it is a terminal, otherwise a plain line on stderr every 10 s and at the end;
    nothing with ``quiet``. :meth:`advance` counts one job.

    Use it as a context manager, or call :meth:`start` and :meth:`close`.
    """

    def __init__(self, jobs: int | None = None, *, quiet: bool = False) -> None:
        self.total = jobs
        self.quiet = quiet
        self.n = 0
        self.errors = 0
        self.t0 = time.perf_counter()
        self._last = self.t0
        self._bar: RichProgress | None = None
        self._task: TaskID | None = None

    def start(self) -> Progress:
        """Draw the bar (when there is one to draw); returns ``self``."""
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn
        from rich.progress import Progress as RichProgress

        if self.total is None:
            self._bar = RichProgress(
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn()
            )
        elif not self.quiet and sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import TimeElapsedColumn

            self._bar = RichProgress(
                TextColumn("scoring"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[rate]:.1f} jobs/s · {task.fields[errors]} errors"),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=Console(stderr=True),
            )
        if self._bar is not None:
            self._bar.__enter__()
            if self.total is not None:
                self._task = self._bar.add_task("score", total=self.total, rate=0.0, errors=0)
        return self

    def step(self, name: str, total: int) -> Callable[[], None]:
        """A new bar of ``total`` items named ``name``; returns the function that advances it by one."""
        bar = self._bar
        if bar is None:  # pragma: no cover - a caller's mistake
            raise RuntimeError("Progress.step() before start()")
        task = bar.add_task(name, total=total)
        return lambda: bar.advance(task)

    def advance(self, ok: bool) -> None:
        """Count one finished job (``ok``: not an error row)."""
        self.n += 1
        self.errors += 0 if ok else 1
        now = time.perf_counter()
        rate = self.n / max(now - self.t0, 1e-9)
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, advance=1, rate=rate, errors=self.errors)
        elif not self.quiet and (now - self._last >= 10.0 or self.n == self.total):
            self._last = now
            eta = ((self.total or 0) - self.n) / rate if rate > 0 else 0.0
            print(
                f"scored {self.n}/{self.total} jobs ({rate:.1f} jobs/s, {self.errors} errors, ETA {eta:.0f} s)",
                file=sys.stderr,
                flush=True,
            )

    def close(self) -> None:
        """Stop drawing (the last state of the bar stays on screen)."""
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None

    def __enter__(self) -> Progress:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
