"""Turning taxonomy fingerprints into log lines, and the generic fallback recipe.

A literal fingerprint is embedded in a line shaped by its ``source`` (an NCCL WARN line,
a kernel line, a Python exception...). A regex fingerprint cannot be sampled on its own:
it is used only when a recipe provides a concrete example line that it matches.
"""

from __future__ import annotations

from collections.abc import Sequence

from denpex_ml.synthetic.fragments import nccl_prefix, traceback
from denpex_ml.synthetic.recipes.base import Recipe, crash_with_fallout, script_frames
from denpex_ml.synthetic.scenario import Scenario
from denpex_ml.taxonomy import Entry, Fingerprint, FingerprintKind, FingerprintRole

__all__ = ["fallback_recipe", "fingerprint_line", "usable_fingerprints"]


def usable_fingerprints(entry: Entry, examples: Sequence[str]) -> list[tuple[Fingerprint, str | None]]:
    """(fingerprint, example) pairs: literals (example None) and regexes with a matching example."""
    out: list[tuple[Fingerprint, str | None]] = []
    for fp in entry.fingerprints:
        if fp.kind is FingerprintKind.LITERAL:
            out.append((fp, None))
            continue
        match = next((ex for ex in examples if fp.search(ex)), None)
        if match is not None:
            out.append((fp, match))
    return out


def fingerprint_line(sc: Scenario, fp: Fingerprint, example: str | None, rank: int) -> str:
    """A plausible line carrying ``fp`` (or the matching ``example`` for a regex)."""
    text = example if example is not None else fp.pattern
    src = fp.source.lower()
    if example is not None or (":" in text[:60] and text[:1].isupper()):
        return text
    if "nccl" in src or text.startswith("NCCL "):
        return (
            f"{nccl_prefix(sc, rank)} {text}"
            if text.startswith("NCCL ")
            else f"{nccl_prefix(sc, rank)} NCCL WARN {text}"
        )
    if src in ("kernel", "dmesg", "driver", "nvrm"):
        return f"[{sc.rng.uniform(1e4, 9e6):.6f}] {text}"
    if fp.role is FingerprintRole.CONTEXT:
        return text
    if text[:1].isupper() and text.split(" ", 1)[0].endswith(("Error", "Exception")):
        return text
    return f"RuntimeError: {text}"


def fallback_recipe(entry: Entry, examples: Sequence[str] = ()) -> Recipe:
    """Generic recipe for ``entry``: the first rank prints a root-cause fingerprint, others time out."""

    def build(sc: Scenario) -> None:
        sc.pick_variant(("fallback",))
        fps = usable_fingerprints(entry, examples)
        roots = [p for p in fps if p[0].role is FingerprintRole.ROOT_CAUSE] or fps
        init = sc.initiator if sc.initiator is not None else 0
        t = sc.rng.uniform(30, 50000)
        if roots:
            fp, ex = sc.pick(roots)
            line = fingerprint_line(sc, fp, ex, init)
        else:
            line = f"RuntimeError: {entry.title}"
        if line.split(":", 1)[0].endswith(("Error", "Exception")):
            line = traceback(sc, script_frames(sc), line)
        crash_with_fallout(sc, t, line)
        for fp, ex in fps:
            if fp.role is FingerprintRole.CONTEXT and sc.chance(0.5):
                sc.context(init, 2.0, fingerprint_line(sc, fp, ex, init))

    return Recipe(entry.id, "fallback", build, tuple(examples))
