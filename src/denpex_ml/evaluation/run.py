"""The evaluation runner (``denpex-ml eval``): the model and every baseline on the same rows.

Honesty: the synthetic test split is regenerated from the model's manifest (same seed, the
``test`` random stream the model never trained on); real incidents, which the shipped model
trained on, are scored by grouped k-fold retraining of the head (``real_cv``), never by the
model itself; the report names the model, the data (with hashes) and the splits.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from denpex_ml.baselines import (
    GPUAlertBaseline,
    RuleBaseline,
    ZeroShotBaseline,
    bundle_text,
    gpualert_version,
)
from denpex_ml.dataset.io import data_path_exists
from denpex_ml.dataset.prequential import load_prequential, pool_latest
from denpex_ml.evaluation.datasets import EvalSet, Pool, build_pools, data_hash, synthetic_train
from denpex_ml.evaluation.measures import Measured, group_metrics, measure
from denpex_ml.evaluation.result import EvalConfig, EvalResult
from denpex_ml.model.alternatives import alternatives_order
from denpex_ml.model.core import DenpexModel, load_model
from denpex_ml.model.featurize import JobAnalysis
from denpex_ml.model.outside import enough_to_fit, out_of_fold, outside_features
from denpex_ml.taxonomy import UNKNOWN_ID
from denpex_ml.training.config import TrainConfig
from denpex_ml.training.data import incident_bundle
from denpex_ml.training.fitting import (
    FeatureSet,
    concat_features,
    featurize,
    fit_fold_heads,
    fit_head,
    fit_tfidf,
    real_folds,
)
from denpex_ml.training.progress import Progress, no_progress

__all__ = ["EvalConfig", "EvalResult", "evaluate"]

log = logging.getLogger(__name__)


@dataclass
class _Scored:
    """One pool scored by the model (and the baselines)."""

    y: np.ndarray
    X: np.ndarray
    analyses: list[JobAnalysis]
    proba: np.ndarray
    pred: np.ndarray
    ranks: list[tuple[int | None, int | None, bool]]
    seconds: np.ndarray
    texts: list[str]
    baselines: dict[str, np.ndarray] = field(default_factory=dict)

    def features(self, pool: Pool) -> FeatureSet:
        return FeatureSet(pool.examples, self.X, self.y, self.texts)

    def order(self, labels: list[str]) -> np.ndarray:
        """Each job's classes in the order its diagnosis lists them (hang classes kept in view)."""
        hang = np.asarray([a.hang.is_hang for a in self.analyses], dtype=bool)
        return alternatives_order(self.proba, labels, hang) if len(self.proba) else np.zeros((0, 3), dtype=int)


def _score(model: DenpexModel, pool: Pool, index: dict[str, int], progress: Progress) -> _Scored:
    """Classify every job of a pool as ``classify`` does, timing each one."""
    rows, analyses, probas, preds, ranks, secs, texts = [], [], [], [], [], [], []
    tick = progress(f"classifying {pool.name}", len(pool.examples))
    for ex in pool.examples:
        t0 = time.perf_counter()
        a = model.analyse(incident_bundle(ex.source))
        p = model.predict_proba([a])[0]
        d = model.decide(a, p, t0)
        secs.append(time.perf_counter() - t0)
        rows.append(model.featurizer.base_vector(a))
        analyses.append(a)
        probas.append(p)
        preds.append(-1 if d.label == UNKNOWN_ID else index[d.label])
        ranks.append((ex.initiating_rank, d.initiating_rank, ex.initiating_rank in a.bundle.streams))
        texts.append(bundle_text(a.bundle))
        tick()
    n = len(model.labels)
    return _Scored(
        y=np.asarray([index.get(e.label, -1) for e in pool.examples], dtype=np.int64),
        X=np.stack(rows) if rows else np.zeros((0, model.featurizer.n_base_features), np.float32),
        analyses=analyses,
        proba=np.stack(probas) if probas else np.zeros((0, n)),
        pred=np.asarray(preds, dtype=np.int64),
        ranks=ranks,
        seconds=np.asarray(secs),
        texts=texts,
    )


