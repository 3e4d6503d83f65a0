"""Tables, the markdown report and the scaling plot of ``python -m bench``.

Everything here is a pure function of the result dictionaries (no timing, no subprocesses),
so ``tests/test_bench.py`` can build a whole report from tiny made-up inputs.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from bench import batch, classify, ingest, peers, retrain
from bench.common import MB

__all__ = [
    "SECTIONS",
    "classify_section_md",
    "machine_table",
    "markdown_report",
    "plot_scaling",
    "scaling_tables",
]

#: section keys in report order (``--only`` takes these)
SECTIONS = ("ingest", "classify", "batch", "baselines", "retrain")
TITLES = {
    "ingest": "a) Ingestion throughput",
    "classify": "b) classify latency per job",
    "batch": "c) Batch throughput (`denpex-ml score`)",
    "baselines": "d) Baselines on the same jobs",
    "retrain": "e) Retraining with a new class (`denpex-ml retrain`)",
}
HOW_TO_READ = {
    "ingest": (
        "`read_logs` on one interleaved 64-rank log per size, each run in a fresh process, "
        "against `LC_ALL=C grep -c .` on the same page-cached bytes. Higher MB/s is better; "
        "ratio = how many times slower than a byte scan in C; peak RSS includes the interpreter."
    ),
    "classify": (
        "One job per fresh process: `load s` = imports + `load_model()`, `classify s` = "
        "`model.classify(path)` with ingestion; embedding calls = texts the job sent to the encoder "
        "(templates, not lines). Label and first failing rank are checked against what the generator planted."
    ),
    "batch": (
        "`denpex-ml score JOBS_DIR -o OUT.jsonl --workers N` as a subprocess: wall time around the "
        "process, jobs/s = jobs / wall. RSS of the process tree polled every 0.2 s: max worker = "
        "largest single process except the main one (the main one when there are no children); "
        "tree = largest sum over all live processes at one poll."
    ),
    "baselines": (
        "Each method in a fresh process; `setup s` once per process, then `s/job` = mean seconds "
        "per job (median over runs per job). `× denpex_ml` = s/job ÷ denpex_ml's s/job on the same "
        "jobs (>1: slower). Result = predicted label (true: cuda-oom) or top-1 accuracy on synthetic jobs."
    ),
    "retrain": (
        "`denpex-ml retrain` of the shipped model with the new-class fixture (one new taxonomy entry, "
        "five incidents) as a subprocess, `--no-track`: cold = an empty feature cache, warm = the cache "
        "the cold run left. Wall time includes start-up; peak RSS of the process; target = issue #19."
    ),
}


def _fmt(x: Any, spec: str) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return format(x, spec)


def machine_table(info: dict[str, Any]) -> str:
    v = info.get("versions", {})
    git = info.get("git", {}) or {}
    rows = [
        ("cores", f"{info.get('cpu_count')} (usable: {info.get('cpu_affinity')})"),
        ("CPU", info.get("cpu_model")),
        ("RAM", f"{info.get('mem_total_gb')} GB"),
        ("platform", info.get("platform")),
        ("Python", f"{info.get('python')} ({info.get('python_impl')})"),
    ]
    rows += [(name, ver or "not installed") for name, ver in v.items()]
    dirty = git.get("src_dirty")
    rows.append(("git commit", f"{git.get('commit')}{' (src/ has uncommitted changes)' if dirty else ''}"))
    return "\n".join(["| | |", "|---|---|", *(f"| {k} | {val} |" for k, val in rows)])


def scaling_tables(size_rows: list[dict[str, Any]], rank_rows: list[dict[str, Any]]) -> str:
    """Two tables: classify time vs log size (fixed ranks) and vs rank count (fixed size)."""
    out = []
    if size_rows:
        ranks = size_rows[0]["ranks"]
        out += [
            f"Time vs size at {ranks} ranks:",
            "",
            "| size | MB | classify s | MB/s | peak RSS MB | embedding calls |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for r in size_rows:
            out.append(
                f"| {r['size']} | {r['bytes'] / MB:.1f} | {r['classify_s']:.3f} | {_fmt(r.get('mb_s'), '.1f')} | "
                f"{r['peak_rss_mb']:.0f} | {r['embedding_calls']} |"
            )
        out.append("")
    if rank_rows:
        size = rank_rows[0]["size"]
        out += [
            f"Time vs ranks at {size}:",
            "",
            "| ranks | classify s | MB/s | peak RSS MB | embedding calls | first rank (true) |",
            "|---:|---:|---:|---:|---:|---|",
        ]
        for r in rank_rows:
            out.append(
                f"| {r['ranks']} | {r['classify_s']:.3f} | {_fmt(r.get('mb_s'), '.1f')} | {r['peak_rss_mb']:.0f} | "
                f"{r['embedding_calls']} | {r['initiating_rank']} ({r['true_initiating_rank']}) |"
            )
    return "\n".join(out).rstrip()


def classify_section_md(sec: dict[str, Any], plot_name: str | None = "scaling.png") -> str:
    jobs = sec.get("jobs", [])
    parts = [classify.markdown_table([j["result"] for j in jobs], names=[j["name"] for j in jobs])]
    scaling = scaling_tables(sec.get("scale_size", []), sec.get("scale_ranks", []))
    if scaling:
        parts += ["", "Scaling (same fresh-process runs; points shared with the jobs above are measured once):", ""]
        parts.append(scaling)
        if plot_name and sec.get("plot"):
            parts += ["", f"![classify time vs log size and vs ranks]({plot_name})"]
    return "\n".join(parts)


def _section_md(key: str, sec: dict[str, Any] | None) -> str:
    if sec is None:
        return "not run (`--only`)"
    if "error" in sec:
        return f"**failed**: {sec['error']}"
    if key == "ingest":
        return ingest.markdown_table(sec["results"])
    if key == "classify":
        return classify_section_md(sec)
    if key == "batch":
        head = ""
        if sec.get("available"):
            head = f"{sec['n_jobs']} jobs of ~{sec['job_size']} ({sec['total_mb']:.0f} MB in all) in `{sec['jobs_dir']}`\n\n"
        return head + batch.markdown_table(sec["rows"])
    if key == "baselines":
        return peers.markdown_table(sec["rows"])
    if key == "retrain":
        return f"`{sec.get('command', 'denpex-ml retrain')}`\n\n" + retrain.markdown_table(sec["rows"])
    raise KeyError(key)


def markdown_report(report: dict[str, Any]) -> str:
    """The whole ``bench.md`` from the ``bench.json`` dictionary."""
    info = report["machine"]
    git = info.get("git", {}) or {}
    p = report["params"]
    lines = [
        "# denpex_ml benchmark",
        "",
        f"{report['created']} · commit {git.get('commit')} · {info.get('cpu_model')} · {info.get('cpu_count')} cores · "
        f"{'quick · ' if p.get('quick') else ''}{p['repeat']} run(s) per measurement, medians · "
        f"total {report.get('duration_s', 0):.0f} s",
        "",
        "## Machine",
        "",
        machine_table(info),
    ]
    for key in SECTIONS:
        sec = report["sections"].get(key)
        lines += ["", f"## {TITLES[key]}", ""]
        if sec is not None and "error" not in sec:
            lines += [HOW_TO_READ[key], ""]
        lines.append(_section_md(key, sec))
    return "\n".join(lines) + "\n"


def plot_scaling(size_rows: list[dict[str, Any]], rank_rows: list[dict[str, Any]], path: Path) -> Path | None:
    """``classify s`` vs log size (MB) and vs ranks, side by side (matplotlib Agg)."""
    if not size_rows and not rank_rows:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullFormatter

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    if size_rows:
        xs = [r["bytes"] / MB for r in size_rows]
        ax1.plot(xs, [r["classify_s"] for r in size_rows], "o-", color="tab:blue")
        ax1.set_xscale("log")
        ax1.set_yscale("log")
        ax1.set_title(f"classify time vs log size ({size_rows[0]['ranks']} ranks)")
        for r, x in zip(size_rows, xs, strict=True):
            ax1.annotate(r["size"], (x, r["classify_s"]), textcoords="offset points", xytext=(4, -10), fontsize=8)
    ax1.set_xlabel("log size (MB)")
    ax1.set_ylabel("classify s (ingestion included)")
    if rank_rows:
        ranks = [r["ranks"] for r in rank_rows]
        ax2.plot(ranks, [r["classify_s"] for r in rank_rows], "o-", color="tab:orange")
        ax2.set_xscale("log", base=2)
        ax2.set_xticks(ranks, [str(r) for r in ranks])
        ax2.set_title(f"classify time vs ranks ({rank_rows[0]['size']})")
    ax2.set_xlabel("ranks")
    ax2.set_ylabel("classify s")
    plain = FuncFormatter(lambda v, _pos: f"{v:g}")
    for ax in (ax1, ax2):
        ax.grid(True, which="both", alpha=0.3)
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(plain if ax.get_yscale() == "log" else NullFormatter())
        if ax.get_yscale() == "linear":
            ax.set_ylim(bottom=0)
    ax1.xaxis.set_major_formatter(plain)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
