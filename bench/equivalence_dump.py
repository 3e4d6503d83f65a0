"""Dump every diagnosis of a fixed set of jobs, to check that a speed change changed no output.

    python -m bench.equivalence_dump dump OUT.json [--extra PATH ...]
    python -m bench.equivalence_dump compare BEFORE.json AFTER.json

``dump`` classifies, with the shipped model (``models/default``), every job of
``data/examples/jobs``, every record of ``data/real/*.jsonl`` (its ``log`` text as one job) and
any ``--extra`` paths (e.g. the benchmark's cached jobs), and writes each
:meth:`~denpex_ml.model.diagnosis.Diagnosis.to_dict` without its timing (``stats["seconds"]``),
plus the unrounded confidence and alternative probabilities, keyed by job.

``compare`` reports every difference between two dumps: values must be equal, floating values
within 1e-9. Exit status 0 when they are the same, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

__all__ = ["compare", "dump", "main"]

REPO = Path(__file__).resolve().parent.parent
TOLERANCE = 1e-9


def _record(d: Any) -> dict[str, Any]:
    out: dict[str, Any] = d.to_dict()
    out["stats"].pop("seconds", None)
    out["confidence_raw"] = float(d.confidence)
    out["alternatives_raw"] = [[a.label, float(a.probability)] for a in d.alternatives]
    return out


def dump(out: Path, extra: list[str]) -> int:
    """Classify the fixed job set (and ``extra``) and write the diagnoses to ``out``."""
    from denpex_ml.errors import DenpexError
    from denpex_ml.model.core import load_model

    model = load_model()
    results: dict[str, Any] = {}

    def run(key: str, **kw: Any) -> None:
        try:
            results[key] = _record(model.classify(**kw))
        except DenpexError as exc:
            results[key] = {"error": type(exc).__name__, "message": str(exc)}

    for job in sorted((REPO / "data/examples/jobs").iterdir()):
        run(f"examples/{job.name}", source=job)
    for path in sorted((REPO / "data/real").glob("*.jsonl")):
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
            if line.strip():
                rec = json.loads(line)
                run(f"real/{path.name}:{i}:{rec.get('id', '')}", text=rec["log"])
    for p in extra:
        run(f"extra/{p}", source=Path(p))
    out.write_text(json.dumps(results, indent=1, sort_keys=True), encoding="utf-8")
    print(f"{len(results)} jobs -> {out}")
    return 0


def _diff(a: Any, b: Any, where: str, found: list[str]) -> None:
    if isinstance(a, float) and isinstance(b, float):
        if not (a == b or math.isclose(a, b, rel_tol=0.0, abs_tol=TOLERANCE)):
            found.append(f"{where}: {a!r} != {b!r}")
    elif isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                found.append(f"{where}.{k}: only in {'after' if k in b else 'before'}")
            else:
                _diff(a[k], b[k], f"{where}.{k}", found)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            found.append(f"{where}: length {len(a)} != {len(b)}")
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            _diff(x, y, f"{where}[{i}]", found)
    elif a != b or type(a) is not type(b):
        found.append(f"{where}: {a!r} != {b!r}")


def compare(before: Path, after: Path) -> int:
    """Print every difference between two dumps; 0 when there is none."""
    found: list[str] = []
    _diff(json.loads(before.read_text()), json.loads(after.read_text()), "", found)
    for line in found[:50]:
        print(line)
    print(f"{len(found)} differences" if found else "identical")
    return 1 if found else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump", help="classify the job set and write the diagnoses")
    d.add_argument("out", type=Path)
    d.add_argument("--extra", nargs="*", default=[], help="more jobs (files, folders, archives)")
    c = sub.add_parser("compare", help="compare two dumps")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    args = p.parse_args(argv)
    if args.cmd == "dump":
        return dump(args.out, list(args.extra))
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