def _outside_out_of_fold(model: DenpexModel, s: _Scored, pool: Pool) -> np.ndarray | None:
    """The out-of-taxonomy detector's probabilities for a pool scored out of fold: refitted per
    grouped fold on the out-of-fold head scores (the shipped detector learned from these very
    incidents); ``None`` without a detector or without enough ``unknown`` incidents to refit it."""
    if model.outside is None or not len(s.y):
        return None
    is_unknown = s.y == -1
    if not enough_to_fit(is_unknown):
        return None
    shifted = np.stack([model.job_proba(a, p) for a, p in zip(s.analyses, s.proba, strict=True)])
    groups = np.asarray([e.group for e in pool.examples])
    return out_of_fold(outside_features(s.X, shifted, model.head.layout), is_unknown, groups)


def _rediagnose(model: DenpexModel, s: _Scored, proba: np.ndarray, pool: Pool, index: dict[str, int]) -> None:
    """Replace the model's scores of a pool by out-of-fold ones (same abstention/initiator rules)."""
    s.proba = proba
    outside_p = _outside_out_of_fold(model, s, pool)
    preds, ranks = [], []
    for i, (a, p, ex) in enumerate(zip(s.analyses, proba, pool.examples, strict=True)):
        d = model.decide(a, p, time.perf_counter(), outside_p=None if outside_p is None else float(outside_p[i]))
        preds.append(-1 if d.label == UNKNOWN_ID else index[d.label])
        ranks.append((ex.initiating_rank, d.initiating_rank, ex.initiating_rank in a.bundle.streams))
    s.pred = np.asarray(preds, dtype=np.int64)
    s.ranks = ranks


_RULE_PAIRS = ("root_cause", "root_cause_n", "symptom", "context", "rule_score", "rule_margin", "rule_top")

#: Ablations of the head on real logs: (name, pair features the ranker may use), each part added
#: to the previous one; the full model adds the stage-1 classifier over the whole job vector.
ABLATIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("rules, learned weights", _RULE_PAIRS),
    ("+ labelled lines", (*_RULE_PAIRS, "line_sim", "line_sim_margin")),
    ("+ hang analysis", (*_RULE_PAIRS, "line_sim", "line_sim_margin", "hang_affinity", "hang_family")),
    (
        "+ job retrieval and zero-shot",
        (
            *_RULE_PAIRS, "line_sim", "line_sim_margin", "hang_affinity", "hang_family",
            "retrieval_best", "retrieval_votes", "zero_shot",
        ),
    ),
)  # fmt: skip


def _top_metrics(P: np.ndarray, y: np.ndarray, labels: list[str]) -> dict[str, float]:
    """top-1 / top-3 over known rows and per group, argmax answers (no abstention)."""
    known = y >= 0
    pred = np.where(P.sum(axis=1) > 0, P.argmax(axis=1), -1)
    out = {k: v for k, v in group_metrics(P[known], y[known], pred[known], labels).items()}
    top3 = np.argsort(-P[known], axis=1)[:, :3]
    out["top1"] = float((pred[known] == y[known]).mean()) if known.any() else float("nan")
    out["top3"] = float(np.mean([t in r for t, r in zip(y[known], top3, strict=True)])) if known.any() else float("nan")
    return out


def _baseline_pred(name: str, P: np.ndarray) -> np.ndarray:
    """Argmax, or -1 (abstain) where a rule-like baseline found no evidence at all."""
    pred = P.argmax(axis=1) if len(P) else np.zeros(0, np.int64)
    if name in ("rule", "gpualert"):
        pred = np.where(P.sum(axis=1) > 0, pred, -1)
    return np.asarray(pred, dtype=np.int64)


def _model_info(model: DenpexModel, model_dir: str | None) -> dict[str, Any]:
    from denpex_ml.model.persistence import models_root

    path = Path(model_dir) if model_dir else models_root() / "default"
    m = model.manifest
    h = hashlib.sha256(json.dumps(m.get("files", {}), sort_keys=True).encode()).hexdigest()[:16]
    return {
        "path": str(path),
        "files_hash": h,
        "encoder": m.get("encoder"),
        "taxonomy_hash": m.get("taxonomy_hash"),
        "training_data_hash": m.get("training_data_hash"),
        "training_counts": m.get("training_counts"),
        "abstain_threshold": model.abstain_threshold,
        "outside_threshold": None if model.outside is None else model.outside.threshold,
        "config": m.get("config", {}),
    }


