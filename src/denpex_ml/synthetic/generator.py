"""Building labelled incidents: choose the variation axes, run a recipe, add noise, render.

Each incident has its own ``random.Random`` seeded from the text
``"{stream}|{seed}|{label}|{index}"``, so an incident depends only on those values, never
on dict ordering, on the other labels requested or on how many incidents came before.
The launcher and message version rotate deterministically with the index so a modest
call already covers every allowed value.
"""

from __future__ import annotations

import logging
import math
import random
import zlib
from collections.abc import Iterator, Sequence
from typing import Any

from denpex_ml.errors import UnknownLabelError
from denpex_ml.synthetic.background import STEP_STYLES, background, nccl_init, red_herrings
from denpex_ml.synthetic.launchers import LAUNCHERS, TIMESTAMP_FORMATS, TRUNCATIONS, render
from denpex_ml.synthetic.recipes import RECIPES, Recipe, fallback_recipe
from denpex_ml.synthetic.recipes.fallback import fingerprint_line, usable_fingerprints
from denpex_ml.synthetic.scenario import Scenario
from denpex_ml.taxonomy import UNKNOWN_ID, FingerprintRole, Taxonomy

__all__ = ["MSG_VERSIONS", "iter_incidents", "resolve_labels"]

logger = logging.getLogger(__name__)

