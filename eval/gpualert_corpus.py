"""GPUAlert's public labelled corpus, scored by the model: ``python eval/gpualert_corpus.py CORPUS_DIR``.

GPUAlert (github.com/Parv-01/gpualert-eval, MIT) publishes a corpus of failed GPU-job logs in
15 classes: captures of injected faults, re-built with cosmetic mutations (hosts, pids, line
numbers, sizes) by its ``corpus/build.py``, plus a few excerpts from public threads
(``corpus/wild``). The project never trains on it, and no rule was written from it. This
script reads a local checkout (``CORPUS_DIR/corpus/labels.jsonl`` and the logs it names),
classifies every log with the shipped model (or ``--model``), and prints accuracy per class and
overall; rows whose log file is absent are counted and skipped.

GPUAlert's classes are coarser than the taxonomy. A class maps onto the ids that are a right
reading of it (:data:`ACCEPTED`): "nccl" onto the three NCCL transport ids and
``host-work-timeout`` (the corpus makes its "nccl" logs by having one rank sleep past an 800 ms
process-group timeout: a rank busy on the host, which arrives late), "cuda_runtime" onto the
CUDA runtime and device ids. One wording decides more than its class: a log whose error is
``CUDA capability sm_NN is not compatible`` (filed as ``runtime_error``) expects
``cuda-driver-mismatch`` only. ``--out F.json`` keeps the rows (ids, classes, answers; never
the logs); ``--plot F.png`` draws accuracy per class.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

_TRANSPORT = frozenset({"nccl-network-error", "nccl-init-failure", "nccl-shm-p2p-failure"})
_CUDA_RUNTIME = frozenset(
    {
        "cuda-device-side-assert",
        "cuda-illegal-memory-access",
        "cuda-driver-mismatch",
        "gpu-fallen-off-bus",
        "gpu-xid-ecc-error",
    }
)
_NUMERICS = frozenset(
    {
        "loss-nan-divergence",
        "fp16-rmsnorm-overflow",
        "fp16-attention-softmax-overflow",
        "contrastive-temperature-collapse",
    }
)

#: GPUAlert class -> the taxonomy ids that read it right.
ACCEPTED: dict[str, frozenset[str]] = {
    "cuda_oom": frozenset({"cuda-oom"}),
    "nccl": _TRANSPORT | {"host-work-timeout"},
    "cuda_runtime": _CUDA_RUNTIME,
    "ram_oom": frozenset({"host-oom"}),
    "oom_killer": frozenset({"host-oom"}),
    "segfault": frozenset({"segfault-native-crash"}),
    "file_not_found": frozenset({"file-not-found"}),
    "permission": frozenset({"permission-denied"}),
    "missing_module": frozenset({"missing-module"}),
    "device_mismatch": frozenset({"tensor-device-mismatch"}),
    "nan_loss": _NUMERICS,
    "div_zero": frozenset({"uncaught-exception-crash"}),
    "traceback": frozenset({"uncaught-exception-crash"}),
    "assertion": frozenset({"uncaught-exception-crash"}),
    "runtime_error": frozenset({"uncaught-exception-crash"}),
}

#: Wordings that decide the expected id whatever the class (the class is a catch-all).
_OVERRIDES: tuple[tuple[re.Pattern[str], frozenset[str]], ...] = (
    (re.compile(r"CUDA capability sm_\d+ is not compatible"), frozenset({"cuda-driver-mismatch"})),
)


def accepted_ids(mode: str, text: str) -> frozenset[str]:
    """The taxonomy ids that are a right answer for a log of GPUAlert class ``mode``."""
    for rx, ids in _OVERRIDES:
        if rx.search(text):
            return ids
    if mode not in ACCEPTED:
        raise KeyError(f"GPUAlert class {mode!r} has no mapping; known: {', '.join(sorted(ACCEPTED))}")
    return ACCEPTED[mode]


def score(corpus_dir: Path, model: Any) -> tuple[list[dict[str, Any]], int]:
    """Classify every log the manifest names; returns (rows, number of manifest rows without a log file)."""
    from rich.progress import track

    manifest = corpus_dir / "corpus" / "labels.jsonl"
    entries = [json.loads(x) for x in manifest.read_text(encoding="utf-8").splitlines() if x.strip()]
    rows: list[dict[str, Any]] = []
    missing = 0
    for e in track(entries, description="classifying", transient=True):
        path = corpus_dir / e["log_path"]
        if not path.is_file():
            missing += 1
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        ok_ids = accepted_ids(e["mode"], text)
        d = model.classify(text=text)
        top3 = [a.label for a in d.alternatives[:3]] if d.alternatives else [d.label]
        rows.append(
            {
                "id": e["id"],
                "mode": e["mode"],
                "source": e.get("source", ""),
                "accepted": sorted(ok_ids),
                "predicted": d.label,
                "confidence": d.confidence,
                "top3": top3,
                "correct": d.label in ok_ids,
                "correct_top3": bool(ok_ids & set(top3)) or d.label in ok_ids,
            }
        )
    return rows, missing


def table(rows: list[dict[str, Any]]) -> str:
    """Accuracy per class and overall, and the wrong answers by class and answer."""
    by_mode: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_mode[r["mode"]].append(r)
    out = ["| class | logs | top-1 | top-3 | wrong answers |", "|---|---|---|---|---|"]
    for mode in sorted(by_mode):
        rs = by_mode[mode]
        wrong = Counter(r["predicted"] for r in rs if not r["correct"])
        out.append(
            f"| {mode} | {len(rs)} | {sum(r['correct'] for r in rs)} | {sum(r['correct_top3'] for r in rs)} | "
            + (", ".join(f"{k} ×{v}" for k, v in wrong.most_common()) or "-")
            + " |"
        )
    n = len(rows)
    t1 = sum(r["correct"] for r in rows)
    t3 = sum(r["correct_top3"] for r in rows)
    out.append(f"| **all** | {n} | {t1} ({t1 / max(n, 1):.3f}) | {t3} ({t3 / max(n, 1):.3f}) | |")
    for src in sorted({r["source"] for r in rows}):
        rs = [r for r in rows if r["source"] == src]
        out.append(
            f"| {src or '?'} | {len(rs)} | {sum(r['correct'] for r in rs)} | {sum(r['correct_top3'] for r in rs)} | |"
        )
    return "\n".join(out)


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    """A bar per class: top-1 accuracy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = sorted({r["mode"] for r in rows})
    acc = [sum(r["correct"] for r in rows if r["mode"] == m) / sum(r["mode"] == m for r in rows) for m in modes]
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.bar(modes, acc, color="#4477aa")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("top-1 accuracy")
    ax.set_title(f"GPUAlert corpus, {len(rows)} logs: {sum(r['correct'] for r in rows) / len(rows):.3f} top-1")
    ax.tick_params(axis="x", rotation=60)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("corpus_dir", type=Path, help="a checkout of GPUAlert's evaluation repository")
    ap.add_argument("--model", type=Path, default=None, help="model directory [the shipped model]")
    ap.add_argument("--out", type=Path, default=None, help="write the rows (no log text) as JSON")
    ap.add_argument("--plot", type=Path, default=None, help="write a PNG of accuracy per class")
    args = ap.parse_args(argv)
    if not (args.corpus_dir / "corpus" / "labels.jsonl").is_file():
        ap.error(f"{args.corpus_dir}/corpus/labels.jsonl not found (run the corpus's corpus/build.py first)")
    from denpex_ml import load_model

    model = load_model(args.model) if args.model else load_model()
    rows, missing = score(args.corpus_dir, model)
    print(table(rows))
    if missing:
        print(f"\n{missing} manifest rows name a log file that is absent; skipped")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"missing": missing, "rows": rows}, indent=1) + "\n", encoding="utf-8")
    if args.plot:
        plot(rows, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
