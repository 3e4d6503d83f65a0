"""``denpex-ml train``, ``retrain``, ``eval`` and ``mlflow-log``: making, checking and publishing
models (tracked with mlflow, imported inside the functions that use it)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from denpex_ml.cli.console import EXIT_GATE_FAILED, EXIT_OK, Progress, add_model_args, console, usage_error

if TYPE_CHECKING:
    from denpex_ml.cli.console import SubParsers

__all__ = ["add_parser", "run_eval", "run_mlflow_log", "run_retrain", "run_train"]


def add_parser(sub: SubParsers, name: str) -> None:
    """Add the parser of ``name``: one of ``train``, ``retrain``, ``eval``, ``mlflow-log``."""
    _PARSERS[name](sub)


# -- train ----------------------------------------------------------------------------------
def _add_train(sub: SubParsers) -> None:
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
    p.set_defaults(handler=run_train)


def run_train(args: argparse.Namespace) -> int:
    from denpex_ml.training.config import TrainConfig
    from denpex_ml.training.trainer import train

    fields: dict[str, object] = {}
    if args.config:
        try:
            fields.update(json.loads(Path(args.config).read_text(encoding="utf-8")))
        except (OSError, ValueError) as exc:
            return usage_error("train", f"cannot read --config {args.config}: {exc}")
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
    with Progress() as progress:
        result = train(config, out=args.out, progress=progress.step)
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
def _add_retrain(sub: SubParsers) -> None:
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
    p.set_defaults(handler=run_retrain)


def run_retrain(args: argparse.Namespace) -> int:
    from denpex_ml.model.persistence import models_root
    from denpex_ml.training.retraining import retrain

    with Progress() as progress:
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
            progress=progress.step,
        )
    gate = result.gate
    from rich.markdown import Markdown

    console().print(Markdown(gate.markdown().split("\n## Per class")[0]))
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
def _add_eval(sub: SubParsers) -> None:
    p = sub.add_parser("eval", help="evaluate a model and its baselines on held-out data; write a report")
    add_model_args(p, taxonomy=False)
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
    p.set_defaults(handler=run_eval)


def run_eval(args: argparse.Namespace) -> int:
    from denpex_ml.evaluation import EvalConfig
    from denpex_ml.evaluation import run_eval as evaluate

    config = EvalConfig(
        model_dir=args.model,
        per_class_test=args.per_class_test,
        real_cv=not args.no_real_cv,
        extra_data=args.data,
        ablation=args.ablation,
    )
    with Progress() as progress:
        result = evaluate(config, args.out, progress=progress.step, track=not args.no_track, experiment=args.experiment)
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
    console().print(table)


# -- mlflow-log -----------------------------------------------------------------------------
def _add_mlflow_log(sub: SubParsers) -> None:
    p = sub.add_parser(
        "mlflow-log",
        help="log a model directory (default: the shipped model) to mlflow as a pyfunc; optionally register it",
        description=(
            "Log a model directory to the mlflow tracking server (MLFLOW_TRACKING_URI, default "
            "sqlite:///mlflow.db here) as a pyfunc that predicts on a DataFrame with a 'text' and/or "
            "'path' column; no retraining. Prints the run id and the model URI."
        ),
    )
    add_model_args(p, taxonomy=False)
    p.add_argument("--register", metavar="NAME", help="also register it in the model registry as NAME")
    p.add_argument("--experiment", default="denpex-ml", help="mlflow experiment name (default denpex-ml)")
    p.add_argument("--run-name", metavar="NAME", help="mlflow run name")
    p.set_defaults(handler=run_mlflow_log)


def run_mlflow_log(args: argparse.Namespace) -> int:
    from denpex_ml.model.persistence import read_model_dir

    if args.model is not None:
        read_model_dir(args.model)  # a bad directory is an input error before mlflow starts

    from denpex_ml.mlflow_model import log_model
    from denpex_ml.tracking import start_run, tracking_uri

    with start_run(args.experiment, run_name=args.run_name) as run:
        info = log_model(args.model, registered_model_name=args.register)
    print(f"mlflow run {run.info.run_id} ({tracking_uri()})")
    print(f"model: {info.model_uri}")
    if args.register:
        print(f"registered: models:/{args.register}/{info.registered_model_version}")
    return EXIT_OK


_PARSERS: dict[str, Callable[[SubParsers], None]] = {
    "train": _add_train,
    "retrain": _add_retrain,
    "eval": _add_eval,
    "mlflow-log": _add_mlflow_log,
}
