"""``denpex-ml ingest``: a job's logs read, masked and split per rank."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from denpex_ml.cli.console import EXIT_OK, console

if TYPE_CHECKING:
    from denpex_ml.cli.console import SubParsers

__all__ = ["add_parser", "run"]


def add_parser(sub: SubParsers, name: str = "ingest") -> None:
    p = sub.add_parser(name, help="read a job's logs, mask them and split them per rank")
    p.add_argument("path", help="log file (.gz ok), directory of per-rank logs, or archive (.tar[.gz], .zip)")
    p.add_argument("--json", action="store_true", help="print the per-rank split as JSON")
    p.add_argument("--lines", type=int, default=3, help="salient lines shown per rank (default 3)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from rich.table import Table
    from rich.text import Text

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
    shown = console()
    s = bundle.summary()
    shown.print(
        f"[bold]{args.path}[/]: {s['lines']} lines, {s['bytes']} chars, {s['ranks']} ranks, "
        f"{s['streams']} streams, formats {s['formats'] or '-'}"
    )
    table = Table()
    for col in ("stream", "lines", "salient", "last salient lines"):
        table.add_column(col, overflow="fold")
    for key, st in sorted(bundle.streams.items(), key=lambda kv: (not isinstance(kv[0], int), str(kv[0]).zfill(8))):
        sal = [ln.text for ln in st.lines if ln.salient][-args.lines :] if args.lines > 0 else []
        # log text is never markup: gloo's "[/pytorch/.../pair.cc:537]" would read as a closing tag
        table.add_row(str(key), str(st.n_lines), str(st.n_salient), Text("\n".join(t[:160] for t in sal)))
    shown.print(table)
    if bundle.launcher and bundle.launcher.root_cause:
        rc = bundle.launcher.root_cause
        shown.print(f"launcher root cause: rank {rc.rank} exitcode {rc.exitcode} {rc.signal or ''}")
    for w in bundle.warnings:
        shown.print(f"[yellow]warning:[/] {w}")
    return EXIT_OK