def evaluate(config: EvalConfig, *, progress: Progress = no_progress) -> EvalResult:
    """Evaluate a model and the baselines on every data set; see the module docstring.

    The steps: the data sets (:func:`_data_sets`), the model on every pool (:func:`_score`),
    the synthetic training features when a step refits something, the real incidents'
    out-of-fold scores (:func:`_real_cross_validation`), the baselines (:func:`_score_baselines`)
    and every system measured on every data set (:func:`_measure`).
    """
    t_start = time.perf_counter()
    model = load_model(config.model_dir)
    run = _Run(model, config, progress)
    notes: list[str] = []
    pools, sets, trained_real = _data_sets(run, notes)
    scored = {name: _score(model, pool, run.index, progress) for name, pool in pools.items()}
    ablation: dict[str, dict[str, float]] = {}
    train_fs: FeatureSet | None = None
    if "tfidf" in config.baselines or (config.real_cv and "real" in pools):
        train_ex = synthetic_train(run.mcfg, model.taxonomy)
        train_fs = featurize(
            model.featurizer, train_ex, run.index, keep=False, progress=progress, name="synthetic train"
        )
    cross_validated = False
    if "real" in pools and config.real_cv and train_fs is not None:
        ablation = _real_cross_validation(run, pools["real"], scored["real"], train_fs, notes)
        cross_validated = True
    gpu_version = _score_baselines(run, pools, scored, train_fs, trained_real)
    measured, data = _measure(run, pools, scored, sets)
    # which pools' answers come from a model that did not train on them
    trained_user = {f"user:{Path(p).name}" for p in config.extra_data if p in (run.mcfg.get("extra_data") or [])}
    predictions = {
        name: _predictions(
            pool,
            scored[name],
            run.labels,
            held_out=(cross_validated and name == "real") or (not pool.trained_on and name not in trained_user),
        )
        for name, pool in pools.items()
        if pool.examples and pool.examples[0].kind != "synthetic"
    }
    systems = {
        "model": f"denpex_ml model {Path(config.model_dir).name if config.model_dir else 'default'}",
        "rule": "taxonomy fingerprint regexes only",
        "tfidf": "TF-IDF + logistic regression on the whole log",
        "zeroshot": "nearest taxonomy entry by embedding similarity",
        "gpualert": f"GPUAlert {gpu_version}" if gpu_version else "GPUAlert: not installed",
    }
    systems = {k: v for k, v in systems.items() if k == "model" or k in config.baselines}
    return EvalResult(
        config=config,
        model=_model_info(model, config.model_dir),
        labels=run.labels,
        data=data,
        measured=measured,
        systems=systems,
        seconds=time.perf_counter() - t_start,
        notes=notes,
        prequential=load_prequential(config.prequential_dir) if config.prequential_dir else [],
        prequential_pooled=pool_latest(config.prequential_dir) if config.prequential_dir else None,
        ablation=ablation,
        predictions=predictions,
    )


def _predictions(pool: Pool, s: _Scored, labels: list[str], *, held_out: bool) -> list[dict[str, Any]]:
    """Per incident: label, the model's answer and top three, the fingerprint rules' answer;
    ``held_out``: the answers come from a model that did not train on the incident (out of fold
    for the real set)."""
    rule = s.baselines.get("rule")
    rows = []
    order = s.order(labels)
    for i, ex in enumerate(pool.examples):
        p = s.proba[i]
        top = order[i][:3].tolist()
        row: dict[str, Any] = {
            "id": ex.id,
            "group": ex.group,
            "label": ex.label,
            "predicted": UNKNOWN_ID if s.pred[i] < 0 else labels[int(s.pred[i])],
            "confidence": round(float(p[top[0]]), 4),
            "top3": [[labels[j], round(float(p[j]), 4)] for j in top],
            "correct": bool(s.pred[i] == s.y[i]) if s.y[i] >= 0 else bool(s.pred[i] < 0),
            "held_out": held_out,
            "hang": bool(s.analyses[i].hang.is_hang),
            "initiating_rank": s.ranks[i][0],
            "predicted_rank": s.ranks[i][1],
        }
        if rule is not None:
            r = int(_baseline_pred("rule", rule[i : i + 1])[0])
            row["rules"] = UNKNOWN_ID if r < 0 else labels[r]
        rows.append(row)
    return rows


class _Run:
    """What every step of one evaluation shares: the model, its labels and training recipe."""

    def __init__(self, model: DenpexModel, config: EvalConfig, progress: Progress) -> None:
        self.model = model
        self.config = config
        self.progress = progress
        self.labels = list(model.labels)
        self.index = {lab: i for i, lab in enumerate(self.labels)}
        self.mcfg = dict(model.manifest.get("config", {}))
        self.tcfg = TrainConfig.from_dict({**self.mcfg, "real_data": None, "extra_data": ()})

    @functools.cached_property
    def entry_emb(self) -> np.ndarray:
        """The taxonomy entries embedded (zero-shot baseline, head refits)."""
        return np.asarray(
            self.model.encoder.encode([self.model.taxonomy.get(lab).text_for_search() for lab in self.labels])
        )


