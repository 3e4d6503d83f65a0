"""The ``denpex-ml`` parser and entry point: the closed registry of commands, the flags every
command takes (``-v``/``-q``), the logging set-up and :func:`main`.

``-v``/``-vv`` (info, debug logging of denpex_ml on stderr) and ``-q`` (errors only; no progress
or summary where a command has them) are accepted before or after the subcommand.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from denpex_ml import __version__
from denpex_ml.cli import classify, incidents, ingest, report, score, serve, synth, taxonomy, train
from denpex_ml.cli.console import EXIT_INTERRUPTED, EXIT_OK, input_error
from denpex_ml.errors import DenpexError

if TYPE_CHECKING:
    from denpex_ml.cli.console import SubParsers

__all__ = ["COMMANDS", "Command", "build_parser", "configure_logging", "main"]

Handler = Callable[[argparse.Namespace], int]

log = logging.getLogger("denpex_ml.cli")


class Command(Protocol):
    """A command module: ``add_parser(sub, name)`` adds the parser of command ``name``, whose
    ``handler`` default is the module's ``run`` function for it (namespace -> exit code)."""

    def add_parser(self, sub: SubParsers, name: str) -> None: ...


#: Closed registry of subcommands: name -> the module that adds its parser (the order of ``--help``).
COMMANDS: dict[str, Command] = {
    "classify": classify,
    "incidents": incidents,
    "score": score,
    "report": report,
    "serve": serve,
    "eval": train,
    "retrain": train,
    "ingest": ingest,
    "mlflow-log": train,
    "synth": synth,
    "taxonomy": taxonomy,
    "train": train,
}


def _add_common(parser: argparse.ArgumentParser, *, top: bool) -> None:
    """``-v``/``-q`` on every parser; below the top they default to SUPPRESS, so a value given
    before the subcommand stays unless repeated after it."""
    default_v: object = 0 if top else argparse.SUPPRESS
    default_q: object = False if top else argparse.SUPPRESS
    taken = parser._option_string_actions
    if "-v" not in taken:
        parser.add_argument(
            "-v", "--verbose", action="count", default=default_v, help="more logging (-v info, -vv debug)"
        )
    flags = [f for f in ("-q", "--quiet") if f not in taken]
    if flags:  # `score` has its own --quiet (same dest): -q is added beside it
        parser.add_argument(*flags, dest="quiet", action="store_true", default=default_q, help="errors only")


def _subparsers(parser: argparse.ArgumentParser) -> list[SubParsers]:
    return [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]


def _add_common_everywhere(parser: argparse.ArgumentParser) -> None:
    for action in _subparsers(parser):
        for child in set(action.choices.values()):
            _add_common(child, top=False)
            _add_common_everywhere(child)


def _chosen(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The innermost (sub)parser that ``args`` went through (its usage is the one to show)."""
    for action in _subparsers(parser):
        name = getattr(args, action.dest, None)
        if isinstance(name, str) and name in action.choices:
            return _chosen(action.choices[name], args)
    return parser


def build_parser() -> argparse.ArgumentParser:
    """The ``denpex-ml`` parser: one subcommand per entry of :data:`COMMANDS`."""
    parser = argparse.ArgumentParser(
        prog="denpex-ml",
        description="Diagnose failed distributed deep-learning jobs from their logs.",
        epilog="Exit codes: 0 ok, 1 some items failed, 2 usage error, 3 input error, 4 promotion gate failed.",
    )
    parser.add_argument("--version", action="version", version=f"denpex-ml {__version__}")
    _add_common(parser, top=True)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in COMMANDS.items():
        command.add_parser(sub, name)
    _add_common_everywhere(parser)
    return parser


def configure_logging(verbose: int, quiet: bool) -> None:
    """denpex_ml's log records on stderr: warnings by default, info with ``-v``, debug with
    ``-vv``, errors only with ``-q``; other libraries stay at warnings (errors with ``-q``)."""
    level = logging.ERROR if quiet else logging.WARNING - 10 * min(verbose, 2)
    root = logging.getLogger()
    if not root.handlers:  # as logging.basicConfig: a host that set up logging keeps its handlers
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
    root.setLevel(logging.ERROR if quiet else logging.WARNING)
    logging.getLogger("denpex_ml").setLevel(level)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (testable without a subprocess)."""
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:  # shown with the usage of the subcommand they were given to
            _chosen(parser, args).error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    configure_logging(args.verbose, args.quiet)
    log.info("denpex-ml %s %s", __version__, args.command)
    handler: Handler = args.handler
    t0 = time.perf_counter()
    try:
        code = handler(args)
    except DenpexError as exc:
        code = input_error(exc)
    except BrokenPipeError:  # e.g. `denpex-ml ... | head`
        code = EXIT_OK
    except KeyboardInterrupt:
        print("denpex-ml: interrupted", file=sys.stderr)
        code = EXIT_INTERRUPTED
    log.info("%s finished in %.2f s, exit code %d", args.command, time.perf_counter() - t0, code)
    return code
