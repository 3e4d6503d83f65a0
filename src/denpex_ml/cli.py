"""The ``denpex-ml`` command line: thin subcommands over library functions.

Exit codes: 0 success; 1 some jobs/items failed (batch commands); 2 usage error;
3 input error (a :class:`~denpex_ml.errors.DenpexError`: bad path, archive, taxonomy...);
4 a retrained model failed its promotion gate while a promotion was asked for (``--promote-to``).

``-v``/``-vv`` (info, debug logging of denpex_ml on stderr) and ``-q`` (errors only; no progress
or summary where a command has them) are accepted before or after the subcommand. Also run as
``python -m denpex_ml``.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from denpex_ml import __version__
from denpex_ml.errors import DenpexError

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["COMMANDS", "EXIT_GATE_FAILED", "EXIT_INPUT_ERROR", "EXIT_OK", "EXIT_PARTIAL", "EXIT_USAGE", "main"]

EXIT_OK = 0
EXIT_PARTIAL = 1
EXIT_USAGE = 2
EXIT_INPUT_ERROR = 3
EXIT_GATE_FAILED = 4

Handler = Callable[[argparse.Namespace], int]

log = logging.getLogger("denpex_ml.cli")


def _console() -> Console:
    from rich.console import Console

    # pipes and files get wide, unwrapped output so ids and lines stay whole
    return Console(soft_wrap=False, width=None if sys.stdout.isatty() else 200)


# -- taxonomy -------------------------------------------------------------------------------
def _add_taxonomy(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("taxonomy", help="list, show or search failure taxonomy entries")
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
    table.add_column("id", no_wrap=True)
    table.add_column("category", no_wrap=True)
    table.add_column("title", overflow="fold")
    table.add_column("fingerprints", justify="right")
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
        # log text is never markup: gloo's "[/pytorch/.../pair.cc:537]" would read as a closing tag
        table.add_row(str(key), str(st.n_lines), str(st.n_salient), Text("\n".join(t[:160] for t in sal)))
    console.print(table)
    if bundle.launcher and bundle.launcher.root_cause:
        rc = bundle.launcher.root_cause
        console.print(f"launcher root cause: rank {rc.rank} exitcode {rc.exitcode} {rc.signal or ''}")
    for w in bundle.warnings:
        console.print(f"[yellow]warning:[/] {w}")
    return EXIT_OK


# -- classify -------------------------------------------------------------------------------
def _add_classify(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("classify", help="diagnose one failed job: failure class, confidence, first failing rank, fix")
    p.add_argument("path", nargs="?", help="log file (.gz ok), directory of per-rank logs, or archive; '-' reads stdin")
    p.add_argument("--model", metavar="DIR", help="model directory (default: the shipped model)")
    p.add_argument(
        "--taxonomy",
        action="append",
        default=[],
        metavar="DIR",
        help="extra taxonomy directory the model was trained with",
    )
    p.add_argument("--json", action="store_true", help="print the diagnosis as JSON")
    p.add_argument(
        "--reveal-hosts",
        action="store_true",
        help="for the owner of the logs: show real host names beside their pseudonyms (node-N)",
    )
    p.add_argument("--host-map", metavar="FILE", help="write the job's pseudonym -> real host map to FILE (mode 0600)")
    p.set_defaults(handler=_cmd_classify)


def _cmd_classify(args: argparse.Namespace) -> int:
    from denpex_ml.model.core import default_model, load_model

    if args.path is None:
        print("denpex-ml classify: error: give a PATH (or '-' for stdin)", file=sys.stderr)
        return EXIT_USAGE
    model = load_model(args.model, taxonomy_dirs=args.taxonomy) if (args.model or args.taxonomy) else default_model()
    if args.path == "-":  # streamed: long lines are cut while reading, memory stays flat
        from time import perf_counter

        from denpex_ml.logs.ingest import read_stream
        from denpex_ml.logs.masking import Masker

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
    return EXIT_OK


# -- synth ----------------------------------------------------------------------------------
def _add_synth(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("synth", help="generate synthetic labelled multi-rank failure logs")
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
    p.set_defaults(handler=_cmd_synth)


def _cmd_synth(args: argparse.Namespace) -> int:
    from denpex_ml.synthetic import generate, write_archive, write_job_dirs, write_jsonl

    try:
        lo, hi = (int(x) for x in args.noise.split(","))
    except ValueError:
        print(f"denpex-ml synth: error: --noise must be LO,HI integers, got {args.noise!r}", file=sys.stderr)
        return EXIT_USAGE
    if args.per_class < 1:
        print("denpex-ml synth: error: --per-class must be >= 1", file=sys.stderr)
        return EXIT_USAGE
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


# -- train ----------------------------------------------------------------------------------
def _add_train(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("train", help="train, evaluate and save a model (tracked with mlflow)")
    p.add_argument("--out", required=True, metavar="DIR", help="model directory to write")
    p.add_argument("--config", metavar="FILE", help="JSON file of TrainConfig fields")
    p.add_argument("--seed", type=int)
    p.add_argument("--per-class-train", type=int)
    p.add_argument("--per-class-val", type=int)
    p.add_argument("--per-class-test", type=int)
    p.add_argument("--real-data", metavar="JSONL", help="real labelled incidents ('' for none)")
    p.add_argument(
        "--incidents", action="append", default=[], metavar="PATH", help="extra labelled incidents (repeatable)"
    )
    p.add_argument(
        "--taxonomy", action="append", default=[], metavar="DIR", help="extra taxonomy directory (repeatable)"
    )
    p.add_argument("--encoder", help="encoder name (default static:minilm-static-256)")
    p.add_argument("--no-track", action="store_true", help="do not log the run to mlflow")
    p.add_argument("--experiment", default="denpex-ml", help="mlflow experiment name")
    p.set_defaults(handler=_cmd_train)


def _cmd_train(args: argparse.Namespace) -> int:
    from denpex_ml.training.config import TrainConfig
    from denpex_ml.training.trainer import train

    fields: dict[str, object] = {}
    if args.config:
        try:
            fields.update(json.loads(Path(args.config).read_text(encoding="utf-8")))
        except (OSError, ValueError) as exc:
            print(f"denpex-ml train: error: cannot read --config {args.config}: {exc}", file=sys.stderr)
            return EXIT_USAGE
    for name in ("seed", "per_class_train", "per_class_val", "per_class_test", "encoder"):
        value = getattr(args, name)
        if value is not None:
            fields[name] = value
    if args.real_data is not None:
        fields["real_data"] = args.real_data or None
    if args.incidents:
        fields["extra_data"] = tuple(args.incidents)
    if args.taxonomy:
        fields["taxonomy_dirs"] = tuple(args.taxonomy)
    config = TrainConfig.from_dict(fields)
    with _progress() as progress:
        result = train(config, out=args.out, progress=progress)
    _print_metrics(result.metrics)
    if not args.no_track:
        from denpex_ml.tracking import log_training_run, tracking_uri

        run_id = log_training_run(
            experiment=args.experiment,
            params=config.to_dict(),
            metrics=result.metrics,
            model_dir=result.model_dir,
            run_name=Path(args.out).name,
        )
        print(f"mlflow run {run_id} ({tracking_uri()})", file=sys.stderr)
    print(f"model written to {result.model_dir} in {result.seconds:.0f} s", file=sys.stderr)
    return EXIT_OK


# -- retrain --------------------------------------------------------------------------------
def _add_retrain(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "retrain",
        help="train a new model version with new labelled incidents; promote it only if it is not worse",
        description=(
            "Retrain from the base model's own recipe plus new incidents (and taxonomy entries), "
            "re-using cached features; then compare base and candidate on the same data (promotion gate). "
            "Exit 0: the candidate was written (and promoted with --promote-to or in the mlflow registry "
            "when its gate passed); what regressed is printed and in OUT/gate.md. Exit 4 only when "
            "--promote-to was given and the gate failed (nothing promoted)."
        ),
    )
    p.add_argument("--base", default=None, metavar="DIR", help="current model (default: the shipped model)")
    p.add_argument(
        "--incidents",
        action="append",
        required=True,
        metavar="PATH",
        help="new labelled incidents: JSONL, label folders or an incident store (repeatable)",
    )
    p.add_argument(
        "--taxonomy",
        action="append",
        default=[],
        metavar="DIR",
        help="taxonomy directory with new entries (repeatable)",
    )
    p.add_argument(
        "--holdout",
        action="append",
        default=[],
        metavar="PATH",
        help="labelled incidents for the gate only (repeatable)",
    )
    p.add_argument("--out", required=True, metavar="DIR", help="directory of the new model version")
    p.add_argument(
        "--promote-to", metavar="DIR", help="copy a passing model here (the previous one is kept as DIR.prev)"
    )
    p.add_argument(
        "--tolerance", type=float, default=0.01, help="largest allowed drop of macro-F1/top-1 (default 0.01)"
    )
    p.add_argument(
        "--class-tolerance", type=float, default=0.05, help="largest allowed drop of a class's F1 (default 0.05)"
    )
    p.add_argument("--cache", metavar="DIR", help="feature cache (default $DENPEX_CACHE or ~/.cache/denpex_ml)")
    p.add_argument("--no-track", action="store_true", help="no mlflow run, no registry")
    p.add_argument("--experiment", default="denpex-ml-retrain", help="mlflow experiment name")
    p.set_defaults(handler=_cmd_retrain)


def _cmd_retrain(args: argparse.Namespace) -> int:
    from denpex_ml.model.persistence import models_root
    from denpex_ml.training.retraining import retrain

    with _progress() as progress:
        result = retrain(
            args.base or models_root() / "default",
            args.incidents,
            out=args.out,
            taxonomy_dirs=args.taxonomy,
            holdout=args.holdout,
            tolerance=args.tolerance,
            class_tolerance=args.class_tolerance,
            promote_to=args.promote_to,
            cache_dir=args.cache,
            track=not args.no_track,
            experiment=args.experiment,
            progress=progress,
        )
    gate = result.gate
    from rich.markdown import Markdown

    _console().print(Markdown(gate.markdown().split("\n## Per class")[0]))
    if result.run_id:
        print(
            f"mlflow run {result.run_id}"
            + (f", registered version {result.registered_version}" if result.registered_version else ""),
            file=sys.stderr,
        )
    for line in gate.regressions:
        print(f"regressed: {line}", file=sys.stderr)
    if gate.regressed_classes:
        print(f"classes that regressed: {', '.join(gate.regressed_classes)}", file=sys.stderr)
    if result.promoted and args.promote_to:
        where = f"; promoted to {args.promote_to}"
    elif args.promote_to:
        where = f"; NOT promoted to {args.promote_to}"
    else:
        where = "; no promotion asked for (--promote-to)"
    print(
        f"model written to {result.model_dir} in {result.seconds:.0f} s; gate {'passed' if gate.passed else 'FAILED'}"
        f"{where} (report: {result.model_dir / 'gate.md'})",
        file=sys.stderr,
    )
    return EXIT_GATE_FAILED if args.promote_to and not gate.passed else EXIT_OK


# -- eval -----------------------------------------------------------------------------------
def _add_eval(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("eval", help="evaluate a model and its baselines on held-out data; write a report")
    p.add_argument("--model", metavar="DIR", help="model directory (default: the shipped model)")
    p.add_argument("--data", action="append", default=[], metavar="PATH", help="extra labelled JSONL/dir (repeatable)")
    p.add_argument("--out", default="reports/latest", metavar="DIR", help="report directory (default reports/latest)")
    p.add_argument("--per-class-test", type=int, metavar="N", help="synthetic test incidents per class")
    p.add_argument("--no-real-cv", action="store_true", help="skip grouped k-fold scoring of real incidents (fast)")
    p.add_argument(
        "--ablation", action="store_true", help="also refit the head with parts of its evidence (what each part adds)"
    )
    p.add_argument(
        "--write-reference", action="store_true", help="store the regression gate's reference figures with the model"
    )
    p.add_argument("--no-track", action="store_true", help="do not log the run to mlflow")
    p.add_argument("--experiment", default="denpex-ml-eval", help="mlflow experiment name")
    p.set_defaults(handler=_cmd_eval)


def _cmd_eval(args: argparse.Namespace) -> int:
    from denpex_ml.evaluation import EvalConfig, run_eval

    config = EvalConfig(
        model_dir=args.model,
        per_class_test=args.per_class_test,
        real_cv=not args.no_real_cv,
        extra_data=args.data,
        ablation=args.ablation,
    )
    with _progress() as progress:
        result = run_eval(config, args.out, progress=progress, track=not args.no_track, experiment=args.experiment)
    _print_metrics(result.metrics)
    if args.write_reference:
        from denpex_ml.evaluation.gate import write_reference
        from denpex_ml.model.persistence import models_root

        path = write_reference(result, args.model or models_root() / "default")
        print(f"gate reference written to {path}", file=sys.stderr)
    print(f"report written to {args.out} in {result.seconds:.0f} s", file=sys.stderr)
    return EXIT_OK


def _print_metrics(metrics: dict[str, float]) -> None:
    from rich.table import Table

    table = Table(title="evaluation (data the model did not train on)")
    for col in ("data set", "model", "rule baseline", "tf-idf baseline"):
        table.add_column(col)
    for ds in ("synthetic_test", "synthetic_heldout", "real", "real_confident"):
        for metric in ("top1", "top3", "macro_f1", "ece"):
            key = f"{ds}/{metric}"
            if key not in metrics:
                continue

            def fmt(k: str) -> str:
                v = metrics.get(k)
                return "-" if v is None else f"{v:.3f}"

            table.add_row(f"{ds} {metric}", fmt(key), fmt(f"{ds}/rule/{metric}"), fmt(f"{ds}/tfidf/{metric}"))
    _console().print(table)


class _progress:
    """A rich progress bar on a terminal, plain log lines otherwise."""

    def __enter__(self):  # type: ignore[no-untyped-def]
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self._bar = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(), transient=False
        )
        self._bar.__enter__()
        return self._start

    def _start(self, name: str, total: int):  # type: ignore[no-untyped-def]
        task = self._bar.add_task(name, total=total)
        return lambda: self._bar.advance(task)

    def __exit__(self, *exc: object) -> None:
        self._bar.__exit__(None, None, None)


# -- mlflow-log -----------------------------------------------------------------------------
def _add_mlflow_log(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "mlflow-log",
        help="log a model directory (default: the shipped model) to mlflow as a pyfunc; optionally register it",
        description=(
            "Log a model directory to the mlflow tracking server (MLFLOW_TRACKING_URI, default "
            "sqlite:///mlflow.db here) as a pyfunc that predicts on a DataFrame with a 'text' and/or "
            "'path' column; no retraining. Prints the run id and the model URI."
        ),
    )
    p.add_argument("--model", metavar="DIR", help="model directory (default: the shipped model)")
    p.add_argument("--register", metavar="NAME", help="also register it in the model registry as NAME")
    p.add_argument("--experiment", default="denpex-ml", help="mlflow experiment name (default denpex-ml)")
    p.add_argument("--run-name", metavar="NAME", help="mlflow run name")
    p.set_defaults(handler=_cmd_mlflow_log)


def _cmd_mlflow_log(args: argparse.Namespace) -> int:
    from denpex_ml.model.persistence import read_model_dir

    if args.model is not None:
        read_model_dir(args.model)  # a bad directory is an input error before mlflow starts
    import mlflow

    from denpex_ml.mlflow_model import log_model
    from denpex_ml.tracking import tracking_uri

    mlflow.set_tracking_uri(tracking_uri())
    mlflow.set_experiment(args.experiment)
    with mlflow.start_run(run_name=args.run_name) as run:
        info = log_model(args.model, registered_model_name=args.register)
    print(f"mlflow run {run.info.run_id} ({tracking_uri()})")
    print(f"model: {info.model_uri}")
    if args.register:
        print(f"registered: models:/{args.register}/{info.registered_model_version}")
    return EXIT_OK


def _add_incidents(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from denpex_ml.cli_incidents import add_parser

    add_parser(sub)


def _add_score(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from denpex_ml.cli_score import add_parser

    add_parser(sub)


def _add_report(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from denpex_ml.cli_report import add_parser

    add_parser(sub)


def _add_serve(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from denpex_ml.cli_serve import add_parser

    add_parser(sub)


#: Closed registry of subcommands: name -> function adding its parser.
COMMANDS: dict[str, Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None]] = {
    "classify": _add_classify,
    "incidents": _add_incidents,
    "score": _add_score,
    "report": _add_report,
    "serve": _add_serve,
    "eval": _add_eval,
    "retrain": _add_retrain,
    "ingest": _add_ingest,
    "mlflow-log": _add_mlflow_log,
    "synth": _add_synth,
    "taxonomy": _add_taxonomy,
    "train": _add_train,
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


def _subparsers(parser: argparse.ArgumentParser) -> list[argparse._SubParsersAction[argparse.ArgumentParser]]:
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
    for add in COMMANDS.values():
        add(sub)
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
    import time

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
        from denpex_ml.logs.masking import Masker

        # error messages name inputs (member names, paths): masked like log text
        print(f"denpex-ml: error: {Masker().mask(str(exc))}", file=sys.stderr)
        code = EXIT_INPUT_ERROR
    except BrokenPipeError:  # e.g. `denpex-ml ... | head`
        code = EXIT_OK
    except KeyboardInterrupt:
        print("denpex-ml: interrupted", file=sys.stderr)
        code = 130
    log.info("%s finished in %.2f s, exit code %d", args.command, time.perf_counter() - t0, code)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