def _data_sets(run: _Run, notes: list[str]) -> tuple[dict[str, Pool], list[EvalSet], bool]:
    """The pools of jobs, the data sets measured on them, and whether the model trained on the
    real incidents; why a set is left out or not held-out goes to ``notes``."""
    config, mcfg = run.config, run.mcfg
    real_path = mcfg.get("real_data") if config.real_data == "" else config.real_data
    if real_path and not all(data_path_exists(p) for p in ([real_path] if isinstance(real_path, str) else real_path)):
        notes.append(f"real data {real_path} not found: real and real-unknown rows left out")
        real_path = None
    trained_real = bool(real_path) and real_path == mcfg.get("real_data")
    pools, sets = build_pools(
        mcfg,
        run.model.taxonomy,
        per_class_test=config.per_class_test,
        real_data=real_path,
        real_trained_on=trained_real,
        extra_data=config.extra_data,
    )
    for p in config.extra_data:
        if p in (mcfg.get("extra_data") or []):
            notes.append(f"{p} is in the model's training data: its figures are not held-out")
    if "real" in pools and pools["real"].trained_on and not config.real_cv:
        sets = [s for s in sets if s.name != "real"]
        notes.append("real: left out (the model trained on these incidents; run with --real-cv)")
    return pools, sets, trained_real


def _real_cross_validation(
    run: _Run, pool: Pool, s: _Scored, train_fs: FeatureSet, notes: list[str]
) -> dict[str, dict[str, float]]:
    """Real incidents: out-of-fold model and TF-IDF scores, grouped by source thread (the head
    refitted per fold); with ``config.ablation``, the figures of each part of the head."""
    model, config, tcfg, labels = run.model, run.config, run.tcfg, run.labels
    real_fs = s.features(pool)
    folds = min(tcfg.cv_folds, len(set(real_fs.groups)))
    oof = np.zeros_like(s.proba)
    tf_oof = np.zeros_like(s.proba)
    abl_oof = {name: np.zeros_like(s.proba) for name, _ in (ABLATIONS if config.ablation else ())}
    tick = run.progress("cross-validating on real incidents", folds)
    fold_list = list(real_folds(train_fs, real_fs, tcfg.cv_folds))
    heads = fit_fold_heads(fold_list, model.head.layout, run.entry_emb, tcfg, model.head.hang_affinity)
    for (te, fold_fs), (_, head) in zip(fold_list, heads, strict=True):
        oof[te] = head.predict_proba(real_fs.X[te])
        for name, feats in ABLATIONS if config.ablation else ():
            part = fit_head(fold_fs, model.head.layout, run.entry_emb, tcfg, model.head.hang_affinity, feats)
            abl_oof[name][te] = part.predict_proba(real_fs.X[te])
        if "tfidf" in config.baselines:
            tf_oof[te] = fit_tfidf(fold_fs, labels, tcfg.real_weight).predict_proba([s.texts[i] for i in te])
        tick()
    _rediagnose(model, s, oof, pool, run.index)
    if "tfidf" in config.baselines:
        s.baselines["tfidf"] = tf_oof
    ablation: dict[str, dict[str, float]] = {}
    if config.ablation:
        rules = RuleBaseline(model.matcher).predict_proba([a.bundle for a in s.analyses])
        ablation["rules only (fingerprints)"] = _top_metrics(rules, s.y, labels)
        for name, P in abl_oof.items():
            ablation[name] = _top_metrics(P, s.y, labels)
        ablation["+ stage-1 classifier (the model)"] = _top_metrics(oof, s.y, labels)
    notes.append(f"real: {folds}-fold GroupKFold by source thread, head refitted per fold")
    return ablation


