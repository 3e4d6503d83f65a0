"""Deterministic synthetic multi-rank failure logs for every taxonomy id (and ``unknown``).

Real labelled logs are scarce, so the classifier learns mostly from these. Each incident
is built from a per-label *recipe* (``recipes/``: hangs, comm, moe, hardware,
resources, numerics, application, unknown): the rank that fails first prints the root
cause, often quietly, while the ranks left waiting print the loud symptoms (NCCL
watchdog timeouts, connection resets, heartbeat aborts) and the launcher prints its
teardown (torchelastic ChildFailedError tables whose "Root Cause" is often a waiting
rank). Taxonomy fingerprints are sampled in as extra lines when an entry exists; a
taxonomy id without a recipe gets a generic fallback built from its fingerprints.

Variation axes, all recorded in each incident's ``meta``: launcher/rank format
(:data:`~denpex_ml.synthetic.launchers.LAUNCHERS`), PyTorch message version (``old`` /
``new``), world size (2-1024, only a subset of ranks present), timestamps (none, ISO,
Python logging, glog), truncation, missing ranks, noise volume, red herrings, hard
negatives (the loud symptom of a sibling class, evidence elsewhere) and recipe variant.

Held-out variants
-----------------
:func:`make_splits` keeps the launcher formats ``mpirun`` and ``ray`` and the ``old``
message version out of the train and validation splits; the test split draws from all
launchers and both versions. Test scores therefore include formats the model never saw,
which is what a shipped model meets on users' logs.

Example
-------
>>> from denpex_ml.synthetic import generate
>>> incs = generate(1, seed=0, labels=["cuda-oom"], include_unknown=False)
>>> incs[0]["label"], sorted(incs[0]["meta"])[:3]
('cuda-oom', ['fingerprint_lines', 'hard_negative', 'key_lines'])
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

from denpex_ml.errors import TaxonomyError
from denpex_ml.synthetic.generator import MSG_VERSIONS, iter_incidents, resolve_labels
from denpex_ml.synthetic.launchers import LAUNCHERS, TIMESTAMP_FORMATS
from denpex_ml.synthetic.recipes import RECIPES
from denpex_ml.synthetic.writers import write_archive, write_job_dirs, write_jsonl
from denpex_ml.taxonomy import Taxonomy, load_taxonomy

__all__ = [
    "HELD_OUT_LAUNCHERS",
    "HELD_OUT_MSG_VERSIONS",
    "LAUNCHERS",
    "MSG_VERSIONS",
    "RECIPES",
    "TIMESTAMP_FORMATS",
    "generate",
    "iter_generate",
    "make_splits",
    "write_archive",
    "write_job_dirs",
    "write_jsonl",
]

logger = logging.getLogger(__name__)

HELD_OUT_LAUNCHERS = ("mpirun", "ray")
HELD_OUT_MSG_VERSIONS = ("old",)
DEFAULT_NOISE = (10, 60)


def _taxonomy(taxonomy: Taxonomy | None, use_fingerprints: bool) -> Taxonomy | None:
    if taxonomy is not None or not use_fingerprints:
        return taxonomy
    try:
        return load_taxonomy()
    except TaxonomyError as exc:
        logger.warning(
            "bundled taxonomy not loadable (%s); generating from recipes only, without fingerprint lines", exc
        )
        return None


def iter_generate(
    per_class: int,
    seed: int,
    *,
    labels: Sequence[str] | None = None,
    launchers: Sequence[str] | None = None,
    msg_versions: Sequence[str] | None = None,
    noise: tuple[int, int] = DEFAULT_NOISE,
    include_unknown: bool = True,
    taxonomy: Taxonomy | None = None,
    use_fingerprints: bool = True,
    _stream: str = "",
) -> Iterator[dict[str, Any]]:
    """Stream ``per_class`` incidents per label (see :func:`generate`)."""
    tax = _taxonomy(taxonomy, use_fingerprints)
    chosen = resolve_labels(labels, tax, include_unknown)
    return iter_incidents(
        per_class,
        seed,
        labels=chosen,
        launchers=tuple(launchers) if launchers is not None else LAUNCHERS,
        msg_versions=tuple(msg_versions) if msg_versions is not None else MSG_VERSIONS,
        noise=noise,
        taxonomy=tax,
        stream=_stream,
    )


def generate(
    per_class: int,
    seed: int,
    *,
    labels: Sequence[str] | None = None,
    launchers: Sequence[str] | None = None,
    msg_versions: Sequence[str] | None = None,
    noise: tuple[int, int] = DEFAULT_NOISE,
    include_unknown: bool = True,
    taxonomy: Taxonomy | None = None,
    use_fingerprints: bool = True,
) -> list[dict[str, Any]]:
    """Generate ``per_class`` labelled incidents for each label.

    Parameters
    ----------
    per_class:
        Incidents per label.
    seed:
        Same seed, same output (byte for byte); each incident is seeded from
        (seed, label, index) so it does not depend on the other labels requested.
    labels:
        Labels to generate; default every recipe label plus every taxonomy id.
    launchers, msg_versions:
        Allowed launcher formats / message versions (default: all).
    noise:
        (lo, hi) background lines per incident, drawn log-uniformly; up to 1,000,000.
    include_unknown:
        Also generate out-of-taxonomy failures labelled ``unknown``.
    taxonomy:
        Taxonomy whose fingerprints are sampled into logs and whose ids without a recipe
        get the fallback recipe; default: the bundled taxonomy if it loads.
    use_fingerprints:
        False to ignore the taxonomy entirely (recipes only).
    """
    return list(
        iter_generate(
            per_class,
            seed,
            labels=labels,
            launchers=launchers,
            msg_versions=msg_versions,
            noise=noise,
            include_unknown=include_unknown,
            taxonomy=taxonomy,
            use_fingerprints=use_fingerprints,
        )
    )


def make_splits(
    per_class_train: int,
    per_class_val: int,
    per_class_test: int,
    seed: int,
    *,
    labels: Sequence[str] | None = None,
    noise: tuple[int, int] = DEFAULT_NOISE,
    include_unknown: bool = True,
    taxonomy: Taxonomy | None = None,
    use_fingerprints: bool = True,
) -> dict[str, list[dict[str, Any]]]:
    """Train/val/test splits; test alone holds the ``mpirun``/``ray`` formats and ``old`` messages.

    The three splits are drawn from separate random streams, so no incident repeats
    across them.
    """
    seen_launchers = tuple(x for x in LAUNCHERS if x not in HELD_OUT_LAUNCHERS)
    seen_versions = tuple(x for x in MSG_VERSIONS if x not in HELD_OUT_MSG_VERSIONS)
    common: dict[str, Any] = {
        "labels": labels,
        "noise": noise,
        "include_unknown": include_unknown,
        "taxonomy": taxonomy,
        "use_fingerprints": use_fingerprints,
    }
    return {
        "train": list(
            iter_generate(
                per_class_train, seed, launchers=seen_launchers, msg_versions=seen_versions, _stream="train", **common
            )
        ),
        "val": list(
            iter_generate(
                per_class_val, seed, launchers=seen_launchers, msg_versions=seen_versions, _stream="val", **common
            )
        ),
        "test": list(
            iter_generate(
                per_class_test, seed, launchers=LAUNCHERS, msg_versions=MSG_VERSIONS, _stream="test", **common
            )
        ),
    }
