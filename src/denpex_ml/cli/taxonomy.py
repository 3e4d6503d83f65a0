"""``denpex-ml taxonomy``: list, show or search the failure taxonomy."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from denpex_ml.cli.console import EXIT_OK, console

if TYPE_CHECKING:
    from denpex_ml.cli.console import SubParsers

__all__ = ["add_parser", "run"]


def add_parser(sub: SubParsers, name: str = "taxonomy") -> None:
    p = sub.add_parser(name, help="list, show or search failure taxonomy entries")
    p.add_argument(
        "--taxonomy", action="append", default=[], metavar="DIR", help="extra taxonomy directory (repeatable)"
    )
    tsub = p.add_subparsers(dest="taxonomy_cmd", required=True)
    tsub.add_parser("list", help="table of all entries")
    s = tsub.add_parser("show", help="one entry in full")
    s.add_argument("id")
    s.add_argument("--json", action="store_true", help="print the entry as JSON")
    q = tsub.add_parser("search", help="entries matching words")
    q.add_argument("query", nargs="+")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from rich.table import Table

    from denpex_ml.taxonomy import load_taxonomy

    tax = load_taxonomy(args.taxonomy)
    out = console()
    if args.taxonomy_cmd == "show":
        entry = tax.get(args.id)
        if args.json:
            print(json.dumps(entry.model_dump(mode="json"), indent=2))
        else:
            from denpex_ml.render import render_entry

            out.print(render_entry(entry))
        return EXIT_OK
    entries = list(tax) if args.taxonomy_cmd == "list" else tax.search(" ".join(args.query))
    table = Table(title=f"denpex_ml failure taxonomy ({len(entries)} entries)")
    table.add_column("id", no_wrap=True)
    table.add_column("category", no_wrap=True)
    table.add_column("title", overflow="fold")
    table.add_column("fingerprints", justify="right")
    for e in entries:
        table.add_row(e.id, e.category.value, e.title, str(len(e.fingerprints)))
    out.print(table)
    return EXIT_OK
