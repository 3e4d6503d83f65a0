"""The answer for one job: failure id, confidence, first failing rank, evidence, fix."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from denpex_ml.hang.advice import HangAdvice
from denpex_ml.hang.analysis import HangReport
from denpex_ml.taxonomy import UNKNOWN_ID, Entry
from denpex_ml.taxonomy.groups import NO_FAILURE_ID
from denpex_ml.topology.parse import Topology
from denpex_ml.topology.suspects import Suspect, fill_placeholders, suspect_lines

__all__ = ["Alternative", "Diagnosis", "Evidence"]

#: Alternatives below this probability are left out of the text (they would read "0%").
MIN_SHOWN_PROBABILITY = 0.005


def _clip(text: str, limit: int = 400) -> str:
    """A long evidence line, cut in the middle: the head names the error, the tail often holds
    the hint (PyTorch's OOM message ends with ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments``)."""
    if len(text) <= limit:
        return text
    tail = limit // 4
    return f"{text[: limit - tail - 5]} ... {text[-tail:]}"


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


class Alternative(NamedTuple):
    """A taxonomy entry the model considered, with its probability.

    A tuple (``label, p = alt``) that also reads like a batch row's alternatives
    (:attr:`denpex_ml.batch.JobResult.alternatives`: ``{"label": ..., "probability": ...}``):
    ``alt["label"]``, ``alt["probability"]`` and ``alt.to_dict()`` give the same values.
    """

    label: str
    probability: float

    def __getitem__(self, key: Any) -> Any:  # also by field name, like a batch row
        if isinstance(key, str):
            if key not in self._fields:
                raise KeyError(key)
            return getattr(self, key)
        return tuple.__getitem__(self, key)

    def to_dict(self) -> dict[str, Any]:
        """``{"label": ..., "probability": ...}`` (probability rounded to 4 places), as in batch rows."""
        return {"label": self.label, "probability": round(float(self.probability), 4)}


@dataclass(frozen=True, repr=False)
class Diagnosis:
    """What failed, how sure the model is, where it started, and what to do.

    Attributes
    ----------
    label:
        A taxonomy id; ``"unknown"`` when the model abstains (a failure no entry fits);
        ``"no-failure"`` when the logs show no failure (healthy, still running, cancelled).
    confidence:
        Calibrated probability of ``label``. When abstaining (``unknown``) it is
        ``1 - alternatives[0].probability``: the probability that the closest entry is wrong.
    alternatives:
        Top taxonomy entries with their probabilities, best first (:class:`Alternative`:
        ``(label, probability)`` tuples that also read ``alt["label"]`` like batch rows). They
        come from one distribution over the taxonomy, so they sum to at most 1; for ``unknown``
        the first one is the closest entry (``best_guess``).
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
    topology:
        Where each rank ran (host pseudonym, local rank, GPU index, PCI bus id), as far as the
        logs show it (:class:`~denpex_ml.topology.Topology`).
    suspects:
        For hardware failures and hardware events in the hosts' system output: the nodes / GPUs
        to act on, with the reason and the lines (:class:`~denpex_ml.topology.Suspect`).
    host_names:
        Pseudonym -> real host name, only when the owner asked (``reveal_hosts=True``);
        None otherwise, and then no output holds a real name.
    outside_taxonomy:
        For ``unknown``: the failure the log shows that is known to lie outside the taxonomy
        (a cloud refusing capacity, a scheduler refusing the job: the ``unknown`` entry's
        matching fingerprint, in words); empty otherwise.
    outside_probability:
        The probability that the job's failure lies outside the taxonomy, from the model's
        learned out-of-taxonomy detector (:mod:`denpex_ml.model.outside`), for every answer;
        None for a model without a detector. Sorting an archive by it finds the failures worth
        a new taxonomy entry.
    unknown_reason:
        For ``unknown``, why: ``"outside-fingerprint"`` (a line the taxonomy knows to lie
        outside it, ``outside_taxonomy``), ``"detector"`` (the detector judged the failure
        outside the taxonomy) or ``"unsure"`` (no entry is likely enough to answer); empty
        otherwise.
    """

    label: str
    confidence: float
    alternatives: list[Alternative]
    initiating_rank: int | None
    entry: Entry
    evidence: list[Evidence] = field(default_factory=list)
    initiating_reason: str = ""
    best_guess: str | None = None
    stats: dict[str, Any] = field(default_factory=dict)
    hang: HangReport | None = None
    advice: HangAdvice | None = None
    topology: Topology | None = None
    suspects: list[Suspect] = field(default_factory=list)
    host_names: dict[str, str] | None = field(default=None, repr=False)
    outside_taxonomy: str = ""
    outside_probability: float | None = None
    unknown_reason: str = ""

    def __post_init__(self) -> None:
        alts = [a if isinstance(a, Alternative) else Alternative(str(a[0]), float(a[1])) for a in self.alternatives]
        object.__setattr__(self, "alternatives", alts)

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
            "alternatives": [a.to_dict() for a in self.alternatives],
            "initiating_rank": self.initiating_rank,
            "initiating_reason": self.initiating_reason,
            "outside_taxonomy": self.outside_taxonomy,
            "outside_probability": None if self.outside_probability is None else round(self.outside_probability, 4),
            "unknown_reason": self.unknown_reason,
            "evidence": [ev.to_dict() for ev in self.evidence],
            "root_cause": e.root_cause,
            "fix": [{"step": f.step, "commands": list(f.commands)} for f in e.fix],
            "confirm": list(e.confirm),
            "hang": self.hang.to_dict() if self.hang is not None else None,
            "advice": self.advice.to_dict() if self.advice is not None else None,
            "stats": dict(self.stats),
            "topology": self.topology.to_dict() if self.topology is not None else None,
            "suspects": [s.to_dict(self.host_names) for s in self.suspects],
            **({"host_names": dict(self.host_names)} if self.host_names is not None else {}),
        }

    def shown_alternatives(self, limit: int = 3) -> list[Alternative]:
        """The alternatives worth reading next to ``label``: not ``label`` itself, none that
        would read 0%; for ``unknown`` the closest entries (the first is ``best_guess``)."""
        rest = self.alternatives if self.label not in {a.label for a in self.alternatives} else self.alternatives[1:]
        return [a for a in rest if a.label != self.label and a.probability >= MIN_SHOWN_PROBABILITY][:limit]

    def headline(self) -> str:
        """One line: title, id and how sure (for ``unknown``: how close the closest entry is)."""
        e = self.entry
        if self.abstained and self.outside_taxonomy:
            return f"{e.title}  [{self.label}]  a failure outside the taxonomy: {self.outside_taxonomy}"
        if self.abstained:
            closest = self.alternatives[0] if self.alternatives else None
            if self.unknown_reason == "detector" and self.outside_probability is not None:
                near = f"; the closest entry, {closest.label}, has {closest.probability:.0%}" if closest else ""
                return f"{e.title}  [{self.label}]  judged outside the taxonomy ({self.outside_probability:.0%}){near}"
            if closest is not None:
                return (
                    f"{e.title}  [{self.label}]  no taxonomy entry fits well: the closest, "
                    f"{closest.label}, has {closest.probability:.0%}"
                )
            return f"{e.title}  [{self.label}]"
        return f"{e.title}  [{self.label}]  confidence {self.confidence:.0%}"

    def summary(self, *, max_evidence: int = 6) -> str:
        """A plain-text on-call summary: what, how sure, where, the proof and the fix
        (also ``str(diagnosis)``)."""
        e = self.entry
        out = [self.headline()]
        rank = "not shown in the log" if self.initiating_rank is None else f"rank {self.initiating_rank}"
        out.append(f"First failing rank: {rank}" + (f" ({self.initiating_reason})" if self.initiating_reason else ""))
        shown = self.shown_alternatives(4 if self.abstained else 3)
        if shown:
            lead = "Closest entries: " if self.abstained else "Also possible: "
            out.append(lead + ", ".join(f"{a.label} {a.probability:.0%}" for a in shown))
        out += suspect_lines(self.suspects, self.host_names)
        if self.hang is not None:
            out += self.hang.summary_lines()
        if self.advice is not None:
            out += self.advice.summary_lines()
        if self.evidence:
            out.append("Evidence:")
            for ev in self.evidence[:max_evidence]:
                where = f"rank {ev.rank}" if ev.rank is not None else ev.stream
                out.append(f"  [{where} {ev.source}:{ev.line}] {_clip(ev.text)}")
                out.append(f"      ({ev.why})")
        out.append("Root cause: " + e.root_cause.strip())
        if e.fix:
            out.append("Fix:")
            target = self.suspects[0] if len({s.host for s in self.suspects if s.host}) == 1 else None
            for i, step in enumerate(e.fix, 1):
                out.append(f"  {i}. {step.step}")
                out += [
                    f"       {fill_placeholders(c, target, self.host_names) if target else c}" for c in step.commands
                ]
        if e.confirm:
            out.append("Confirm:")
            out += [f"  - {c}" for c in e.confirm]
        return "\n".join(out)

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        """Short (under 300 characters): the answer, not the evidence (``str()`` has it all)."""
        alts = ", ".join(f"({a.label!r}, {a.probability:.3f})" for a in self.alternatives[:2])
        text = (
            f"Diagnosis(label={self.label!r}, confidence={self.confidence:.3f}, "
            f"initiating_rank={self.initiating_rank!r}, alternatives=[{alts}"
            f"{', ...' if len(self.alternatives) > 2 else ''}], evidence=<{len(self.evidence)} lines>)"
        )
        return text if len(text) < 300 else text[:295] + "...)"

    def _repr_html_(self) -> str:
        """The summary as HTML for notebooks (every piece of log or taxonomy text is escaped)."""

        def esc(value: object) -> str:
            return html.escape(str(value), quote=True)

        e = self.entry
        rank = "not shown in the log" if self.initiating_rank is None else f"rank {self.initiating_rank}"
        parts = [
            '<div class="denpex-diagnosis">',
            f"<p><b>{esc(e.title)}</b> <code>{esc(self.label)}</code> &mdash; "
            + esc(self.headline().split("]  ", 1)[-1])
            + "</p>",
            f"<p>First failing rank: {esc(rank)}"
            + (f" ({esc(self.initiating_reason)})" if self.initiating_reason else "")
            + "</p>",
        ]
        shown = self.shown_alternatives(4 if self.abstained else 3)
        if shown:
            lead = "Closest entries" if self.abstained else "Also possible"
            parts.append(
                f"<p>{lead}: " + ", ".join(f"<code>{esc(a.label)}</code> {a.probability:.0%}" for a in shown) + "</p>"
            )
        if self.evidence:
            parts.append("<table><tr><th>where</th><th>line</th><th>why</th></tr>")
            for ev in self.evidence[:6]:
                where = f"rank {ev.rank}" if ev.rank is not None else ev.stream
                parts.append(
                    f"<tr><td>{esc(where)} {esc(ev.source)}:{ev.line}</td>"
                    f"<td><code>{esc(_clip(ev.text))}</code></td><td>{esc(ev.why)}</td></tr>"
                )
            parts.append("</table>")
        parts.append(f"<p><b>Root cause:</b> {esc(e.root_cause.strip())}</p>")
        if e.fix:
            parts.append("<p><b>Fix:</b></p><ol>")
            for step in e.fix:
                cmds = "".join(f"<br><code>{esc(c)}</code>" for c in step.commands)
                parts.append(f"<li>{esc(step.step)}{cmds}</li>")
            parts.append("</ol>")
        parts.append("</div>")
        return "\n".join(parts)
