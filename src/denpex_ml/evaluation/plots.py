"""PNG plots of an evaluation (matplotlib, Agg backend): confusion matrix, reliability
diagram and accuracy-coverage curves, one file each per data set."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from denpex_ml.evaluation.result import EvalResult

__all__ = ["write_plots"]


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def safe_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)


def _confusion(plt, labels: list[str], cm: list[list[int]], title: str, path: Path) -> None:  # type: ignore[no-untyped-def]
    M = np.asarray(cm, dtype=float)
    rows = M.sum(axis=1, keepdims=True)
    N = np.divide(M, rows, out=np.zeros_like(M), where=rows > 0)
    names = ["unknown", *labels]
    fig, ax = plt.subplots(figsize=(14, 12))
    im = ax.imshow(N, cmap="Blues", vmin=0, vmax=1)
    ax.set_xticks(range(len(names)), names, rotation=90, fontsize=6)
    ax.set_yticks(range(len(names)), names, fontsize=6)
    for i, j in zip(*np.nonzero(M), strict=True):
        ax.text(j, i, int(M[i, j]), ha="center", va="center", fontsize=5, color="white" if N[i, j] > 0.5 else "black")
    ax.set_xlabel("predicted (unknown = abstained)")
    ax.set_ylabel("true")
    ax.set_title(title)
    fig.colorbar(im, ax=ax, fraction=0.03, label="share of the true class")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _system_line(ax, system: str, x: list[float], y: list[float], marker: str) -> None:  # type: ignore[no-untyped-def]
    """One system's curve; the model's is drawn thicker than the baselines'."""
    ax.plot(x, y, marker=marker, label=system, lw=2 if system == "model" else 1)


def _reliability(plt, bins_by_system: dict[str, list[dict[str, float]]], title: str, path: Path) -> None:  # type: ignore[no-untyped-def]
    fig, ax = plt.subplots(figsize=(6, 6))
    ax.plot([0, 1], [0, 1], ls="--", color="grey", lw=1, label="perfect calibration")
    for system, bins in bins_by_system.items():
        if bins:
            _system_line(ax, system, [b["confidence"] for b in bins], [b["accuracy"] for b in bins], "o")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("confidence (top probability)")
    ax.set_ylabel("accuracy")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _coverage(  # type: ignore[no-untyped-def]
    plt,
    curves: dict[str, list[dict[str, float]]],
    threshold: float,
    title: str,
    path: Path,
    detector_point: tuple[float, float] | None = None,
) -> None:
    """Accuracy of the answered jobs against the share answered, as a top-probability threshold
    moves; the model's own operating point in red: on the curve at its abstention threshold, or,
    for a model with an out-of-taxonomy detector, where the detector's answers put it
    (``detector_point``: coverage, accuracy of answered)."""
    fig, ax = plt.subplots(figsize=(6, 5))
    for system, pts in curves.items():
        pts = [p for p in pts if p["accuracy"] == p["accuracy"]]
        if pts:
            _system_line(ax, system, [p["coverage"] for p in pts], [p["accuracy"] for p in pts], ".")
    model = [p for p in curves.get("model", []) if p["threshold"] <= threshold]
    if detector_point is not None:
        ax.scatter(
            [detector_point[0]], [detector_point[1]], color="red", zorder=5, label="model (out-of-taxonomy detector)"
        )
    elif model:
        ax.scatter(
            [model[-1]["coverage"]],
            [model[-1]["accuracy"]],
            color="red",
            zorder=5,
            label=f"model threshold {threshold:.2f}",
        )
    ax.set_xlabel("coverage (share answered)")
    ax.set_ylabel("accuracy of answered")
    ax.set_xlim(0, 1.02)
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _prequential(plt, prequential: list[dict[str, Any]], path: Path) -> None:  # type: ignore[no-untyped-def]
    """Grouped bars: top-1 per report group, one bar per (batch, model) scored before use."""
    groups = [g for g in ("hang", "transport", "crash", "unknown", "no-failure")]
    runs = [p for p in prequential if p.get("summary")]
    ncol = 1 + len(runs) // 30  # the legend beside the bars, as long as the batches are many
    height = max(4.0, 0.12 * len(runs) / ncol + 1.0)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(groups)) + 3.0 * ncol, height))
    width = 0.8 / max(len(runs), 1)
    for i, p in enumerate(runs):
        summ = p["summary"]
        vals = [float((summ.get(g) or {}).get("top1") or 0.0) for g in groups]
        xs = [j + (i - (len(runs) - 1) / 2) * width for j in range(len(groups))]
        ax.bar(xs, vals, width=width, label=f"{p.get('batch')} / {str(p.get('model_id'))[:24]}")
    ax.set_xticks(range(len(groups)), groups)
    ax.set_ylim(0, 1)
    ax.set_ylabel("top-1 on logs scored before use")
    ax.set_title("test-then-train: real batches scored by the model of the moment")
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0), ncol=ncol, frameon=False)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def _detector_point(info: dict[str, Any], metrics: dict[str, float]) -> tuple[float, float] | None:
    """(coverage, accuracy of answered) of a model with an out-of-taxonomy detector, else None."""
    if info.get("outside_threshold") is None or "coverage" not in metrics or "answered_accuracy" not in metrics:
        return None
    return float(metrics["coverage"]), float(metrics["answered_accuracy"])


def write_plots(result: EvalResult, out: Path) -> dict[str, dict[str, str]]:
    """Write the plots; returns {data set: {kind: file name}}."""
    plt = _plt()
    files: dict[str, dict[str, str]] = {}
    for ds, by in result.measured.items():
        model = by["model"]
        got: dict[str, str] = {}
        stem = safe_name(ds)
        if model.confusion and result.data[ds]["n_known"]:
            got["confusion"] = f"confusion_{stem}.png"
            _confusion(plt, result.labels, model.confusion, f"{ds}: confusion matrix (model)", out / got["confusion"])
        if model.reliability:
            got["reliability"] = f"reliability_{stem}.png"
            _reliability(
                plt,
                {s: m.reliability for s, m in by.items() if s in ("model", "tfidf", "zeroshot")},
                f"{ds}: reliability",
                out / got["reliability"],
            )
        if model.coverage:
            got["coverage"] = f"coverage_{stem}.png"
            _coverage(
                plt,
                {s: m.coverage for s, m in by.items() if s in ("model", "tfidf", "zeroshot")},
                float(result.model["abstain_threshold"]),
                f"{ds}: accuracy vs coverage",
                out / got["coverage"],
                _detector_point(result.model, model.metrics),
            )
        files[ds] = got
    if result.prequential:
        files["prequential"] = {"top1": "prequential_top1.png"}
        _prequential(plt, result.prequential, out / "prequential_top1.png")
    return files