MSG_VERSIONS = ("old", "new")
_RANK_COUNTS = (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
_RANK_WEIGHTS = (12, 15, 25, 15, 10, 8, 6, 4, 3, 2)
_TS_WEIGHTS = (45, 20, 20, 15)
_TRUNC_WEIGHTS = (50, 10, 10, 8, 5, 17)


def resolve_labels(labels: Sequence[str] | None, taxonomy: Taxonomy | None, include_unknown: bool) -> list[str]:
    """Sorted labels to generate; raises :class:`UnknownLabelError` for a label with no recipe or entry."""
    known = set(RECIPES) | (set(taxonomy.entries) if taxonomy is not None else set())
    if labels is None:
        chosen = set(known)
    else:
        chosen = set(labels)
        bad = sorted(chosen - known)
        if bad:
            raise UnknownLabelError(
                f"labels: no recipe or taxonomy entry for {', '.join(repr(b) for b in bad)}; known labels are {', '.join(sorted(known))}"
            )
    if not include_unknown:
        chosen.discard(UNKNOWN_ID)
    elif labels is None:
        chosen.add(UNKNOWN_ID)
    return sorted(chosen)


def _recipe_for(label: str, taxonomy: Taxonomy | None) -> Recipe:
    if label in RECIPES:
        return RECIPES[label]
    if taxonomy is None or label not in taxonomy:
        raise UnknownLabelError(f"label {label!r}: no recipe and no taxonomy entry")
    return fallback_recipe(taxonomy.get(label))


def _rotate(options: Sequence[str], index: int, key: str) -> str:
    return options[(index + zlib.crc32(key.encode())) % len(options)]


def _noise_count(rng: random.Random, noise: tuple[int, int]) -> int:
    lo, hi = noise
    if lo == hi:
        return lo
    return round(math.exp(rng.uniform(math.log(max(lo, 1)), math.log(max(hi, 1)))))


def _sample_fingerprints(sc: Scenario, recipe: Recipe, taxonomy: Taxonomy | None) -> int:
    """Add 1-2 lines carrying the taxonomy entry's fingerprints; returns how many."""
    if taxonomy is None or sc.label not in taxonomy or not recipe.sample_fingerprints or not sc.chance(0.35):
        return 0
    pairs = usable_fingerprints(taxonomy.get(sc.label), recipe.regex_examples)
    if not pairs:
        return 0
    added = 0
    for fp, ex in sc.rng.sample(pairs, min(len(pairs), sc.rng.randint(1, 2))):
        init = sc.initiator if sc.initiator is not None else sc.visible[0]
        if fp.role is FingerprintRole.ROOT_CAUSE:
            sc.emit(init, sc.fail_time + 0.001, fingerprint_line(sc, fp, ex, init), "root")
        elif fp.role is FingerprintRole.SYMPTOM:
            r = sc.pick(sc.others() or [init])
            sc.emit(r, sc.fail_time + 1.0 + sc.jitter(5.0), fingerprint_line(sc, fp, ex, r), "symptom")
        else:
            sc.emit(init, max(0.5, sc.fail_time * sc.rng.random()), fingerprint_line(sc, fp, ex, init), "context")
        added += 1
    return added


def _decoy(sc: Scenario) -> None:
    """A sibling-class line that is harmless here (a link flap that recovered long before)."""
    r = sc.pick(sc.visible)
    t = max(1.0, sc.fail_time * sc.rng.uniform(0.1, 0.6))
    from denpex_ml.synthetic.fragments import nccl_prefix

    p = nccl_prefix(sc, r, 20)
    sc.noise(
        r,
        t,
        f"{p} transport/net_ib.cc:199 NCCL WARN NET/IB : mlx5_2:1 Got async error event: port error",
        stream="stderr",
    )
    sc.noise(
        r,
        t + 6.0,
        f"{p} transport/net_ib.cc:199 NCCL WARN NET/IB : mlx5_2:1 Got async error event: port active",
        stream="stderr",
    )


def make_incident(
    label: str,
    index: int,
    seed: int,
    *,
    launchers: Sequence[str],
    msg_versions: Sequence[str],
    noise: tuple[int, int],
    taxonomy: Taxonomy | None,
    stream: str = "",
) -> dict[str, Any]:
    """One labelled incident (deterministic in its arguments)."""
    key = f"{stream}|{seed}|{label}|{index}"
    rng = random.Random(key)
    recipe = _recipe_for(label, taxonomy)
    launcher = _rotate(launchers, index + seed, f"{stream}{label}")
    msg_version = _rotate(msg_versions, index // max(1, len(launchers)) + index + seed, f"v{stream}{label}")
    ts_fmt = rng.choices(TIMESTAMP_FORMATS, _TS_WEIGHTS)[0]
    n_ranks = rng.choices(_RANK_COUNTS, _RANK_WEIGHTS)[0]
    hard = rng.random() < 0.3
    noise_n = _noise_count(rng, noise)
    truncation = rng.choices(TRUNCATIONS, _TRUNC_WEIGHTS)[0]
    sc = Scenario.create(
        rng, label, n_ranks=n_ranks, msg_version=msg_version, hard_negative=hard, max_visible=rng.randint(6, 16)
    )
    sc.launcher = launcher
    sc.step_style = rng.choice(STEP_STYLES)
    sc.backend = "gloo" if rng.random() < 0.1 else "nccl"
    sc.regex_examples = list(recipe.regex_examples)
    recipe.build(sc)
    fail = max(sc.fail_time, 2.0)
    if rng.random() < 0.6:
        nccl_init(sc, min(1.0, fail / 4), verbose=rng.random() < 0.5)
    t0 = min(15.0, fail * 0.3)
    background(sc, t0, max(t0 + 0.5, fail - 0.5), noise_n, style=sc.step_style)
    herrings = red_herrings(sc, 0.5, fail, rng.choice((0, 0, 1, 1, 2, 3)))
    if hard and label != "nccl-network-error" and rng.random() < 0.4:
        _decoy(sc)
    n_fp = _sample_fingerprints(sc, recipe, taxonomy)
    protected = {ev.rank for ev in sc.events if ev.role == "root" and ev.rank is not None}
    if sc.initiator is not None:
        protected.add(sc.initiator)
    missing: frozenset[int] = frozenset()
    candidates = [r for r in sc.visible if r not in protected]
    if len(candidates) > 2 and rng.random() < 0.3:
        missing = frozenset(rng.sample(candidates, max(1, int(len(candidates) * rng.uniform(0.1, 0.4)))))
    out = render(sc, launcher, ts_fmt, truncation, missing)
    meta: dict[str, Any] = {
        "launcher": launcher,
        "layout": "per-rank-files" if out.logs is not None else "interleaved",
        "msg_version": msg_version,
        "n_ranks": n_ranks,
        "visible_ranks": len(sc.visible) - len(missing),
        "missing_ranks": sorted(missing),
        "timestamps": ts_fmt,
        "noise": noise_n,
        "truncated": bool(out.details["truncated"]),
        "truncation": out.details["truncation"],
        "hard_negative": hard,
        "variant": sc.variant,
        "recipe": recipe.name,
        "step_style": sc.step_style,
        "backend": sc.backend,
        "red_herrings": herrings,
        "fingerprint_lines": n_fp,
        "key_lines": list(sc.key_lines),
    }
    if "file_scheme" in out.details:
        meta["file_scheme"] = out.details["file_scheme"]
    record: dict[str, Any] = {"id": f"synthetic-{stream + '-' if stream else ''}{seed}-{label}-{index}", "label": label}
    if out.logs is not None:
        record["logs"] = out.logs
    else:
        record["log"] = out.log
    record["initiating_rank"] = sc.initiator
    record["source"] = f"synthetic:{recipe.name}:{seed}"
    record["meta"] = meta
    return record


def iter_incidents(
    per_class: int,
    seed: int,
    *,
    labels: Sequence[str],
    launchers: Sequence[str],
    msg_versions: Sequence[str],
    noise: tuple[int, int],
    taxonomy: Taxonomy | None,
    stream: str = "",
) -> Iterator[dict[str, Any]]:
    """Incidents in a fixed order: index-major, then label order."""
    for name, allowed, values in (("launchers", LAUNCHERS, launchers), ("msg_versions", MSG_VERSIONS, msg_versions)):
        bad = [v for v in values if v not in allowed]
        if bad or not values:
            raise ValueError(f"{name}: expected a non-empty subset of {allowed}, found {list(values)!r}")
    lo, hi = noise
    if not (0 <= lo <= hi):
        raise ValueError(f"noise: expected (lo, hi) with 0 <= lo <= hi, found {noise!r}")
    if per_class < 0:
        raise ValueError(f"per_class: expected a non-negative integer, found {per_class!r}")
    for index in range(per_class):
        for label in labels:
            yield make_incident(
                label,
                index,
                seed,
                launchers=launchers,
                msg_versions=msg_versions,
                noise=noise,
                taxonomy=taxonomy,
                stream=stream,
            )
