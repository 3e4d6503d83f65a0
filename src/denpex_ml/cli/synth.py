"""``denpex-ml synth``: synthetic labelled multi-rank failure logs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from denpex_ml.cli.console import EXIT_OK, usage_error

if TYPE_CHECKING:
    from denpex_ml.cli.console import SubParsers

__all__ = ["add_parser", "run"]


def add_parser(sub: SubParsers, name: str = "synth") -> None:
    p = sub.add_parser(name, help="generate synthetic labelled multi-rank failure logs")
    p.add_argument("--per-class", type=int, default=5, metavar="N", help="incidents per failure class (default 5)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--out",
        required=True,
        metavar="PATH",
        help="*.jsonl, *.tar.gz/*.tgz/*.zip archive of job folders, or a directory of job folders",
    )
    p.add_argument("--label", action="append", default=[], metavar="ID", help="only these failure ids (repeatable)")
    p.add_argument("--no-unknown", action="store_true", help="leave out out-of-taxonomy (unknown) failures")
    p.add_argument("--noise", default="10,60", metavar="LO,HI", help="background lines per rank (default 10,60)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from denpex_ml.synthetic import generate, write_archive, write_job_dirs, write_jsonl

    try:
        lo, hi = (int(x) for x in args.noise.split(","))
    except ValueError:
        return usage_error("synth", f"--noise must be LO,HI integers, got {args.noise!r}")
    if args.per_class < 1:
        return usage_error("synth", "--per-class must be >= 1")
    incidents = generate(
        args.per_class, args.seed, labels=args.label or None, include_unknown=not args.no_unknown, noise=(lo, hi)
    )
    out = Path(args.out)
    name = out.name.lower()
    if name.endswith(".jsonl"):
        write_jsonl(incidents, out)
    elif name.endswith((".tar.gz", ".tgz", ".zip", ".tar")):
        write_archive(incidents, out)
    else:
        write_job_dirs(incidents, out)
    print(f"wrote {len(incidents)} incidents to {out}", file=sys.stderr)
    return EXIT_OK
