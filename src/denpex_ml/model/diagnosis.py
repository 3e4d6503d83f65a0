"""The answer for one job: failure id, confidence, first failing rank, evidence, fix."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from denpex_ml.hang.advice import HangAdvice
from denpex_ml.hang.analysis import HangReport
from denpex_ml.taxonomy import UNKNOWN_ID, Entry
from denpex_ml.taxonomy.groups import NO_FAILURE_ID

__all__ = ["Diagnosis", "Evidence"]


@dataclass(frozen=True)
class Evidence:
    """One masked log line that drove the decision."""

    rank: int | None
    stream: str
    source: str
    line: int
    text: str
    why: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "stream": self.stream,
            "source": self.source,
            "line": self.line,
            "text": self.text,
            "why": self.why,
        }


@dataclass(frozen=True)
class Diagnosis:
    """What failed, how sure the model is, where it started, and what to do.

    Attributes
    ----------
    label:
        A taxonomy id; ``"unknown"`` when the model abstains (a failure no entry fits);
        ``"no-failure"`` when the logs show no failure (healthy, still running, cancelled).
    confidence:
        Calibrated probability of ``label``. When abstaining it is the probability mass
        *not* on the best taxonomy entry (how likely it is that none applies).
    alternatives:
        Top taxonomy entries with their probabilities, best first.
    initiating_rank:
        The rank that failed first, or ``None`` when the log does not show it.
    evidence:
        The masked lines behind the decision, most telling first.
    entry:
        The taxonomy entry of ``label`` (title, root cause, fix, confirm steps).
    hang:
        The hang analysis (per-rank collectives, phases, frames, suspects) when the job hung.
    advice:
        When hang classes compete: the rivals, what tells them apart, what to collect next.
    """

    label: str
    confidence: float
    alternatives: list[tuple[str, float]]
    initiating_rank: int | None
    entry: Entry
    evidence: list[Evidence] = field(default_factory=list)
    initiating_reason: str = ""
    best_guess: str | None = None
    stats: dict[str, Any] = field(default_factory=dict)
    hang: HangReport | None = None
    advice: HangAdvice | None = None

    @property
    def abstained(self) -> bool:
        return self.label == UNKNOWN_ID

    @property
    def no_failure(self) -> bool:
        """The logs show no failure (a healthy, running, cancelled or preempted job)."""
        return self.label == NO_FAILURE_ID

    @property
    def title(self) -> str:
        return self.entry.title

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (what ``denpex-ml classify --json`` prints)."""
        e = self.entry
        return {
            "label": self.label,
            "title": e.title,
            "confidence": round(float(self.confidence), 4),
            "abstained": self.abstained,
            "no_failure": self.no_failure,
            "best_guess": self.best_guess,
            "alternatives": [{"label": lab, "probability": round(float(p), 4)} for lab, p in self.alternatives],
            "initiating_rank": self.initiating_rank,
            "initiating_reason": self.initiating_reason,
            "evidence": [ev.to_dict() for ev in self.evidence],
            "root_cause": e.root_cause,
            "fix": [{"step": f.step, "commands": list(f.commands)} for f in e.fix],
            "confirm": list(e.confirm),
            "hang": self.hang.to_dict() if self.hang is not None else None,
            "advice": self.advice.to_dict() if self.advice is not None else None,
            "stats": dict(self.stats),
        }

    def summary(self, *, max_evidence: int = 6) -> str:
        """A plain-text on-call summary: what, how sure, where, the proof and the fix."""
        e = self.entry
        out = [f"{e.title}  [{self.label}]  confidence {self.confidence:.0%}"]
        if self.abstained and self.best_guess:
            out.append(f"  no taxonomy entry fits well; closest: {self.best_guess}")
        rank = "not shown in the log" if self.initiating_rank is None else f"rank {self.initiating_rank}"
        out.append(f"First failing rank: {rank}" + (f" ({self.initiating_reason})" if self.initiating_reason else ""))
        if self.alternatives[1:]:
            out.append("Also possible: " + ", ".join(f"{lab} {p:.0%}" for lab, p in self.alternatives[1:4]))
        if self.hang is not None:
            out += self.hang.summary_lines()
        if self.advice is not None:
            out += self.advice.summary_lines()
        if self.evidence:
            out.append("Evidence:")
            for ev in self.evidence[:max_evidence]:
                where = f"rank {ev.rank}" if ev.rank is not None else ev.stream
                out.append(f"  [{where} {ev.source}:{ev.line}] {ev.text[:200]}")
                out.append(f"      ({ev.why})")
        out.append("Root cause: " + e.root_cause.strip())
        if e.fix:
            out.append("Fix:")
            for i, step in enumerate(e.fix, 1):
                out.append(f"  {i}. {step.step}")
                out += [f"       {c}" for c in step.commands]
        if e.confirm:
            out.append("Confirm:")
            out += [f"  - {c}" for c in e.confirm]
        return "\n".join(out)
