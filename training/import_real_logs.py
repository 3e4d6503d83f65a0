"""Import the curated real-log collection into the labelled-incident format.

Reads the shared collection (one JSON object per line with ``id``, ``source``, ``title``,
``label``, ``label_confidence``, ``evidence``, ``framework``, ``rank_format``,
``n_ranks_visible``, ``first_failing_rank``, ``complete``, ``log``) and writes
``data/real/real-logs.jsonl``: ``id``, ``label``, ``log``, ``initiating_rank`` (from
``first_failing_rank``), ``source`` (the thread URL) and ``meta`` holding the rest.

The output is sorted by id and written with fixed key order, so re-running on the same
input gives the same bytes. Every record is validated as an :class:`Incident`.

Usage::

    PYTHONPATH=src python3 training/import_real_logs.py \
        --src ../shared/real-logs/real-logs.jsonl --out data/real/real-logs.jsonl \
        --label-ids ../shared/taxonomy-ids.md
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from denpex_ml.dataset import Incident, write_jsonl
from denpex_ml.errors import DatasetError, DenpexError

logger = logging.getLogger("import_real_logs")

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SRC = REPO_ROOT.parent / "shared" / "real-logs" / "real-logs.jsonl"
DEFAULT_OUT = REPO_ROOT / "data" / "real" / "real-logs.jsonl"

#: Source fields copied into ``meta``, in this order.
META_FIELDS = (
    "title",
    "label_confidence",
    "evidence",
    "framework",
    "rank_format",
    "n_ranks_visible",
    "complete",
)
_SOURCE_FIELDS = frozenset({"id", "source", "label", "first_failing_rank", "log", *META_FIELDS})
_CONFIDENCES = frozenset({"confirmed", "likely", "unconfirmed"})
_CONTRACT_LINE = re.compile(r"^- ([a-z0-9]+(?:-[a-z0-9]+)*):")

EXIT_OK = 0
EXIT_INVALID = 1


def read_label_contract(path: Path) -> frozenset[str]:
    """Ids of a label-contract markdown file: every line ``- some-id: description``."""
    ids = {m.group(1) for line in path.read_text(encoding="utf-8").splitlines() if (m := _CONTRACT_LINE.match(line))}
    if not ids:
        raise DatasetError(f"{path}: no '- <id>: ...' lines found")
    return frozenset(ids)


def convert_record(raw: dict[str, Any], where: str) -> dict[str, Any]:
    """One source record as an incident record (not yet validated as an Incident)."""
    missing = sorted(_SOURCE_FIELDS - set(raw))
    if missing:
        raise DatasetError(f"{where}: field {missing[0]}: missing from the source record")
    extra = sorted(set(raw) - _SOURCE_FIELDS)
    if extra:
        raise DatasetError(f"{where}: field {extra[0]}: not a known source field")
    if raw["label_confidence"] not in _CONFIDENCES:
        raise DatasetError(
            f"{where}: field label_confidence: expected one of {sorted(_CONFIDENCES)}, found {raw['label_confidence']!r}"
        )
    return {
        "id": raw["id"],
        "label": raw["label"],
        "log": raw["log"],
        "initiating_rank": raw["first_failing_rank"],
        "source": raw["source"],
        "meta": {name: raw[name] for name in META_FIELDS},
    }


def import_real_logs(src: Path, out: Path, labels: frozenset[str] | None) -> list[Incident]:
    """Convert ``src`` into ``out``; returns the incidents written (sorted by id).

    ``labels=None`` checks labels against the bundled taxonomy.
    """
    if labels is None:
        from denpex_ml.taxonomy import load_taxonomy

        labels = frozenset(load_taxonomy().ids)
    incidents: list[Incident] = []
    with src.open(encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{src}:{lineno}"
            try:
                raw = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{where}: bad JSON: {exc.msg}") from exc
            if not isinstance(raw, dict):
                raise DatasetError(f"{where}: expected a JSON object")
            incidents.append(Incident.from_dict(convert_record(raw, where), labels=labels, where=where))
    incidents.sort(key=lambda inc: inc.id)
    write_jsonl(incidents, out)
    return incidents


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", type=Path, default=DEFAULT_SRC, help="shared real-logs.jsonl (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output JSONL (default: %(default)s)")
    parser.add_argument(
        "--label-ids",
        type=Path,
        default=None,
        help="label-contract markdown ('- id: ...' lines) to check labels against; default: the bundled taxonomy",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the import; exit 0 on success, 1 when the input is invalid."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s")
    try:
        labels = read_label_contract(args.label_ids) if args.label_ids else None
        incidents = import_real_logs(args.src, args.out, labels)
    except (DenpexError, OSError) as exc:
        sys.stderr.write(f"import_real_logs: {exc}\n")
        return EXIT_INVALID
    logger.info("wrote %d incidents to %s", len(incidents), args.out)
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
