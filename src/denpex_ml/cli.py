"""The ``denpex-ml`` command line: thin subcommands over library functions.

Exit codes: 0 success; 1 some jobs/items failed (batch commands); 2 usage error;
3 input error (a :class:`~denpex_ml.errors.DenpexError`: bad path, archive, taxonomy...).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Sequence


from denpex_ml import __version__
from denpex_ml.errors import DenpexError

__all__ = ["COMMANDS", "EXIT_INPUT_ERROR", "EXIT_OK", "EXIT_PARTIAL", "EXIT_USAGE", "main"]

EXIT_OK = 0
EXIT_PARTIAL = 1
EXIT_USAGE = 2
EXIT_INPUT_ERROR = 3

Handler = Callable[[argparse.Namespace], int]


def _console():  # type: ignore[no-untyped-def]
    from rich.console import Console

    return Console(soft_wrap=False)


# -- taxonomy -------------------------------------------------------------------------------
def _add_taxonomy(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("taxonomy", help="list, show or search failure taxonomy entries")
    p.add_argument("--taxonomy", action="append", default=[], metavar="DIR", help="extra taxonomy directory (repeatable)")
    tsub = p.add_subparsers(dest="taxonomy_cmd", required=True)
    tsub.add_parser("list", help="table of all entries")
    s = tsub.add_parser("show", help="one entry in full")
    s.add_argument("id")
    s.add_argument("--json", action="store_true", help="print the entry as JSON")
    q = tsub.add_parser("search", help="entries matching words")
    q.add_argument("query", nargs="+")
    p.set_defaults(handler=_cmd_taxonomy)


def _cmd_taxonomy(args: argparse.Namespace) -> int:
    from rich.table import Table

    from denpex_ml.taxonomy import load_taxonomy

    tax = load_taxonomy(args.taxonomy)
    console = _console()
    if args.taxonomy_cmd == "show":
        entry = tax.get(args.id)
        if args.json:
            print(json.dumps(entry.model_dump(mode="json"), indent=2))
        else:
            from denpex_ml.render import render_entry

            console.print(render_entry(entry))
        return EXIT_OK
    entries = list(tax) if args.taxonomy_cmd == "list" else tax.search(" ".join(args.query))
    table = Table(title=f"denpex_ml failure taxonomy ({len(entries)} entries)")
    for col in ("id", "category", "title", "fingerprints"):
        table.add_column(col, overflow="fold")
    for e in entries:
        table.add_row(e.id, e.category.value, e.title, str(len(e.fingerprints)))
    console.print(table)
    return EXIT_OK


# -- ingest ---------------------------------------------------------------------------------
def _add_ingest(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("ingest", help="read a job's logs, mask them and split them per rank")
    p.add_argument("path", help="log file (.gz ok), directory of per-rank logs, or archive (.tar[.gz], .zip)")
    p.add_argument("--json", action="store_true", help="print the per-rank split as JSON")
    p.add_argument("--lines", type=int, default=3, help="salient lines shown per rank (default 3)")
    p.set_defaults(handler=_cmd_ingest)


def _cmd_ingest(args: argparse.Namespace) -> int:
    from rich.table import Table

    from denpex_ml.logs import read_logs

    bundle = read_logs(args.path)
    if args.json:
        out = {
            "summary": bundle.summary(),
            "launcher": bundle.launcher.to_dict() if bundle.launcher else None,
            "streams": {
                str(k): {
                    "lines": s.n_lines,
                    "salient": s.n_salient,
                    "retained": [{"source": ln.source, "line": ln.lineno, "text": ln.text} for ln in s.lines],
                }
                for k, s in bundle.streams.items()
            },
        }
        print(json.dumps(out, indent=2))
        return EXIT_OK
    console = _console()
    s = bundle.summary()
    console.print(
        f"[bold]{args.path}[/]: {s['lines']} lines, {s['bytes']} chars, {s['ranks']} ranks, "
        f"{s['streams']} streams, formats {s['formats'] or '-'}"
    )
    table = Table()
    for col in ("stream", "lines", "salient", "last salient lines"):
        table.add_column(col, overflow="fold")
    for key, st in sorted(bundle.streams.items(), key=lambda kv: (not isinstance(kv[0], int), str(kv[0]).zfill(8))):
        sal = [ln.text for ln in st.lines if ln.salient][-args.lines :] if args.lines > 0 else []
        table.add_row(str(key), str(st.n_lines), str(st.n_salient), "\n".join(t[:160] for t in sal))
    console.print(table)
    if bundle.launcher and bundle.launcher.root_cause:
        rc = bundle.launcher.root_cause
        console.print(f"launcher root cause: rank {rc.rank} exitcode {rc.exitcode} {rc.signal or ''}")
    for w in bundle.warnings:
        console.print(f"[yellow]warning:[/] {w}")
    return EXIT_OK


#: Closed registry of subcommands: name -> function adding its parser.
COMMANDS: dict[str, Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None]] = {
    "taxonomy": _add_taxonomy,
    "ingest": _add_ingest,
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="denpex-ml",
        description="Diagnose failed distributed deep-learning jobs from their logs.",
        epilog="Exit codes: 0 ok, 1 some items failed, 2 usage error, 3 input error.",
    )
    parser.add_argument("--version", action="version", version=f"denpex-ml {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-v info, -vv debug)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in COMMANDS.values():
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (testable without a subprocess)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    handler: Handler = args.handler
    try:
        return handler(args)
    except DenpexError as exc:
        print(f"denpex-ml: error: {exc}", file=sys.stderr)
        return EXIT_INPUT_ERROR
    except BrokenPipeError:  # e.g. `denpex-ml ... | head`
        return EXIT_OK
    except KeyboardInterrupt:
        print("denpex-ml: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())


