"""``denpex-ml incidents``: the labelled-incident store on the command line.

Usage::

    denpex-ml incidents [--store DIR] [--taxonomy DIR]... add PATH --label ID
                        [--initiating-rank R] [--source URL] [--id ID]
    denpex-ml incidents list [--json]
    denpex-ml incidents relabel ID LABEL
    denpex-ml incidents remove ID
    denpex-ml incidents show ID
    denpex-ml incidents export OUT.jsonl

``--store`` defaults to ``$DENPEX_INCIDENTS`` or ``./incidents``; ``--store`` and
``--taxonomy`` may be given before or after the action. Errors of the store
(:class:`~denpex_ml.errors.DenpexError`) propagate to the caller, which turns them into
exit code 3.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Any

from denpex_ml.cli.console import EXIT_OK, console, usage_error

if TYPE_CHECKING:
    from denpex_ml.cli.console import SubParsers
    from denpex_ml.dataset.incident import Incident

__all__ = ["ENV_STORE", "add_parser", "incident_row", "run"]

#: Environment variable naming the default store directory.
ENV_STORE = "DENPEX_INCIDENTS"
_DEFAULT_STORE = "incidents"


def _common(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    """``--store`` and ``--taxonomy``; on actions they default to SUPPRESS so the group's value stays."""
    parser.add_argument(
        "--store",
        metavar="DIR",
        default=argparse.SUPPRESS if suppress else None,
        help=f"incident store directory (default: ${ENV_STORE} or ./{_DEFAULT_STORE})",
    )
    parser.add_argument(
        "--taxonomy",
        action="append",
        metavar="DIR",
        default=argparse.SUPPRESS if suppress else [],
        help="extra taxonomy directory whose ids are valid labels (repeatable)",
    )


def add_parser(sub: SubParsers, name: str = "incidents") -> None:
    """Add the ``incidents`` subcommand (and its actions) to a CLI's subparsers.

    Parameters
    ----------
    sub:
        The object returned by ``ArgumentParser.add_subparsers``. The handler is set
        with ``set_defaults(handler=...)``; it takes the parsed namespace and returns
        an exit code (0 ok, 2 usage error) and lets
        :class:`~denpex_ml.errors.DenpexError` propagate.
    name:
        The command's name (``incidents``).
    """
    p = sub.add_parser(
        name,
        help="store labelled incidents (masked logs + failure id) for the next retrain",
        description="Add, list, relabel, remove, show and export the labelled incidents of a store.",
    )
    _common(p, suppress=False)
    isub = p.add_subparsers(dest="incidents_cmd", required=True, metavar="ACTION")

    a = isub.add_parser("add", help="mask a failed job's logs and store them with their label")
    a.add_argument("path", help="log file (.gz ok), directory of per-rank logs, or archive (.tar[.gz], .zip)")
    a.add_argument("--label", required=True, metavar="ID", help="taxonomy id of the root cause, or 'unknown'")
    a.add_argument("--initiating-rank", type=int, metavar="R", help="global rank that failed first")
    a.add_argument("--source", metavar="URL", help="provenance (issue/ticket URL); default local:<file name>")
    a.add_argument("--id", dest="incident_id", metavar="ID", help="incident id (default inc-YYYYMMDD-<hash>)")
    _common(a, suppress=True)

    ls = isub.add_parser("list", help="table of the stored incidents")
    ls.add_argument("--json", action="store_true", help="print the table as JSON")
    _common(ls, suppress=True)

    r = isub.add_parser("relabel", help="change an incident's label (kept in meta.label_history)")
    r.add_argument("id")
    r.add_argument("label")
    _common(r, suppress=True)

    rm = isub.add_parser("remove", help="delete an incident")
    rm.add_argument("id")
    _common(rm, suppress=True)

    sh = isub.add_parser("show", help="print one incident record as JSON")
    sh.add_argument("id")
    _common(sh, suppress=True)

    ex = isub.add_parser("export", help="write every incident to a JSONL file (the dataset format)")
    ex.add_argument("out", metavar="OUT.jsonl")
    _common(ex, suppress=True)

    p.set_defaults(handler=run)


def incident_row(incident: Incident) -> dict[str, Any]:
    """The summary of an incident that ``incidents list`` shows (no log text).

    Keys: ``id``, ``label``, ``files``, ``bytes`` (UTF-8 bytes of all logs), ``added``,
    ``source``, ``initiating_rank``.
    """
    texts = list(incident.logs.values()) if incident.logs is not None else [incident.log or ""]
    added = incident.meta.get("added")
    return {
        "id": incident.id,
        "label": incident.label,
        "files": len(texts),
        "bytes": sum(len(t.encode("utf-8", errors="surrogatepass")) for t in texts),
        "added": added if isinstance(added, str) else None,
        "source": incident.source,
        "initiating_rank": incident.initiating_rank,
    }


def _store_dir(args: argparse.Namespace) -> str:
    given: str | None = getattr(args, "store", None)
    return given or os.environ.get(ENV_STORE) or _DEFAULT_STORE


def run(args: argparse.Namespace) -> int:
    """Run the action ``args.incidents_cmd`` on the store; returns the exit code."""
    from denpex_ml.incidents import IncidentStore

    store = IncidentStore(_store_dir(args), taxonomy_dirs=getattr(args, "taxonomy", None) or [])
    cmd: str = args.incidents_cmd
    if cmd == "add":
        if args.initiating_rank is not None and args.initiating_rank < 0:
            return usage_error("incidents add", "--initiating-rank must be >= 0")
        incident = store.add(
            args.path,
            label=args.label,
            initiating_rank=args.initiating_rank,
            source_url=args.source,
            incident_id=args.incident_id,
        )
        row = incident_row(incident)
        print(f"added {incident.id}: {incident.label}, {row['files']} file(s), {row['bytes']} bytes -> {store.file}")
        skipped = incident.meta.get("skipped")
        if isinstance(skipped, list):
            for item in skipped:
                print(f"skipped {item}", file=sys.stderr)
        return EXIT_OK
    if cmd == "list":
        rows = [incident_row(i) for i in store]
        if args.json:
            print(json.dumps(rows, indent=2, ensure_ascii=False))
            return EXIT_OK
        from rich.markup import escape
        from rich.table import Table

        table = Table(title=f"{store.file} ({len(rows)} incidents)")
        table.add_column("id", no_wrap=True)
        table.add_column("label", no_wrap=True)
        table.add_column("files", justify="right")
        table.add_column("bytes", justify="right")
        table.add_column("added", no_wrap=True)
        table.add_column("source", overflow="fold")
        for row in rows:
            table.add_row(
                escape(row["id"]),
                escape(row["label"]),
                str(row["files"]),
                str(row["bytes"]),
                escape(row["added"] or "-"),
                escape(row["source"]),
            )
        console().print(table)
        return EXIT_OK
    if cmd == "relabel":
        before = store.get(args.id).label
        incident = store.relabel(args.id, args.label)
        print(f"{incident.id}: {before} -> {incident.label}")
        return EXIT_OK
    if cmd == "remove":
        incident = store.remove(args.id)
        print(f"removed {incident.id} ({incident.label})")
        return EXIT_OK
    if cmd == "show":
        print(json.dumps(store.get(args.id).to_dict(), indent=2, ensure_ascii=False))
        return EXIT_OK
    if cmd == "export":
        from denpex_ml.dataset import write_jsonl

        incidents = list(store)
        out = write_jsonl(incidents, args.out)
        print(f"wrote {len(incidents)} incident(s) to {out}")
        return EXIT_OK
    return usage_error("incidents", f"unknown action {cmd!r}")  # pragma: no cover
