"""``denpex-ml classify``: the diagnosis of one failed job (a path, or a stream on stdin)."""

from __future__ import annotations

import argparse
import gc
import json
import sys
from dataclasses import replace
from typing import TYPE_CHECKING

from denpex_ml.cli.console import EXIT_OK, add_model_args, usage_error

if TYPE_CHECKING:
    from denpex_ml.cli.console import SubParsers
    from denpex_ml.model.core import DenpexModel

__all__ = ["add_parser", "run"]


def add_parser(sub: SubParsers, name: str = "classify") -> None:
    p = sub.add_parser(name, help="diagnose one failed job: failure class, confidence, first failing rank, fix")
    p.add_argument("path", nargs="?", help="log file (.gz ok), directory of per-rank logs, or archive; '-' reads stdin")
    add_model_args(p)
    p.add_argument("--json", action="store_true", help="print the diagnosis as JSON")
    p.add_argument(
        "--reveal-hosts",
        action="store_true",
        help="for the owner of the logs: show real host names beside their pseudonyms (node-N)",
    )
    p.add_argument("--host-map", metavar="FILE", help="write the job's pseudonym -> real host map to FILE (mode 0600)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from denpex_ml.model.core import default_model, load_model

    if args.path is None:
        return usage_error("classify", "give a PATH (or '-' for stdin)")
    model = load_model(args.model, taxonomy_dirs=args.taxonomy) if (args.model or args.taxonomy) else default_model()
    # the modules and the model outlive the job: the garbage collector's full passes need not
    # walk them while it runs (~3% of a 200 MB job's time); unfrozen after it (main() in a test)
    gc.freeze()
    try:
        _classify(args, model)
    finally:
        gc.unfreeze()
    return EXIT_OK


def _classify(args: argparse.Namespace, model: DenpexModel) -> None:
    if args.path == "-":  # streamed: long lines are cut while reading, memory stays flat
        from time import perf_counter

        from denpex_ml.logs.masking import Masker
        from denpex_ml.logs.readers import read_stream

        t0 = perf_counter()
        masker = Masker()
        d = model.diagnose(read_stream(sys.stdin.buffer, name="<stdin>", masker=masker), started=t0)
        d = replace(d, host_names=masker.reveal_map()) if (args.reveal_hosts or args.host_map) else d
    else:
        d = model.classify(args.path, reveal_hosts=bool(args.reveal_hosts or args.host_map))
    if args.host_map:
        from denpex_ml.topology.reveal import write_private_json

        write_private_json(args.host_map, d.host_names or {})
        d = d if args.reveal_hosts else replace(d, host_names=None)
    if args.json:
        print(json.dumps(d.to_dict(), indent=2))
    else:
        print(d.summary())