def _score_baselines(
    run: _Run, pools: dict[str, Pool], scored: dict[str, _Scored], train_fs: FeatureSet | None, trained_real: bool
) -> str | None:
    """Every chosen baseline on every pool (TF-IDF fitted on the synthetic training split, plus
    the real incidents when the model trained on them); returns the GPUAlert version, if installed."""
    model, baselines, labels = run.model, run.config.baselines, run.labels
    rule = RuleBaseline(model.matcher)
    zeroshot = ZeroShotBaseline(run.entry_emb)
    d = model.encoder.dim
    gpu_version = gpualert_version()
    gpu = GPUAlertBaseline(labels) if "gpualert" in baselines and gpu_version else None
    tfidf = None
    if "tfidf" in baselines and train_fs is not None:
        fit_fs = train_fs
        if "real" in pools and trained_real:
            fit_fs = concat_features(train_fs, scored["real"].features(pools["real"]))
        tfidf = fit_tfidf(fit_fs, labels, run.tcfg.real_weight)
    for name, pool in pools.items():
        s = scored[name]
        if "rule" in baselines:
            s.baselines["rule"] = rule.predict_proba([a.bundle for a in s.analyses]) if len(s.y) else s.proba * 0
        if "zeroshot" in baselines:
            s.baselines["zeroshot"] = zeroshot.predict_proba(model.head.layout.embedding(s.X)[:, :d])
        if gpu is not None:
            s.baselines["gpualert"] = gpu.predict_proba([e.source for e in pool.examples])
        if tfidf is not None and "tfidf" not in s.baselines:
            s.baselines["tfidf"] = tfidf.predict_proba(s.texts)
    return gpu_version


def _measure(
    run: _Run, pools: dict[str, Pool], scored: dict[str, _Scored], sets: list[EvalSet]
) -> tuple[dict[str, dict[str, Measured]], dict[str, dict[str, Any]]]:
    """Every system measured on every data set, and what each data set is (size, classes, hash)."""
    labels = run.labels
    measured: dict[str, dict[str, Measured]] = {}
    data: dict[str, dict[str, Any]] = {}
    for es in sets:
        s, pool, mask = scored[es.pool], pools[es.pool], es.mask
        ex = es.examples(pools)
        order = s.order(labels)[mask]
        by: dict[str, Measured] = {
            "model": measure(
                s.proba[mask],
                s.y[mask],
                s.pred[mask],
                labels,
                initiator=[r for r, k in zip(s.ranks, mask, strict=True) if k],
                seconds=s.seconds[mask],
                order=order,
            )
        }
        by["model"].metrics.update(group_metrics(s.proba[mask], s.y[mask], s.pred[mask], labels, order))
        for b, P in s.baselines.items():
            bp = _baseline_pred(b, P[mask])
            by[b] = measure(P[mask], s.y[mask], bp, labels)
            by[b].metrics.update(group_metrics(P[mask], s.y[mask], bp, labels))
        measured[es.name] = by
        y = s.y[mask]
        data[es.name] = {
            "description": es.description,
            "split": pool.split,
            "n": int(mask.sum()),
            "n_known": int((y >= 0).sum()),
            "n_unknown": int((y < 0).sum()),
            "n_classes": len(set(y[y >= 0].tolist())),
            "hash": data_hash(ex),
        }
    return measured, data


def run_eval(
    config: EvalConfig,
    out: str | Path,
    *,
    progress: Progress = no_progress,
    track: bool = False,
    experiment: str = "denpex-ml-eval",
) -> EvalResult:
    """Evaluate, write ``report.md``, ``metrics.json`` and the PNG plots to ``out``, and
    optionally log it all to mlflow as one run."""
    from denpex_ml.evaluation.plots import write_plots
    from denpex_ml.evaluation.report import write_report

    result = evaluate(config, progress=progress)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    plots = write_plots(result, out)
    write_report(result, out, plots)
    if track:
        log_eval_run(result, out, experiment=experiment)
    return result


def log_eval_run(result: EvalResult, out: Path, *, experiment: str) -> str:
    """Log params, metrics and the report directory to mlflow as one run; return its id."""
    import mlflow

    from denpex_ml.tracking import start_run

    with start_run(experiment, run_name=f"eval-{Path(result.model['path']).name}") as run:
        params = {f"eval.{k}": str(v) for k, v in result.config.to_dict().items()}
        params.update({f"model.{k}": str(v) for k, v in result.model.items() if k != "config"})
        params.update({f"data.{k}.hash": v["hash"] for k, v in result.data.items()})
        mlflow.log_params(params)
        mlflow.log_metrics(
            {
                k.replace("/", ".").replace(":", "_"): float(v)
                for k, v in result.metrics.items()
                if isinstance(v, (int, float)) and math.isfinite(v)
            }
        )
        mlflow.log_artifacts(str(out), artifact_path="report")
        return str(run.info.run_id)
