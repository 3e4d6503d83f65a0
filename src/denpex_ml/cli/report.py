"""``denpex-ml report``: the self-contained HTML report of a results file."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from denpex_ml.cli.console import EXIT_OK

if TYPE_CHECKING:
    from denpex_ml.cli.console import SubParsers

__all__ = ["add_parser", "run"]


def add_parser(sub: SubParsers, name: str = "report") -> None:
    p = sub.add_parser(
        name,
        help="an HTML report of a results file (one self-contained page, opens from disk)",
        description=(
            "Write one self-contained HTML file from a results file of `denpex-ml score`: failures per "
            "class, over time (when rows carry a time), unknown / no-failure / error rates, a confidence "
            "histogram, nodes implicated (when rows carry them), the slowest jobs, and a sortable, "
            "filterable job table where each job opens to its diagnosis. No network is needed to view it."
        ),
    )
    p.add_argument("results", metavar="RESULTS", help="results file: .jsonl, .csv or .parquet")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="HTML file to write (e.g. report.html)")
    p.add_argument("--format", choices=["jsonl", "csv", "parquet"], help="results format (default: from the suffix)")
    p.add_argument("--title", help="page title (default: from the results file name)")
    p.add_argument(
        "--taxonomy", action="append", default=[], metavar="DIR", help="extra taxonomy directory (repeatable)"
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from denpex_ml.report import write_report

    info = write_report(args.results, args.output, fmt=args.format, taxonomy_dirs=args.taxonomy, title=args.title)
    if not args.quiet:
        skipped = f", {info.dropped} malformed rows skipped" if info.dropped else ""
        print(
            f"report of {info.jobs} jobs written to {info.path} ({info.bytes / 1e6:.1f} MB, "
            f"{info.seconds:.1f} s{skipped})",
            file=sys.stderr,
        )
    return EXIT_OK
