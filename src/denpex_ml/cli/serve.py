"""``denpex-ml serve``: the local page to paste a log or drop files, and ``POST /classify``."""

from __future__ import annotations

import argparse
import ipaddress
import logging
import sys
from typing import TYPE_CHECKING

from denpex_ml.cli.console import EXIT_OK, add_model_args, usage_error

if TYPE_CHECKING:
    from denpex_ml.cli.console import SubParsers

__all__ = ["add_parser", "run"]

log = logging.getLogger("denpex_ml.cli")


def add_parser(sub: SubParsers, name: str = "serve") -> None:
    p = sub.add_parser(
        name,
        help="a local web page to diagnose a pasted log or dropped files (and POST /classify for tools)",
        description=(
            "Serve a page where you paste a log or drop files / an archive and see the diagnosis, with "
            "the evidence per rank and each rank's last lines before the failure; POST /classify answers "
            "JSON (what `classify --json` prints, plus `timeline` and `input`). Binds 127.0.0.1 by default; "
            "uploads are read in memory (or the system temporary directory) and dropped after the answer."
        ),
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8765, help="port (default 8765; 0: any free port)")
    add_model_args(p)
    p.add_argument(
        "--max-upload-mb", type=float, default=64.0, metavar="MB", help="largest request body in MiB (default 64)"
    )
    p.set_defaults(handler=run)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def run(args: argparse.Namespace) -> int:
    try:
        import uvicorn
    except ImportError:
        from denpex_ml.errors import DependencyMissingError

        raise DependencyMissingError("denpex-ml serve needs uvicorn: pip install 'denpex-ml[serve]'") from None
    from denpex_ml.model.core import default_model, load_model
    from denpex_ml.serve.app import ServeConfig, create_app

    if args.max_upload_mb <= 0:
        return usage_error("serve", "--max-upload-mb must be > 0")
    model = load_model(args.model, taxonomy_dirs=args.taxonomy) if (args.model or args.taxonomy) else default_model()
    hosts: tuple[str, ...] = ServeConfig().allowed_hosts
    if not _loopback(args.host):
        log.warning("serving on %s: every machine that can reach it can send logs to it", args.host)
        hosts = ("*",)
    config = ServeConfig(max_upload_bytes=int(args.max_upload_mb * 1024**2), allowed_hosts=hosts)
    app = create_app(model, config)
    shown = f"[{args.host}]" if ":" in args.host else args.host
    if not args.quiet:
        print(f"denpex-ml serve: http://{shown}:{args.port}/ (Ctrl-C stops it)", file=sys.stderr)
    uvicorn.run(
        app, host=args.host, port=args.port, log_level="warning", ws="none", lifespan="off", server_header=False
    )
    return EXIT_OK
